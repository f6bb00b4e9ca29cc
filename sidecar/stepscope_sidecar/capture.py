"""One capture in this pod: hand the request to the hooks, sample GPUs, wait, upload every rank. What it did is
recorded in the hook directory (capture_records), so a restarted sidecar resumes it from the local copies."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from stepscope_contract.manifest import ArtifactFile, RankManifest
from stepscope_contract.storage import (
    FLIGHT_RECORDER_FILE,
    GPU_METRICS_FILE,
    PYTHON_STACKS_FILE,
    STACKS_FILE,
    TRACE_FILE,
    StorageLocation,
    parse_storage_uri,
)
from stepscope_contract.wire import (
    CaptureRequest,
    CaptureState,
    CaptureStatus,
    HookPhase,
    HookRequest,
    HookState,
    RankMeta,
)
from stepscope_sidecar import capture_records as records
from stepscope_sidecar.agent_metrics import Metrics
from stepscope_sidecar.hook_states import final_state, hook_done, live_state, rank_outcome
from stepscope_sidecar.hookfiles import HookDir
from stepscope_sidecar.nvml import Sampler, write_records
from stepscope_sidecar.rank_files import RankFiles, open_rank_files, regular_file
from stepscope_sidecar.rank_summary import RankSummary, SummarySettings
from stepscope_sidecar.uploader import UploadError, UploadStats, content_type, upload_rank, write_manifest
from stepscope_storage import open_store
from stepscope_storage.checksums import sha256_file
from stepscope_storage.credentials import Credentials
from stepscope_storage.store import StorageError, TransferSettings

log = logging.getLogger(__name__)
ABORT_ACK_SECONDS = 10.0
UPLOAD_MARGIN = 0.1
MAX_UPLOAD_MARGIN_SECONDS = 10.0


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class AgentConfig:
    hook_dir: Path
    pod: str | None = None
    node: str | None = None
    poll_s: float = 0.2
    transfer: TransferSettings = field(default_factory=TransferSettings)
    summary: SummarySettings = field(default_factory=SummarySettings.from_env)


def upload_deadline(capture_deadline: float, timeout_seconds: float, now: float) -> float:
    """Until when a rank's files are sent (retries included): the capture's deadline less the share the operator
    needs to read the outcome before its own deadline (UPLOAD_MARGIN of timeoutSeconds, at most
    MAX_UPLOAD_MARGIN_SECONDS), and at least min(timeoutSeconds, 60 s) after the window."""
    margin = min(MAX_UPLOAD_MARGIN_SECONDS, UPLOAD_MARGIN * timeout_seconds)
    return max(capture_deadline - margin, now + min(float(timeout_seconds), 60.0))


class CaptureRun:
    def __init__(
        self,
        request: CaptureRequest,
        config: AgentConfig,
        hooks: HookDir,
        metrics: Metrics,
        started_at: datetime | None = None,
    ) -> None:
        """`started_at`: when a capture that a restarted sidecar resumes began (its deadline runs from then)."""
        self.request = request
        self.config = config
        self.hooks = hooks
        self.metrics = metrics
        now = _now()
        started = started_at or now
        self.status = CaptureStatus(
            capture_id=request.capture_id, state=CaptureState.ARMED, started_at=started, updated_at=now
        )
        self._abort = asyncio.Event()
        self._started_mono = time.monotonic() - (now - started).total_seconds()
        self.deadline = self._started_mono + request.options.timeout_seconds
        self.task: asyncio.Task[None] | None = None

    @property
    def capture_id(self) -> str:
        return self.request.capture_id

    def _set(self, state: CaptureState, message: str | None = None) -> None:
        self.status.state = state
        if message is not None:
            self.status.message = message
        self.status.updated_at = _now()

    def start(self) -> None:
        self.hooks.write_request(HookRequest.from_options(self.capture_id, self.request.options, time.time()))
        assert self.status.started_at is not None
        records.save_request(self.hooks, self.request, self.status.started_at)
        self.task = asyncio.create_task(self._run(), name=f"capture-{self.capture_id}")

    def resume(self) -> None:
        """Carry on a capture an earlier sidecar process of this pod started (its hook request is left as it is)."""
        log.warning("resuming capture %s started at %s from the hook directory", self.capture_id,
                    self.status.started_at)  # fmt: skip
        self.task = asyncio.create_task(self._run(), name=f"capture-{self.capture_id}")

    async def abort(self) -> None:
        if self.status.state.terminal:
            return
        self._abort.set()
        req = self.hooks.request_path.read_text(encoding="utf-8") if self.hooks.request_path.exists() else ""
        if self.capture_id in req:
            hook_req = HookRequest.model_validate_json(req)
            hook_req.abort = True
            hook_req.requested_at = time.time()
            self.hooks.write_request(hook_req)
        if self.task is not None:
            await asyncio.wait({self.task}, timeout=10)

    # ------------------------------------------------------------------ the capture's life

    async def _run(self) -> None:
        try:
            await self._run_inner()
        except Exception as exc:  # never leave a capture hanging in a non-terminal state
            log.exception("capture %s failed", self.capture_id)
            self._set(CaptureState.FAILED, f"sidecar error: {exc!r}")
        finally:
            self.hooks.clear_request(self.capture_id)
            self.metrics.captures.labels(state=self.status.state.value).inc()
            if self.status.state.terminal:
                with contextlib.suppress(OSError):
                    records.save_status(self.hooks, self.status)

    async def _run_inner(self) -> None:
        opts = self.request.options
        sampler: Sampler | None = None
        if opts.gpu_metrics.enabled:
            sampler = Sampler(opts.gpu_metrics.interval_ms / 1000.0)
            await asyncio.to_thread(sampler.start)
        states, timed_out = await self._wait_for_hooks()
        if sampler is not None:
            await asyncio.to_thread(sampler.stop)
            self.metrics.gpu_samples.inc(len(sampler.records))
        if self._abort.is_set():
            self._set(CaptureState.ABORTED, "aborted")
            await self._wait_for_abort_ack()
            return
        ranks = sorted(states)
        self.status.ranks = ranks
        if not ranks:
            self._set(CaptureState.FAILED, "no hook reported in before the capture deadline (is the hook loaded?)")
            return
        self._set(CaptureState.UPLOADING)
        results = await asyncio.gather(
            *(asyncio.to_thread(self._upload_rank, r, states[r], sampler, timed_out) for r in ranks)
        )
        outcomes = {r: outcome for r, (outcome, _) in zip(ranks, results, strict=True)}
        # one message per rank, and the rank named only when the pod holds several (the operator names the pod's)
        messages = [f"rank {r}: {msg}" if len(ranks) > 1 else msg for r, (_, msg) in zip(ranks, results, strict=True)]
        messages = [m for m in messages if m]
        self.status.steps_captured = min(
            (s.steps_captured for s in states.values() if s.capture_id == self.capture_id), default=0
        )
        self._set(final_state(outcomes, aborted=False), "; ".join(messages))

    async def _wait_for_hooks(self) -> tuple[dict[int, HookState], bool]:
        """Poll the hooks' states until every rank is done with this capture, the deadline passes or abort."""
        while True:
            states = await asyncio.to_thread(self.hooks.states)
            self.status.ranks = sorted(states)
            expected = max([len(states), *[s.local_world_size or 0 for s in states.values()]])
            done = [s for s in states.values() if hook_done(s, self.capture_id)]
            if states:
                self._set(live_state(list(states.values()), self.capture_id))
            if states and len(done) == len(states) and len(states) >= expected:
                return states, False
            if self._abort.is_set():
                return states, False
            if time.monotonic() >= self.deadline:
                return states, True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._abort.wait(), timeout=self.config.poll_s)

    async def _wait_for_abort_ack(self) -> None:
        """Leave the abort request in place until every hook that armed this capture has dropped it."""
        end = time.monotonic() + ABORT_ACK_SECONDS
        while time.monotonic() < end:
            states = await asyncio.to_thread(self.hooks.states)
            if all(s.capture_id != self.capture_id or hook_done(s, self.capture_id) for s in states.values()):
                return
            await asyncio.sleep(self.config.poll_s)

    # ------------------------------------------------------------------ upload (worker thread)

    def _upload_rank(
        self, rank: int, state: HookState, sampler: Sampler | None, timed_out: bool
    ) -> tuple[CaptureState, str]:
        """Upload one rank's files, manifest last; delete the local copy only after a confirmed upload (a rank an
        earlier sidecar process uploaded is taken from its record)."""
        done = records.uploaded_rank(self.hooks, self.capture_id, rank)
        if done is not None:
            self.status.artifacts.extend(done.artifacts)
            return done.state, done.message
        rank_dir = self.hooks.rank_dir(self.capture_id, rank)
        errors: list[str] = []
        ours = state.capture_id == self.capture_id
        outcome = rank_outcome(state if ours else None)
        if not ours or not hook_done(state, self.capture_id):
            phase = state.phase.value if ours else "never saw the request"
            errors.append(f"capture deadline passed, hook phase: {phase}" if timed_out else f"hook phase: {phase}")
            outcome = CaptureState.FAILED
        elif state.message and outcome is not CaptureState.UPLOADED:
            errors.append(state.message)
        meta, meta_error = self.hooks.meta(self.capture_id, rank)
        if meta_error:
            errors.append(meta_error)
        if meta is not None and meta.error and not any(meta.error in e or e in meta.error for e in errors):
            errors.append(meta.error)

        gpu_note = "not requested"
        if sampler is not None:
            gpu_note = sampler.status
            if sampler.records:
                write_records(sampler.records, rank_dir / GPU_METRICS_FILE, state.local_rank)
        names = (TRACE_FILE, GPU_METRICS_FILE, STACKS_FILE, FLIGHT_RECORDER_FILE, PYTHON_STACKS_FILE)
        # Opened without following links, regular files only, read through the open descriptors (rank_files.py).
        with open_rank_files(self.hooks.root, self.hooks.rank_parts(self.capture_id, rank), names) as held:
            for why in held.refused:
                log.warning("capture %s, rank %d: not uploaded: %s", self.capture_id, rank, why)
                errors.append(f"not uploaded: {why}")
            wrote_trace = ours and state.phase is HookPhase.WRITTEN
            if outcome is CaptureState.UPLOADED and wrote_trace and held.get(TRACE_FILE) is None:
                errors.append("the hook reported a trace but it is missing")
                outcome = CaptureState.FAILED
            manifest = self._manifest(rank, outcome, held=held, meta=meta, gpu_note=gpu_note, errors=errors)
            summary = None
            if outcome is CaptureState.UPLOADED and wrote_trace:  # summarised here while the trace uploads
                summary = RankSummary.start(rank_dir / TRACE_FILE, rank, self.config.summary, self.capture_id)
            session = parse_storage_uri(self.request.destination.session_uri)
            files = [rank_dir / f.name for f in held.files]
            return self._upload(session, manifest, files, rank_dir, outcome=outcome, errors=errors, summary=summary,
                                sources=held.sources())  # fmt: skip

    def _manifest(
        self,
        rank: int,
        outcome: CaptureState,
        *,
        held: RankFiles,
        meta: RankMeta | None,
        gpu_note: str,
        errors: list[str],
    ) -> RankManifest:
        return RankManifest(
            capture_id=self.capture_id,
            namespace=self.request.session.namespace,
            session=self.request.session.name,
            pod=self.config.pod,
            node=self.config.node,
            rank=rank,
            state=outcome,
            files=[
                ArtifactFile(name=f.name, size=f.size, sha256=sha256_file(f.source), content_type=content_type(f.name))
                for f in held.files
            ],
            meta=meta,
            gpu_metrics=gpu_note,
            errors=errors,
            capture_started_at=self.status.started_at,
            capture_finished_at=_now(),
        )

    def _upload(
        self,
        session: StorageLocation,
        manifest: RankManifest,
        files: list[Path],
        rank_dir: Path,
        *,
        outcome: CaptureState,
        errors: list[str],
        summary: RankSummary | None = None,
        sources: dict[str, Path] | None = None,
    ) -> tuple[CaptureState, str]:
        """Files, the rank's summary (when one is being made), then manifest; the local copy goes only once
        everything is confirmed in storage."""
        stats = UploadStats()
        deadline = upload_deadline(self.deadline, self.request.options.timeout_seconds, time.monotonic())
        try:
            store = open_store(session, self.request.destination, Credentials.from_env(), self.config.transfer)
            then = (lambda: regular_file(summary.finish())) if summary is not None else None
            uploaded = upload_rank(store, session, manifest, files, rank_dir, deadline=deadline, stats=stats,
                                   then=then, sources=sources)  # fmt: skip
        except (UploadError, StorageError, OSError) as exc:
            if summary is not None and summary.popen.poll() is None:
                summary.popen.kill()
            self.metrics.upload_failures.inc()
            self.metrics.upload_retries.inc(stats.retries)
            manifest.errors.append(str(exc))
            manifest.state = CaptureState.FAILED
            manifest.upload_attempts = stats.files + stats.retries + 1
            write_manifest(manifest, rank_dir)
            return CaptureState.FAILED, f"{exc} (local copy kept in {rank_dir})"
        self.metrics.upload_bytes.inc(stats.bytes)
        self.metrics.upload_retries.inc(stats.retries)
        self.status.artifacts.extend(uploaded)
        message = "; ".join(errors)
        if stats.retries:
            message = f"{message}; " if message else ""
            message += f"uploaded after {stats.retries} retr{'y' if stats.retries == 1 else 'ies'}"
        done = records.UploadedRank(state=outcome, message=message, artifacts=uploaded)
        records.save_rank(self.hooks, self.capture_id, manifest.rank, done)
        shutil.rmtree(rank_dir, ignore_errors=True)  # every file confirmed in storage
        return outcome, message
