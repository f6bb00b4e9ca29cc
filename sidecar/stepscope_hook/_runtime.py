"""The hook's state machine: step boundaries, capture requests, the watchdog, state files.

Idle cost per step: one monotonic clock read, two attribute updates and one comparison; the request file
is stat'ed at most every `poll_seconds`. Every entry point swallows errors: an unexpected one is written to
the state file and switches the hook off, the training process never sees it.

Evidence for hangs and desyncs (Python stacks + PyTorch's Flight Recorder dump) is written from the watchdog
thread, so it comes even while the training thread is stuck: when no step boundary comes within the request's
stepTimeoutSeconds (hang), when a dumpOnly request arrives (on demand), and -- from an atexit handler -- when
the training process exits while a capture is armed or running (e.g. a collective failed because a peer died).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import platform
import socket
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from ._capture import CaptureError, ProfilerRun
from ._files import read_json, write_json_atomic, write_text_atomic
from ._flight_recorder import write_flight_recorder
from ._options import dump_only, read_options, step_timeout
from ._sampler import StackSampler
from ._stacks import WATCHDOG_THREAD, format_all_stacks, format_exit_stacks
from ._telemetry import StepRecorder, open_recorder

REQUEST_FILE = "request.json"
STATE_DIR = "state"
CAPTURES_DIR = "captures"
TRACE_FILE = "trace.pt.trace.json.gz"
STACKS_FILE = "stacks.txt"
PYTHON_STACKS_FILE = "python_stacks.folded"
META_FILE = "meta.json"

IDLE = "idle"
ARMED = "armed"
CAPTURING = "capturing"
WRITTEN = "written"
HUNG = "hung"
DUMPED = "dumped"
FAILED = "failed"
ABORTED = "aborted"
DISABLED = "disabled"


def _env_int(name: str) -> Optional[int]:
    value = os.environ.get(name, "").strip()
    return int(value) if value.lstrip("-").isdigit() else None


class _Active:
    """The capture this process is working on."""

    def __init__(self, request: Dict[str, Any], now: float) -> None:
        self.options = read_options(request)  # ValueError when an option is wrong
        self.capture_id = str(request["captureId"])
        self.steps = int(self.options["steps"])
        self.skip_left = int(self.options["skipSteps"])
        self.step_timeout = float(self.options["stepTimeoutSeconds"])
        self.phase = ARMED
        self.run: Optional[ProfilerRun] = None
        self.sampler: Optional[StackSampler] = None
        self.captured = 0
        self.durations_ms: List[float] = []
        self.step_started = now
        self.armed_at = now


def _stop_sampler(active: _Active) -> Optional[StackSampler]:
    """Stop the capture's stack sampler, if it has one; returns it (its counts stay). Never raises."""
    sampler, active.sampler = active.sampler, None
    if sampler is not None:
        with contextlib.suppress(Exception):
            sampler.stop()
    return sampler


