"""The demo's training (examples/demo/train_ddp.py) run as a small real gloo job with the stepscope hook loaded the
way pods load it (PYTHONPATH naming the installed hook folder, STEPSCOPE_HOOK_DIR), a capture request waiting in
each rank's hook folder, and what the hooks write laid out as a session folder (traces/rank<R>.pt.trace.json.gz,
traces/rank<R>/{manifest.json, python_stacks.folded}) for the analyzer: the sidecar's upload without a sidecar."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from stepscope_contract.manifest import ArtifactFile, RankManifest
from stepscope_contract.storage import MANIFEST_FILE, PYTHON_STACKS_FILE, TRACE_FILE, trace_name
from stepscope_contract.wire import CaptureState, HookRequest, RankMeta
from stepscope_testing.gloo_jobs import _free_port

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo" / "train_ddp.py"
CAPTURE_ID = "cap-demo"


def install_hook(dest: Path) -> Path:
    """The hook folder as `stepscope install-hook DEST` makes it for an init container."""
    subprocess.run([sys.executable, "-m", "stepscope_cli.main", "install-hook", str(dest)], check=True,
                   capture_output=True, text=True)  # fmt: skip
    return dest


def _request(hook_dir: Path, steps: int, skip: int, hz: int) -> None:
    hook_dir.mkdir(parents=True, exist_ok=True)
    fields = {"captureId": CAPTURE_ID, "steps": steps, "skipSteps": skip, "activities": ["cpu"], "pythonSampling": hz}
    body = HookRequest.model_validate({**fields, "requestedAt": time.time()})
    (hook_dir / "request.json").write_text(body.model_dump_json(by_alias=True))


def _lay_out(rank: int, captured: Path, session: Path) -> None:
    traces = session / "traces"
    folder = traces / f"rank{rank}"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(captured / TRACE_FILE, traces / trace_name(rank))
    files = [traces / trace_name(rank)]
    if (captured / PYTHON_STACKS_FILE).is_file():
        shutil.copyfile(captured / PYTHON_STACKS_FILE, folder / PYTHON_STACKS_FILE)
        files.append(folder / PYTHON_STACKS_FILE)
    meta = RankMeta.model_validate_json((captured / "meta.json").read_bytes())
    manifest = RankManifest(
        capture_id=CAPTURE_ID, namespace="default", session="demo", pod=f"demo-{rank}", node=f"node-{rank}",
        rank=rank, state=CaptureState.UPLOADED, meta=meta,
        files=[ArtifactFile(name=p.name, size=p.stat().st_size, sha256=hashlib.sha256(p.read_bytes()).hexdigest())
               for p in files],
    )  # fmt: skip
    (folder / MANIFEST_FILE).write_text(manifest.model_dump_json(by_alias=True))


def record_demo(
    out: Path,
    *,
    world: int = 3,
    slow_rank: int = 2,
    mode: str = "host",
    slow_ms: float = 40.0,
    steps: int = 6,
    skip: int = 4,
    hz: int = 100,
    timeout_s: float = 240.0,
) -> Path:
    """Run the demo with `world` ranks, `slow_rank` planted slow in `mode`, `steps` recorded after `skip`; the
    session folder (out/session)."""
    shutil.rmtree(out, ignore_errors=True)
    hook = install_hook(out / "hook")
    port = _free_port()
    procs = []
    for rank in range(world):
        _request(out / f"hook-{rank}", steps, skip, hz)
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "SLOW_RANK": str(slow_rank), "SLOW_MODE": mode, "SLOW_MS": str(slow_ms),
               "PYTHONPATH": str(hook), "STEPSCOPE_HOOK_DIR": str(out / f"hook-{rank}"),
               "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}  # fmt: skip
        log = (out / f"rank{rank}.log").open("w")
        args = [sys.executable, str(DEMO), "--steps", str(skip + steps + 4), "--log-every", "1000"]
        procs.append(subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT))
    deadline = time.monotonic() + timeout_s
    for p in procs:
        try:
            p.wait(timeout=max(deadline - time.monotonic(), 1.0))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
    if any(p.returncode for p in procs):
        logs = "\n".join((out / f"rank{r}.log").read_text()[-2000:] for r in range(world))
        raise RuntimeError(f"the demo failed: {[p.returncode for p in procs]}\n{logs}")
    session = out / "session"
    for rank in range(world):
        _lay_out(rank, out / f"hook-{rank}" / "captures" / CAPTURE_ID / f"rank-{rank}", session)
    return session
