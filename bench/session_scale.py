"""A session end to end at 64, 256 and 1,024 ranks (or 4,096) on the local cluster: the real operator (a `kopf`
process), the Kubernetes API emulator, moto S3, the runner's analyzer Jobs (one Job, or an Indexed map Job sharded K
ways then the reduce), and simulated sidecars, one listening socket per pod, that "capture" by uploading real Kineto
traces with the sidecar's own uploader (a few shared traces reused under every rank, their `distributedInfo`
rewritten). Each simulated sidecar also summarises its rank's own trace with the analyzer's node summary (the code
the real sidecar runs as a command), in a thread while the trace uploads, and uploads traces/rank<R>/summary.json
(carrying the manifest, as the sidecar's uploader makes it) before the manifest, so the analyzer Job reads one file
of kilobytes per rank; `--no-node-summaries` leaves them out (every trace
is parsed centrally, the baseline).

Prints per size the stage times (resolve, fan-out, uploads, collect, map, reduce, status), apply -> report, the
node summaries' CPU time, the CPU seconds each group of processes used from apply to report (beside what the
machine's CPUs give in that time: on a shared 2-core machine the figure is bound by them), and the peak RSS per
process (operator, moto, the harness, each analyzer pod with its workers), then how each grows from the smallest
size to the largest, and the bars as ratios: apply -> report <= 30 s at 1,024 ranks and <= 60 s at 4,096, analyzer
pods <= 1 GiB each; the center's critical path apart from the simulation: from the last upload to the status
written (collect, analysis, status), with the CPU seconds each group used in it (the operator and the analyzer pods
are the center; moto serves the center's reads there; the simulated sidecars are idle by then); and, first, the
node summary of the 54 MB HTA trace as the sidecar runs it (its peak RSS against 256 MiB, its time as a ratio of
that trace's upload time).
Exit 1 when a bar is missed or a session does not succeed.

Traces: by default the two ranks of HTA's sampled 128-rank test trace (../shared/data/traces/hta, from
facebookresearch/HolisticTraceAnalysis tests/data/trace_filter, MIT); `--traces` takes others.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import hashlib
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from aiohttp import web
from loopback_sidecars import arrival_port, serve_captures

from stepscope_contract.manifest import ArtifactFile, RankManifest
from stepscope_contract.storage import (
    RANK_SUMMARY_FILE,
    REPORT_JSON,
    TRACE_FILE,
    AddressingStyle,
    parse_storage_uri,
    report_location,
)
from stepscope_contract.tokens import namespace_token
from stepscope_contract.wire import CaptureRequest, CaptureState, RankMeta
from stepscope_local.cluster import LocalCluster
from stepscope_local.install import MASTER_TOKEN, STORAGE_BASE, install, operator_env
from stepscope_local.runner.controller import SKIP_ANNOTATION
from stepscope_sidecar.rank_summary import SummarySettings
from stepscope_sidecar.uploader import UploadStats, upload_file, upload_rank
from stepscope_storage import Connection, Credentials, Store, open_store

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "data" / "traces" / "hta"
DEFAULT_TRACES = [TRACES / "sampled_128rank_rank0.json.gz", TRACES / "sampled_128rank_rank1.json.gz"]
API = "stepscope.dev/v1alpha1"
NAMESPACE = "default"
HOST = "127.0.13.1"
SIDECAR_TOKEN = namespace_token(MASTER_TOKEN, NAMESPACE)
TERMINAL = ("Succeeded", "PartiallySucceeded", "Failed")
BAR_SECONDS = {1024: 30.0, 4096: 60.0}  # apply -> report, per session size
BAR_POD_MB = 1024.0
BAR_SUMMARY_MB = 256.0  # the node summary of the 54 MB trace
LARGE_TRACE = TRACES / "nccl_2rank_rank1_large.json.gz"  # 216k events, 54 MB of JSON
_DIST = re.compile(r'"distributedInfo"\s*:\s*\{[^{}]*\}')


# ---- traces ------------------------------------------------------------------------------------------------------
def prepare_traces(sources: list[Path], ranks: int, folder: Path) -> list[Path]:
    """One gzip trace per rank, `sources` reused round-robin, each saying its own rank and the world size."""
    try:
        from isal import igzip as gz  # the same inflater/deflater family the analyzer prefers

        def compress(data: bytes) -> bytes:
            return gz.compress(data, compresslevel=1)
    except ImportError:

        def compress(data: bytes) -> bytes:
            return gzip.compress(data, compresslevel=1)

    texts = [gzip.decompress(p.read_bytes()).decode() for p in sources]
    paths = []
    for rank in range(ranks):
        text = texts[rank % len(texts)]
        info = json.dumps({"backend": "nccl", "rank": rank, "world_size": ranks})
        body, count = _DIST.subn(f'"distributedInfo": {info}', text, count=1)
        if count == 0:  # a trace without it: add one after the opening brace
            body = '{"distributedInfo": ' + info + ", " + text.lstrip()[1:]
        path = folder / f"rank{rank}" / TRACE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(compress(body.encode()))
        paths.append(path)
    return paths


# ---- simulated sidecars ------------------------------------------------------------------------------------------
def _warm(_: int) -> None:
    import boto3  # noqa: F401 - what the first upload of each uploader process would import

    import stepscope_analyzer.ranks.node_summaries  # noqa: F401 - and what its summaries run


_STORES: dict[str, Store] = {}  # per uploader process: one client per session folder
_SUMMARIES = ThreadPoolExecutor(1)  # per uploader process: the summary beside the upload, as the sidecar's command


def _summarise(data: bytes, rank: int, rank_dir: Path, capture_id: str) -> tuple[Path, float]:
    """The rank's node summary of its own trace (the analyzer's code the sidecar runs), written into `rank_dir`."""
    from stepscope_analyzer.ranks.node_summaries import summarise_trace

    node = summarise_trace(data, rank, 50, capture_id)
    rank_dir.mkdir(parents=True, exist_ok=True)
    path = rank_dir / RANK_SUMMARY_FILE
    path.write_text(node.model_dump_json(by_alias=True, exclude_none=True))
    return path, node.seconds or 0.0


def upload_one(
    trace: str, request_json: str, rank: int, world: int, manifests: str, credentials: Credentials, summarise: bool
) -> tuple[list[dict[str, Any]], float]:
    """One rank's "capture" in an uploader process: its trace, its summary (made while the trace uploads) then its
    manifest, with the sidecar's uploader; the artifacts and the summary's CPU seconds."""
    request = CaptureRequest.model_validate_json(request_json)
    uri = request.destination.session_uri
    if uri not in _STORES:
        _STORES[uri] = open_store(parse_storage_uri(uri), request.destination, credentials)
    path = Path(trace)
    data = path.read_bytes()
    now = datetime.now(UTC)
    manifest = RankManifest(
        capture_id=request.capture_id,
        namespace=request.session.namespace,
        session=request.session.name,
        pod=f"train-{rank}",
        node=f"node-{rank // 8}",
        rank=rank,
        state=CaptureState.UPLOADED,
        files=[
            ArtifactFile(
                name=TRACE_FILE,
                size=len(data),
                sha256=hashlib.sha256(data).hexdigest(),
                content_type="application/gzip",
            )
        ],
        meta=RankMeta(
            capture_id=request.capture_id,
            rank=rank,
            world_size=world,
            pid=os.getpid(),
            steps_requested=request.options.steps,
            steps_captured=request.options.steps,
        ),
        capture_started_at=now,
        capture_finished_at=now,
    )
    rank_dir = Path(manifests) / request.capture_id / f"rank{rank}"
    summary = _SUMMARIES.submit(_summarise, data, rank, rank_dir, request.capture_id) if summarise else None
    uploaded = upload_rank(_STORES[uri], parse_storage_uri(uri), manifest, [path], rank_dir,
                           deadline=time.monotonic() + 600, stats=UploadStats(),
                           then=(lambda: summary.result()[0]) if summary is not None else None)  # fmt: skip
    return [a.model_dump(by_alias=True) for a in uploaded], summary.result()[1] if summary is not None else 0.0


@dataclass
class Capture:
    state: CaptureState = CaptureState.ARMED
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""


class Sidecars:
    """One listening socket per pod on one address. A start request is answered `armed` at once and the rank's trace
    is uploaded in the background with the sidecar's uploader (manifest last); GET reports armed/uploading/uploaded."""

    def __init__(
        self,
        ports_for: int,
        traces: list[Path],
        workdir: Path,
        credentials: Credentials,
        uploaders: int,
        summarise: bool = True,
    ) -> None:
        self.count = ports_for
        self.summarise = summarise
        self.summary_cpu: dict[str, list[float]] = {}
        self.traces = traces
        self.workdir = workdir
        self.credentials = credentials
        self.ports: list[int] = []
        self.rank_of: dict[int, int] = {}
        self.captures: dict[tuple[int, str], Capture] = {}
        self.world: dict[str, int] = {}  # session name -> world size (set by the harness before apply)
        self.started: dict[str, list[float]] = {}
        self.uploaded: dict[str, list[float]] = {}
        self.failures: list[str] = []
        self._lock = threading.Lock()
        # uploads run in processes of their own, as sidecars do (not in the GIL of the harness, which also serves
        # the sockets, the API emulator and the runner)
        self._uploaders = uploaders
        self._pool = ProcessPoolExecutor(uploaders, mp_context=multiprocessing.get_context("spawn"))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def _upload(self, port: int, request: CaptureRequest) -> None:
        capture = self.captures[(port, request.capture_id)]
        rank = self.rank_of[port]
        capture.state = CaptureState.UPLOADING
        job = (
            str(self.traces[rank]),
            request.model_dump_json(by_alias=True),
            rank,
            self.world.get(request.session.name, 1),
        )
        future = self._pool.submit(upload_one, *job, str(self.workdir / "manifests"), self.credentials, self.summarise)

        def done(_: Future[tuple[list[dict[str, Any]], float]]) -> None:
            try:
                capture.artifacts, cpu = future.result()
                capture.state = CaptureState.UPLOADED
                if self.summarise:
                    with self._lock:
                        self.summary_cpu.setdefault(request.session.name, []).append(cpu)
            except Exception as exc:  # reported as the capture's state, as a sidecar does
                capture.state, capture.message = CaptureState.FAILED, str(exc)
                self.failures.append(f"rank {rank}: {exc}")
            with self._lock:
                self.uploaded.setdefault(request.session.name, []).append(time.monotonic())

        future.add_done_callback(done)

    def _reply(self, port: int, cid: str, capture: Capture, code: int) -> web.Response:
        rank = self.rank_of[port]
        steps = 3 if capture.state is CaptureState.UPLOADED else 0
        body = {"captureId": cid, "state": capture.state.value, "message": capture.message, "ranks": [rank],
                "artifacts": capture.artifacts, "stepsCaptured": steps}  # fmt: skip
        return web.json_response(body, status=code)

    async def _start(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {SIDECAR_TOKEN}":
            return web.json_response({"error": "unauthorized"}, status=401)
        port = arrival_port(request)
        capture_request = CaptureRequest.model_validate(await request.json())
        key = (port, capture_request.capture_id)
        if key in self.captures:
            return self._reply(port, capture_request.capture_id, self.captures[key], 200)
        self.captures[key] = Capture()
        self.started.setdefault(capture_request.session.name, []).append(time.monotonic())
        self._upload(port, capture_request)
        return self._reply(port, capture_request.capture_id, self.captures[key], 202)

    async def _get(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {SIDECAR_TOKEN}":
            return web.json_response({"error": "unauthorized"}, status=401)
        port = arrival_port(request)
        cid = request.match_info["cid"]
        capture = self.captures.get((port, cid))
        if capture is None:
            return web.json_response({"error": "unknown capture"}, status=404)
        return self._reply(port, cid, capture, 200)

    async def _serve(self) -> None:
        self.ports = await serve_captures(HOST, self.count, self._start, self._get)
        self.rank_of = {port: rank for rank, port in enumerate(self.ports)}

    def __enter__(self) -> Sidecars:
        list(self._pool.map(_warm, range(self._uploaders)))  # started and imported before any clock runs
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(300)
        return self

    def __exit__(self, *_: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._pool.shutdown(wait=False, cancel_futures=True)


# ---- memory --------------------------------------------------------------------------------------------------------
class PeakRss:
    """Samples every 0.2 s: the operator, moto, this process, and each analyzer pod (its process and its workers):
    their peak RSS, and the CPU seconds each group of processes used since the last reset (a process that ends
    between two samples loses its last 0.2 s)."""

    def __init__(self, operator_pid: int) -> None:
        self.operator_pid = operator_pid
        self.peaks: dict[str, float] = {}
        self._cpu: dict[tuple[str, int], float] = {}  # (group, pid) -> CPU seconds at the last sample
        self._cpu_base: dict[tuple[str, int], float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def reset(self) -> None:
        """A new session: peaks from now, CPU seconds counted from a sample taken now."""
        with self._lock:
            with contextlib.suppress(Exception):
                self._sample()
            self.peaks = {}
            self._cpu_base = dict(self._cpu)

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds (user + system) per group of processes since the last reset."""
        with self._lock:
            out: dict[str, float] = {}
            for (group, pid), seconds in self._cpu.items():
                out[group] = out.get(group, 0.0) + seconds - self._cpu_base.get((group, pid), 0.0)
            return out

    def _note(self, name: str, rss: float) -> None:
        self.peaks[name] = max(self.peaks.get(name, 0.0), rss / 2**20)

    def _note_cpu(self, group: str, processes: list[psutil.Process]) -> None:
        for p in processes:
            with contextlib.suppress(psutil.Error):
                times = p.cpu_times()
                self._cpu[(group, p.pid)] = times.user + times.system

    def _sample(self) -> None:
        """Each child of this process with its descendants, named by what it runs; a pod's RSS is its whole tree
        (the analyzer and its worker processes), as its cgroup would count it."""
        me = psutil.Process()
        self._note("harness", me.memory_info().rss)
        self._note_cpu("harness", [me])
        uploaders = 0
        for child in me.children():
            with contextlib.suppress(psutil.Error):
                tree = [child, *child.children(recursive=True)]
                rss = sum(p.memory_info().rss for p in tree)
                cmdline = " ".join(child.cmdline())
                group = ""
                if child.pid == self.operator_pid:
                    self._note(group := "operator", rss)
                elif "moto" in cmdline:
                    self._note(group := "moto", rss)
                elif "analyzer-job" in cmdline:
                    mode = re.search(r"--mode (\w+)", cmdline)
                    self._note(f"analyzer {mode.group(1) if mode else 'all'} pod {child.pid}", rss)
                    group = "analyzer pods"
                elif "multiprocessing" in cmdline:
                    uploaders += rss
                    group = "sidecar uploaders"
                if group:
                    self._note_cpu(group, tree)
        self._note("sidecar uploaders", uploaders)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            with contextlib.suppress(Exception), self._lock:
                self._sample()

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()


# ---- the harness ---------------------------------------------------------------------------------------------------
def create_pods(cluster: LocalCluster, sidecars: Sidecars, sizes: list[int]) -> None:
    for rank, port in enumerate(sidecars.ports):
        name = f"train-{rank}"
        labels = {"app": "scale", **{f"upto-{n}": "yes" for n in sizes if rank < n}}
        cluster.api.apply(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": NAMESPACE,
                    "labels": labels,
                    "annotations": {
                        "stepscope.dev/sidecar-port": str(port),
                        "stepscope.dev/rank": str(rank),
                        SKIP_ANNOTATION: "skip",  # the simulated sidecar stands in for the pod's processes
                    },
                },
                "spec": {"nodeName": f"node-{rank // 8}", "containers": [{"name": "trainer", "image": "t"}]},
            }
        )
        cluster.api.patch_status(
            "v1", "pods", NAMESPACE, name,
            {"phase": "Running", "podIP": HOST, "conditions": [{"type": "Ready", "status": "True"}]},
        )  # fmt: skip


def start_operator(cluster: LocalCluster, workdir: Path, concurrency: int) -> tuple[subprocess.Popen[bytes], int]:
    ports_file = workdir / "operator-ports.json"
    env = {
        **operator_env(cluster, workdir, 0, namespaces=NAMESPACE),
        "STEPSCOPE_METRICS_PORT": "0",
        "STEPSCOPE_PORTS_FILE": str(ports_file),
        "STEPSCOPE_SIGNAL_CONCURRENCY": str(concurrency),
    }
    operator = subprocess.Popen(
        [str(Path(sys.executable).parent / "stepscope"), "operator"],
        env=env,
        stdout=(workdir / "operator.log").open("ab"),
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and operator.poll() is None:
        with contextlib.suppress(OSError, ValueError, KeyError):
            health = json.loads(ports_file.read_text())["health"]
            urllib.request.urlopen(f"http://127.0.0.1:{health}/healthz", timeout=2).close()
            return operator, health
        time.sleep(0.3)
    raise RuntimeError(f"the operator did not come up; see {workdir / 'operator.log'}")


@dataclass
class Run:
    ranks: int
    phase: str = ""
    message: str = ""
    stages: dict[str, float] = field(default_factory=dict)
    total: float = 0.0
    peaks: dict[str, float] = field(default_factory=dict)
    analysed: int | None = None
    summary_cpu: list[float] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds per group of processes from apply to the end"""
    center_s: float | None = None
    """the center's critical path: from the last upload to the status written"""
    center_cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds per group of processes in the center's critical path"""


def analysed_ranks(store: Store, artifacts_uri: str | None) -> int | None:
    """How many ranks the stored report.json says were analysed (it holds the named ranks in full, ranks.csv.gz
    every rank's numbers)."""
    if not artifacts_uri:
        return None
    key = report_location(parse_storage_uri(artifacts_uri)).key(REPORT_JSON)
    with contextlib.suppress(Exception):
        return int(json.loads(store.read(key))["diagnosis"]["ranks_analysed"])
    return None


def run_session(cluster: LocalCluster, sidecars: Sidecars, rss: PeakRss, store: Store, ranks: int, shards: int) -> Run:
    name = f"scale-{ranks}"
    sidecars.world[name] = ranks
    rss.reset()
    marks: dict[str, float] = {}
    t0 = time.monotonic()
    cluster.api.apply(
        {
            "apiVersion": API,
            "kind": "ProfileSession",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "targets": {"selector": {"matchLabels": {f"upto-{ranks}": "yes"}}, "maxTargets": max(ranks, 1)},
                "capture": {"steps": 3, "timeoutSeconds": 600},
                "storage": {"uri": STORAGE_BASE},
                "analysis": {"shards": shards},
            },
        }
    )
    status: dict[str, Any] = {}
    at_last_upload: dict[str, float] = {}
    while time.monotonic() - t0 < 900:
        obj = cluster.api.get(API, "profilesessions", NAMESPACE, name) or {}
        status = obj.get("status") or {}
        now = time.monotonic()
        if not at_last_upload and len(sidecars.uploaded.get(name, [])) >= ranks:
            at_last_upload = rss.cpu_seconds()  # the center's CPU counted from here (polled every 50 ms)
        phase, stage = status.get("phase", ""), status.get("analysisStage", "")
        if phase == "Analyzing" and "analyzing" not in marks:
            marks["analyzing"] = now
        if stage == "Reduce" and "reduce" not in marks:
            marks["reduce"] = now
        if phase in TERMINAL:
            marks["terminal"] = now
            break
        time.sleep(0.05)
    run = Run(ranks=ranks, phase=status.get("phase", "timeout"), message=status.get("message", ""))
    run.total = marks.get("terminal", time.monotonic()) - t0
    started = sidecars.started.get(name, [])
    uploads = sidecars.uploaded.get(name, [])
    if started:
        first, last = min(started), max(started)
        run.stages["resolve"] = first - t0
        run.stages["fan-out"] = last - first
        if uploads:
            run.stages["uploads"] = max(uploads) - last
            if "analyzing" in marks:
                run.stages["collect"] = marks["analyzing"] - max(uploads)
    if "analyzing" in marks and "reduce" in marks:
        run.stages["map"] = marks["reduce"] - marks["analyzing"]
    if "reduce" in marks and "terminal" in marks:
        run.stages["reduce+status"] = marks["terminal"] - marks["reduce"]
    elif "analyzing" in marks and "terminal" in marks:  # one analyzer Job (K = 1)
        run.stages["analyse+status"] = marks["terminal"] - marks["analyzing"]
    run.analysed = analysed_ranks(store, status.get("artifactsUri"))
    run.summary_cpu = list(sidecars.summary_cpu.get(name, []))
    time.sleep(0.5)  # one more memory sample after the end
    run.peaks = dict(rss.peaks)
    run.cpu = rss.cpu_seconds()
    if uploads and "terminal" in marks and at_last_upload:
        run.center_s = marks["terminal"] - max(uploads)
        run.center_cpu = {g: run.cpu.get(g, 0.0) - at_last_upload.get(g, 0.0) for g in run.cpu}
    return run


@dataclass
class LargeTrace:
    upload_s: float
    summary_s: float
    summary_cpu_s: float
    peak_mb: float


def large_trace_check(store: Store, workdir: Path) -> LargeTrace:
    """The 54 MB trace as one sidecar handles it: its upload with the sidecar's uploader, and its node summary run as
    the sidecar runs it (the command, nice, one CPU, its address-space limit)."""
    from stepscope_sidecar.rank_summary import RankSummary

    local = workdir / "large" / TRACE_FILE
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_bytes(LARGE_TRACE.read_bytes())
    started = time.perf_counter()
    upload_file(store, local, "bench-large/traces/rank1.pt.trace.json.gz", deadline=time.monotonic() + 300,
                stats=UploadStats())  # fmt: skip
    upload_s = time.perf_counter() - started
    started = time.perf_counter()
    running = RankSummary.start(local, 1, SummarySettings(), "c-bench")
    if running is None:
        raise RuntimeError("the node summary command did not start (is the analyzer installed?)")
    _, err = running.popen.communicate(timeout=300)
    summary_s = time.perf_counter() - started
    found = re.search(r"in ([\d.]+) s CPU, peak (\d+) MiB", err.decode())
    if running.popen.returncode != 0 or found is None:
        raise RuntimeError(f"the node summary failed: {err.decode()[-500:]}")
    return LargeTrace(upload_s, summary_s, float(found.group(1)), float(found.group(2)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="64,256,1024", help="session sizes (ranks), comma-separated")
    parser.add_argument("--shards", type=int, default=1, help="K: the analyzer's map shards (1: one Job)")
    parser.add_argument(
        "--no-node-summaries", action="store_true", help="sidecars upload no summaries: every trace parsed centrally"
    )
    parser.add_argument("--traces", nargs="*", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--concurrency", type=int, default=128, help="the operator's signal concurrency")
    parser.add_argument("--uploaders", type=int, default=4, help="processes that do the simulated sidecars' uploads")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs) and print its path")
    args = parser.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    workdir = Path(tempfile.mkdtemp(prefix="stepscope-scale-"))
    print(f"preparing {sizes[-1]} traces from {', '.join(p.name for p in args.traces)} ...", flush=True)
    traces = prepare_traces(args.traces, sizes[-1], workdir / "traces")
    runs: list[Run] = []
    with LocalCluster(workdir / "cluster") as cluster:
        install(cluster)
        credentials = Credentials(cluster.s3_access_key, cluster.s3_secret_key)
        store = open_store(
            parse_storage_uri(STORAGE_BASE),
            Connection(endpoint=cluster.s3_endpoint, region=cluster.s3_region, addressing_style=AddressingStyle.PATH),
            credentials,
        )
        print(f"the {LARGE_TRACE.name} trace as one sidecar handles it ...", flush=True)
        large = large_trace_check(store, workdir)
        summarise = not args.no_node_summaries
        with Sidecars(sizes[-1], traces, workdir, credentials, args.uploaders, summarise) as sidecars:
            create_pods(cluster, sidecars, sizes)
            operator, _ = start_operator(cluster, workdir, args.concurrency)
            try:
                with PeakRss(operator.pid) as rss:
                    for ranks in sizes:
                        print(f"session of {ranks} ranks ...", flush=True)
                        runs.append(run_session(cluster, sidecars, rss, store, ranks, args.shards))
                        print(f"  {runs[-1].phase} in {runs[-1].total:.1f} s", flush=True)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(operator.pid, signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    operator.wait(20)
            failures = list(sidecars.failures)
    return report(runs, failures, args.shards, large, workdir if args.keep else None)


def _fmt_peaks(peaks: dict[str, float]) -> Iterator[str]:
    for key in ("operator", "moto", "harness", "sidecar uploaders"):
        if key in peaks:
            yield f"{key} {peaks[key]:.0f}"
    for mode in ("map", "reduce", "all"):
        if pods := sorted(v for k, v in peaks.items() if k.startswith(f"analyzer {mode} pod")):
            yield f"analyzer {mode} pods ({len(pods)}) max {pods[-1]:.0f}"


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} CPUs"


def report(runs: list[Run], failures: list[str], shards: int, large: LargeTrace, keep: Path | None) -> int:
    stages = ["resolve", "fan-out", "uploads", "collect", "map", "reduce+status", "analyse+status"]
    stages = [s for s in stages if any(s in r.stages for r in runs)]
    print(f"\nmeasured under {_load()}")
    print(f"\n{LARGE_TRACE.name} (54 MB of JSON) on one sidecar:")
    print(f"  upload {large.upload_s:.2f} s; node summary {large.summary_s:.2f} s wall ({large.summary_cpu_s:.2f} s "
          f"CPU for the summary itself), ratio to the upload {large.summary_s / large.upload_s:.2f}")  # fmt: skip
    print(f"  summary peak RSS {large.peak_mb:.0f} MiB   bar {BAR_SUMMARY_MB:.0f} MiB   "
          f"ratio {large.peak_mb / BAR_SUMMARY_MB:.2f}")  # fmt: skip
    print()
    print(f"{'ranks':>6} " + " ".join(f"{s:>13}" for s in stages) + f" {'apply->report':>14}  phase")
    for run in runs:
        cells = " ".join(f"{run.stages[s]:>12.2f}s" if s in run.stages else f"{'-':>13}" for s in stages)
        print(f"{run.ranks:>6} {cells} {run.total:>13.2f}s  {run.phase}, {run.analysed} ranks analysed")
    print("\nnode summaries (CPU seconds per rank, in the simulated sidecars)")
    for run in runs:
        cpu = sorted(run.summary_cpu)
        if cpu:
            print(f"{run.ranks:>6}  {len(cpu)} ranks, median {cpu[len(cpu) // 2]:.3f}, max {cpu[-1]:.3f}")
        else:
            print(f"{run.ranks:>6}  none (--no-node-summaries)")
    print("\nCPU seconds from apply to report, per group of processes (this machine's CPUs: "
          f"{os.cpu_count()} x the apply->report time; the simulated sidecars stand for one node each)")  # fmt: skip
    groups = ("sidecar uploaders", "moto", "analyzer pods", "operator", "harness")
    print(f"{'ranks':>6} " + " ".join(f"{g:>17}" for g in groups) + f" {'all':>8} {'of':>8}")
    for run in runs:
        cells = " ".join(f"{run.cpu.get(g, 0.0):>16.1f}s" for g in groups)
        print(f"{run.ranks:>6} {cells} {sum(run.cpu.values()):>7.1f}s {(os.cpu_count() or 1) * run.total:>7.1f}s")
    print("\nthe center's critical path: last upload -> status written, and the CPU seconds in it per group")
    print(f"{'ranks':>6} {'path':>9} " + " ".join(f"{g:>17}" for g in groups))
    for run in runs:
        if run.center_s is not None:
            cells = " ".join(f"{run.center_cpu.get(g, 0.0):>16.1f}s" for g in groups)
            print(f"{run.ranks:>6} {run.center_s:>8.2f}s {cells}")
    print("\npeak RSS (MB)")
    for run in runs:
        print(f"{run.ranks:>6}  " + ", ".join(_fmt_peaks(run.peaks)))
    if len(runs) > 1:
        small, big = runs[0], runs[-1]
        factor = big.ranks / small.ranks
        print(f"\ngrowth from {small.ranks} to {big.ranks} ranks ({factor:.0f}x the ranks)")
        for s in [*stages, "apply->report"]:
            a = small.total if s == "apply->report" else small.stages.get(s)
            b = big.total if s == "apply->report" else big.stages.get(s)
            if a and b:
                print(f"  {s:<14} {b / a:6.1f}x")
        for key in ("operator", "moto"):
            if small.peaks.get(key) and big.peaks.get(key):
                print(f"  {key + ' RSS':<14} {big.peaks[key] / small.peaks[key]:6.1f}x")
    big = runs[-1]
    pod_peak = max((v for r in runs for k, v in r.peaks.items() if k.startswith("analyzer ")), default=0.0)
    print(f"\nK = {shards}:")
    for run in runs:
        if run.ranks in BAR_SECONDS:
            bar = BAR_SECONDS[run.ranks]
            print(
                f"  {run.ranks} ranks apply -> report {run.total:.1f} s   bar {bar:.0f} s   ratio {run.total / bar:.2f}"
            )
    print(f"  analyzer pod peak    {pod_peak:.0f} MB   bar {BAR_POD_MB:.0f} MB   ratio {pod_peak / BAR_POD_MB:.2f}")
    for run in runs:
        if run.phase != "Succeeded":
            print(f"  session of {run.ranks} ranks ended {run.phase}: {run.message}")
    for line in failures[:5]:
        print(f"  upload failed: {line}")
    if keep is not None:
        print(f"work folder kept: {keep}")
    ok = all(r.phase == "Succeeded" and r.analysed == r.ranks for r in runs) and not failures
    ok = ok and all(r.total <= BAR_SECONDS[r.ranks] for r in runs if r.ranks in BAR_SECONDS)
    ok = ok and 0 < pod_peak <= BAR_POD_MB and large.peak_mb <= BAR_SUMMARY_MB
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