class Hook:
    def __init__(self, hook_dir: str, poll_seconds: float = 0.2) -> None:
        self.hook_dir = hook_dir
        self.request_path = os.path.join(hook_dir, REQUEST_FILE)
        self.poll_seconds = poll_seconds
        self.enabled = True
        self.explicit = False
        self.registered = False
        self.step_count = 0
        self.last_step = time.monotonic()
        self.next_check = 0.0
        self.active: Optional[_Active] = None
        self.handled: List[str] = []
        self.rank = 0
        self.world_size = 1
        self.local_rank: Optional[int] = None
        self.local_world_size: Optional[int] = None
        self.lock = threading.RLock()
        self._request_sig: Optional[Tuple[int, int]] = None
        self._pending: Optional[Dict[str, Any]] = None
        self._watchdog: Optional[threading.Thread] = None
        self._handle: Any = None
        self.telemetry: Optional[StepRecorder] = None  # step telemetry ring (from the first step boundary)
        self._was_busy = False  # a capture was in hand at the previous boundary (its export ends the next step)

    # ------------------------------------------------------------------ step boundaries (training thread)

    def optimizer_hook(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """torch.optim.optimizer.register_optimizer_step_post_hook callback."""
        if not self.explicit:
            self.on_step()

    def explicit_step(self) -> None:
        """stepscope_hook.step(): once called, optimizer steps no longer count (no double boundaries)."""
        self.explicit = True
        self.on_step()

    def on_step(self) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        recorder = self.telemetry
        if recorder is not None:
            busy = self.active is not None
            recorder.record(now, busy or self._was_busy)
            self._was_busy = busy
        self.last_step = now
        self.step_count += 1
        if self.active is None and now < self.next_check:
            return
        try:
            self._boundary(now)
        except Exception as exc:
            self.disable("internal error at a step boundary: %r" % (exc,))

    def _boundary(self, now: float) -> None:
        with self.lock:
            if not self.enabled:
                return
            if not self.registered:
                self._register(now)
            if now >= self.next_check:
                self.next_check = now + self.poll_seconds
                self._poll_request(now)
            if self.active is not None:
                self._advance(now)

    def _register(self, now: float) -> None:
        """First step boundary: learn who we are, report in, start the watchdog and the step telemetry."""
        self.registered = True
        rank = _env_int("RANK")
        world = _env_int("WORLD_SIZE")
        if rank is None or world is None:
            with contextlib.suppress(Exception):
                import torch.distributed as dist

                if dist.is_available() and dist.is_initialized():
                    rank, world = dist.get_rank(), dist.get_world_size()
        self.rank = max(rank or 0, 0)
        self.world_size = max(world or 1, 1)
        self.local_rank = _env_int("LOCAL_RANK")
        self.local_world_size = _env_int("LOCAL_WORLD_SIZE")
        self.write_state(IDLE)
        self._watchdog = threading.Thread(target=self._watch, name=WATCHDOG_THREAD, daemon=True)
        self._watchdog.start()
        atexit.register(self.at_exit)
        self.telemetry = open_recorder(self.hook_dir, self.rank, self.world_size, now)
        if self.telemetry is not None:
            atexit.register(self.telemetry.close)

    # ------------------------------------------------------------------ requests

    def _read_new_request(self) -> Optional[Dict[str, Any]]:
        """request.json when it changed since the last look, else None."""
        try:
            st = os.stat(self.request_path)
        except OSError:
            self._request_sig = None
            return None
        sig = (st.st_mtime_ns, st.st_size)
        if sig == self._request_sig:
            return None
        data = read_json(self.request_path)
        if data is None:
            return None  # half-written or garbage: look again next time
        self._request_sig = sig
        return data

    def _poll_request(self, now: float) -> None:
        data = self._read_new_request()
        if data is not None:
            self._pending = data
        data = self._pending
        if data is None or (dump_only(data) and not data.get("abort")):
            return  # a dump request is the watchdog's: it answers even while this thread is stuck
        capture_id = str(data.get("captureId", ""))
        active = self.active
        if data.get("abort"):
            self._pending = None
            if active is not None and active.capture_id == capture_id:
                self._finish_abort(active)
            elif capture_id and capture_id not in self.handled:
                self._mark_handled(capture_id)
                self.write_state(ABORTED, capture_id=capture_id, message="aborted before it started")
            return
        if not capture_id or capture_id in self.handled or active is not None:
            self._pending = None
            return
        self._pending = None
        self._mark_handled(capture_id)
        try:
            self.active = _Active(data, now)
        except (KeyError, TypeError, ValueError) as exc:
            self.write_state(FAILED, capture_id=capture_id, message="invalid request: %r" % (exc,))
            return
        self.write_state(ARMED, capture_id=capture_id)

    def _mark_handled(self, capture_id: str) -> None:
        self.handled.append(capture_id)
        del self.handled[:-64]

    # ------------------------------------------------------------------ the capture

    def _advance(self, now: float) -> None:
        active = self.active
        assert active is not None
        if active.phase == HUNG:  # the watchdog gave up on it; training resumed: drop the recording
            self.active = None
            _stop_sampler(active)
            if active.run is not None:
                active.run.discard()
            return
        if active.phase == ARMED:
            if active.skip_left > 0:
                active.skip_left -= 1
                return
            self._start(active, now)
            return
        active.durations_ms.append(round((now - active.step_started) * 1000.0, 3))
        active.step_started = now
        active.captured += 1
        run = active.run
        assert run is not None
        if active.captured >= active.steps:
            self._finish_written(active, run)
        else:
            run.next_step()

    def _start(self, active: _Active, now: float) -> None:
        try:
            run = ProfilerRun(active.options, self._identity(active.capture_id))
            active.run = run
            run.start()
        except CaptureError as exc:
            self._fail(active, str(exc), disable=False)
            return
        except Exception as exc:
            self._fail(active, "profiler failed to start: %r" % (exc,), disable=True)
            return
        active.phase = CAPTURING
        active.step_started = now
        hz = int(active.options["pythonSampling"])
        if hz > 0:  # the training thread is the one at this step boundary
            active.sampler = StackSampler(hz, threading.get_ident())
            active.sampler.start()
        self.write_state(CAPTURING, capture_id=active.capture_id)

    def _finish_written(self, active: _Active, run: ProfilerRun) -> None:
        out = self.output_dir(active.capture_id)
        sampler = _stop_sampler(active)
        try:
            run.finish(os.path.join(out, TRACE_FILE))
        except Exception as exc:
            self._fail(active, "trace export failed: %r" % (exc,), disable=True)
            return
        if sampler is not None:
            with contextlib.suppress(Exception):  # the stacks are an aid: the trace is written without them
                sampler.write(os.path.join(out, PYTHON_STACKS_FILE), active.captured)
        self.active = None
        self._write_meta(active, device=run.device)
        self.write_state(WRITTEN, capture_id=active.capture_id, steps_captured=active.captured)

    def _finish_abort(self, active: _Active) -> None:
        self.active = None
        _stop_sampler(active)
        if active.run is not None and active.phase != HUNG:
            active.run.discard()
        self.write_state(ABORTED, capture_id=active.capture_id, message="aborted", steps_captured=active.captured)

    def _fail(self, active: _Active, reason: str, disable: bool) -> None:
        self.active = None
        _stop_sampler(active)
        if active.run is not None:
            active.run.discard()
        self._write_meta(active, error=reason)
        if disable:
            self.disable(reason, capture_id=active.capture_id)
        else:
            self.write_state(FAILED, capture_id=active.capture_id, message=reason, steps_captured=active.captured)

    # ------------------------------------------------------------------ watchdog (its own thread)

    def _watch(self) -> None:
        while self.enabled:
            busy = self.active is not None or self._pending is not None
            time.sleep(0.1 if busy else 0.5)
            try:
                self._watch_once()
            except Exception as exc:
                self.disable("internal error in the watchdog: %r" % (exc,))
                return

    def _watch_once(self) -> None:
        with self.lock:
            if not self.enabled:
                return
            now = time.monotonic()
            if self.active is None and self._pending is None:
                # the training may be stuck already: a request must still get its evidence
                data = self._read_new_request()
                if data is not None:
                    self._pending = data
            active = self.active
            if active is not None:
                if active.phase in (ARMED, CAPTURING) and now - self.last_step > active.step_timeout:
                    self._declare_hung(active.capture_id, active, now)
                return
            pending = self._pending
            if pending is None or pending.get("abort"):
                return
            capture_id = str(pending.get("captureId", ""))
            if not capture_id or capture_id in self.handled:
                self._pending = None
                return
            if dump_only(pending):
                self._pending = None
                self._mark_handled(capture_id)
                try:
                    asked = _Active(pending, now)
                except (KeyError, TypeError, ValueError) as exc:
                    self.write_state(FAILED, capture_id=capture_id, message="invalid request: %r" % (exc,))
                    return
                self._dump_on_demand(capture_id, asked, now)
                return
            timeout = step_timeout(pending)
            if now - self.last_step > timeout:
                self._pending = None
                self._mark_handled(capture_id)
                try:
                    fake = _Active(pending, now)
                except (KeyError, TypeError, ValueError) as exc:
                    self.write_state(FAILED, capture_id=capture_id, message="invalid request: %r" % (exc,))
                    return
                self._declare_hung(capture_id, fake, now)

    def _declare_hung(self, capture_id: str, active: _Active, now: float) -> None:
        since = now - self.last_step
        header = "stepscope: rank %d saw no step boundary for %.1f s (capture %s)" % (self.rank, since, capture_id)
        out = self.output_dir(capture_id)
        write_text_atomic(os.path.join(out, STACKS_FILE), format_all_stacks(since, header))
        active.phase = HUNG
        _stop_sampler(active)
        recorder = write_flight_recorder(out, self.rank, self.world_size, "hang")
        # one text for state and meta, the same on every rank: the seconds are in meta.secondsSinceLastStep
        reason = "no step boundary within stepTimeoutSeconds (%g s)" % active.step_timeout
        self._write_meta(active, hung=True, since=since, error=reason, dump_reason="hang", recorder=recorder)
        self.write_state(HUNG, capture_id=capture_id, message=reason, steps_captured=active.captured)

    def _dump_on_demand(self, capture_id: str, active: _Active, now: float) -> None:
        since = now - self.last_step
        header = "stepscope: rank %d, stacks taken on demand, %.1f s after the last step boundary (capture %s)" % (
            self.rank,
            since,
            capture_id,
        )
        out = self.output_dir(capture_id)
        write_text_atomic(os.path.join(out, STACKS_FILE), format_all_stacks(since, header))
        recorder = write_flight_recorder(out, self.rank, self.world_size, "on-demand")
        self._write_meta(active, since=since, dump_reason="on-demand", recorder=recorder)
        message = "" if recorder == "written" else recorder
        self.write_state(DUMPED, capture_id=capture_id, message=message)

    # ------------------------------------------------------------------ exit (atexit, main thread)

    def at_exit(self) -> None:
        """The process ends while a capture is armed or running: leave its evidence. Never raises."""
        with contextlib.suppress(Exception):
            if not self.enabled or not self.lock.acquire(timeout=5.0):
                return
            try:
                self._exit_evidence()
            finally:
                self.lock.release()

    def _exit_evidence(self) -> None:
        now = time.monotonic()
        active = self.active
        if active is None:
            pending = self._pending or self._read_new_request()
            capture_id = str((pending or {}).get("captureId", ""))
            if pending is None or pending.get("abort") or not capture_id or capture_id in self.handled:
                return
            self._mark_handled(capture_id)
            active = _Active(pending, now)
        elif active.phase not in (ARMED, CAPTURING):
            return
        self.active = None
        _stop_sampler(active)
        if active.run is not None:
            active.run.discard()
        exc = getattr(sys, "last_value", None)
        tb = getattr(sys, "last_traceback", None)
        why = "%s: %s" % (type(exc).__name__, exc) if exc is not None else "no exception"
        reason = "the training process exited during the capture (%s)" % why[:1500]
        out = self.output_dir(active.capture_id)
        header = "stepscope: rank %d exited during capture %s" % (self.rank, active.capture_id)
        write_text_atomic(os.path.join(out, STACKS_FILE), format_exit_stacks(exc, tb, header))
        recorder = write_flight_recorder(out, self.rank, self.world_size, "exit")
        self._write_meta(active, since=now - self.last_step, error=reason, dump_reason="exit", recorder=recorder)
        self.write_state(FAILED, capture_id=active.capture_id, message=reason, steps_captured=active.captured)

    # ------------------------------------------------------------------ files

    def output_dir(self, capture_id: str) -> str:
        return os.path.join(self.hook_dir, CAPTURES_DIR, capture_id, "rank-%d" % self.rank)

    def _identity(self, capture_id: str) -> Dict[str, Any]:
        return {
            "captureId": capture_id,
            "rank": self.rank,
            "worldSize": self.world_size,
            "localRank": self.local_rank,
            "pod": os.environ.get("STEPSCOPE_POD_NAME") or os.environ.get("HOSTNAME") or None,
            "node": os.environ.get("STEPSCOPE_NODE_NAME") or None,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
        }

    def _write_meta(
        self,
        active: _Active,
        *,
        device: str = "cpu",
        hung: bool = False,
        since: Optional[float] = None,
        error: Optional[str] = None,
        dump_reason: Optional[str] = None,
        recorder: Optional[str] = None,
    ) -> None:
        meta = self._identity(active.capture_id)
        torch_mod = sys.modules.get("torch")
        meta.update(
            {
                "torchVersion": str(getattr(torch_mod, "__version__", "")) or None,
                "cudaVersion": getattr(getattr(torch_mod, "version", None), "cuda", None),
                "pythonVersion": platform.python_version(),
                "device": device,
                "stepsRequested": active.steps,
                "stepsCaptured": active.captured,
                "stepDurationsMs": list(active.durations_ms),
                "hung": hung,
                "secondsSinceLastStep": None if since is None else round(since, 3),
                "error": error,
                "dumpReason": dump_reason,
                "flightRecorder": recorder,
            }
        )
        write_json_atomic(os.path.join(self.output_dir(active.capture_id), META_FILE), meta)

    def write_state(
        self, phase: str, capture_id: Optional[str] = None, message: str = "", steps_captured: int = 0
    ) -> None:
        wall_last = time.time() - (time.monotonic() - self.last_step)
        state = {
            "rank": self.rank,
            "worldSize": self.world_size,
            "localRank": self.local_rank,
            "localWorldSize": self.local_world_size,
            "pid": os.getpid(),
            "phase": phase,
            "captureId": capture_id,
            "message": message,
            "step": self.step_count,
            "stepsCaptured": steps_captured,
            "lastStepTime": wall_last,
            "outputDir": self.output_dir(capture_id) if capture_id else None,
            "updatedAt": time.time(),
        }
        write_json_atomic(os.path.join(self.hook_dir, STATE_DIR, "rank-%d.json" % self.rank), state)

    def disable(self, reason: str, capture_id: Optional[str] = None) -> None:
        """Switch the hook off for good; best effort to say why. Never raises."""
        self.enabled = False
        if self.telemetry is not None:
            self.telemetry.close(2)
        with contextlib.suppress(Exception):
            active, self.active = self.active, None
            if active is not None:
                capture_id = capture_id or active.capture_id
                _stop_sampler(active)
                if active.run is not None:
                    active.run.discard()
            if self._handle is not None:
                self._handle.remove()
            self.write_state(DISABLED, capture_id=capture_id, message=reason)
