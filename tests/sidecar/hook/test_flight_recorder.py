"""The hook's Flight Recorder dumps, in a real one-rank gloo process that loads the hook through PYTHONPATH: taken on
demand by the watchdog while the training thread is stuck, and at exit when a collective error ends the training
during a capture; stacks.txt puts the main thread first and leaves the hook's own thread out."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from stepscope_contract.wire import HookPhase, HookRequest, HookState, RankMeta
from stepscope_sidecar.install import install

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TRAIN = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    import torch, torch.distributed as dist

    control = Path(os.environ["CONTROL"])
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def sync(t):
        dist.all_reduce(t)  # the call site

    def stuck_forever():
        while not (control / "stop").exists():
            time.sleep(0.05)

    for step in range(1000):
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
        sync(torch.ones(3))
        (control / "steps").write_text(str(step))
        if (control / "stick").exists():
            stuck_forever()
            break
        if (control / "crash").exists():
            raise RuntimeError("a collective failed: Connection closed by peer")
        time.sleep(0.02)
    """
)


def _state(hook_dir: Path) -> HookState | None:
    path = hook_dir / "state" / "rank-0.json"
    try:
        return HookState.model_validate_json(path.read_bytes())
    except (OSError, ValueError):
        return None


def _request(hook_dir: Path, capture_id: str, **kw: Any) -> None:
    body = HookRequest.model_validate(
        {"captureId": capture_id, "steps": 3, "activities": ["cpu"], "requestedAt": time.time(), **kw}
    )
    (hook_dir / "r.tmp").write_text(body.model_dump_json(by_alias=True))
    (hook_dir / "r.tmp").rename(hook_dir / "request.json")


def _wait(predicate: Any, what: str, timeout: float = 60) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _start(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path, Path]:
    hook_dir, control = tmp_path / "run", tmp_path / "control"
    hook_dir.mkdir()
    control.mkdir()
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STEPSCOPE_", "PYTHONPATH", "TORCH_FR"))}
    install(tmp_path / "hook")  # as the pod's init container does
    env |= {
        "PYTHONPATH": str(tmp_path / "hook"),
        "STEPSCOPE_HOOK_DIR": str(hook_dir),
        "CONTROL": str(control),
        "TORCH_FR_BUFFER_SIZE": "64",
        "OMP_NUM_THREADS": "1",
    }
    log = (tmp_path / "train.log").open("wb")
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=log, stderr=subprocess.STDOUT)
    _wait(lambda: (control / "steps").exists() and _state(hook_dir), "the first steps and the hook's state")
    return proc, hook_dir, control


def _dump(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gzip.decompress((folder / "flight_recorder.json.gz").read_bytes()))
    return data


def test_an_on_demand_dump_comes_from_the_watchdog_while_the_training_thread_is_stuck(tmp_path: Path) -> None:
    proc, hook_dir, control = _start(tmp_path)
    try:
        (control / "stick").write_text("")
        _wait(lambda: (control / "steps").read_text() and time.sleep(0.5) is None, "the training to get stuck")
        steps_before = (control / "steps").read_text()
        _request(hook_dir, "dump-1", dumpOnly=True)
        state = _wait(lambda: (s := _state(hook_dir)) and s.phase is HookPhase.DUMPED and s, "the dump")
        assert state.capture_id == "dump-1"
        assert (control / "steps").read_text() == steps_before  # no step boundary came: the watchdog answered
        out = hook_dir / "captures" / "dump-1" / "rank-0"
        meta = RankMeta.model_validate_json((out / "meta.json").read_bytes())
        assert (meta.dump_reason, meta.flight_recorder, meta.hung) == ("on-demand", "written", False)
        stacks = (out / "stacks.txt").read_text()
        first = stacks.split("Thread ", 2)[1]
        assert "(MainThread)" in first and "stuck_forever" in first
        assert "stepscope-watchdog" not in stacks and "faulthandler" not in stacks
        dump = _dump(out)
        assert dump["stepscope"]["reason"] == "on-demand" and dump["stepscope"]["rank"] == 0
        assert dump["stepscope"]["processGroups"]["0"] == {"desc": "default_pg", "ranks": [0]}
        ours = [e for e in dump["entries"] if e["profiling_name"] == "gloo:all_reduce" and e["input_sizes"] == [[3]]]
        assert ours, dump["entries"][-3:]
        frames = ours[-1]["frames"]
        assert any(f["name"] == "sync" and f["filename"].endswith("train.py") for f in frames), frames
        assert len(dump["entries"]) <= 64
    finally:
        (control / "stop").write_text("")
        proc.wait(timeout=30)


def test_a_training_that_dies_of_an_exception_during_a_capture_leaves_its_evidence(tmp_path: Path) -> None:
    proc, hook_dir, control = _start(tmp_path)
    try:
        _request(hook_dir, "cap-exit", skipSteps=100_000, stepTimeoutSeconds=600)
        _wait(lambda: (s := _state(hook_dir)) and s.phase is HookPhase.ARMED, "the armed capture")
        (control / "crash").write_text("")
        assert proc.wait(timeout=60) != 0
    finally:
        (control / "stop").write_text("")
        if proc.poll() is None:
            proc.kill()
    state = _state(hook_dir)
    assert state is not None and state.phase is HookPhase.FAILED and state.capture_id == "cap-exit"
    assert "exited during the capture (RuntimeError: a collective failed" in state.message
    out = hook_dir / "captures" / "cap-exit" / "rank-0"
    meta = RankMeta.model_validate_json((out / "meta.json").read_bytes())
    assert meta.dump_reason == "exit" and meta.flight_recorder == "written" and meta.error == state.message
    stacks = (out / "stacks.txt").read_text()
    assert "Exception that ended the training process" in stacks and "Connection closed by peer" in stacks
    assert _dump(out)["stepscope"]["reason"] == "exit"


def test_no_capture_no_files_at_exit(tmp_path: Path) -> None:
    proc, hook_dir, control = _start(tmp_path)
    (control / "crash").write_text("")
    assert proc.wait(timeout=60) != 0
    assert not (hook_dir / "captures").exists() or not any((hook_dir / "captures").iterdir())
    state = _state(hook_dir)
    assert state is not None and state.phase is HookPhase.IDLE
