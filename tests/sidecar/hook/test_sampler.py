"""The hook's Python stack sampler: its caps are the contract's, it samples only while the steps are recorded, and
what it writes is folded stacks within those caps."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from stepscope_contract import python_stacks
from stepscope_contract.storage import PYTHON_STACKS_FILE as STORED_NAME
from stepscope_contract.wire import HookRequest
from stepscope_hook import _sampler
from stepscope_hook._runtime import PYTHON_STACKS_FILE, Hook

pytestmark = pytest.mark.unit


def test_the_hooks_caps_are_the_contracts() -> None:
    for name in ("HEADER_PREFIX", "MAX_STACKS", "MAX_FRAMES", "MAX_FRAME_CHARS", "MAX_HZ", "ROOT_CUT"):
        assert getattr(_sampler, name) == getattr(python_stacks, name), name
    assert PYTHON_STACKS_FILE == STORED_NAME


def deep(n: int) -> None:
    if n:
        deep(n - 1)
    else:
        time.sleep(0.15)


def planted_work_of_a_very_long_name_that_goes_on_and_on_and_on_for_quite_a_while_past_any_frame_cap_we_set() -> None:
    time.sleep(0.15)


def test_stacks_are_folded_within_the_caps(tmp_path: Path) -> None:
    import threading

    sampler = _sampler.StackSampler(200, threading.get_ident())
    sampler.start()
    deep(_sampler.MAX_FRAMES + 10)
    planted_work_of_a_very_long_name_that_goes_on_and_on_and_on_for_quite_a_while_past_any_frame_cap_we_set()
    sampler.stop()
    out = tmp_path / "s.folded"
    sampler.write(str(out), steps=2)
    lines = out.read_text().splitlines()
    header = json.loads(lines[0][len(_sampler.HEADER_PREFIX) :])
    assert header["hz"] == 200 and header["steps"] == 2 and header["ticks"] >= 10 and header["windowMs"] >= 300
    stacks = [line.rsplit(" ", 1) for line in lines[1:]]
    assert sum(int(n) for _, n in stacks) + header["dropped"] == header["ticks"]
    for text, _ in stacks:
        frames = text.split(";")
        assert len(frames) <= _sampler.MAX_FRAMES + 1 and all(len(f) <= _sampler.MAX_FRAME_CHARS for f in frames)
    assert any(t.startswith(_sampler.ROOT_CUT + ";") and "deep (hook/test_sampler.py:" in t for t, _ in stacks)
    planted = [t for t, _ in stacks if "planted_work_of_a_very_long" in t]
    line = (
        planted_work_of_a_very_long_name_that_goes_on_and_on_and_on_for_quite_a_while_past_any_frame_cap_we_set.__code__.co_firstlineno
        + 1
    )
    assert planted and all("…" in t.split(";")[-1] and t.endswith(f"(hook/test_sampler.py:{line})") for t in planted)
    assert "stepscope-sampler" not in out.read_text() and "_run (" not in out.read_text()  # only the training thread


def test_frame_text_has_no_separator() -> None:
    text = _sampler.frame_text(("f;g\nh", "/x/site-packages/pkg/mod.py", 7))
    assert ";" not in text and "\n" not in text and text.endswith("(pkg/mod.py:7)")


def request(hook_dir: Path, capture_id: str, **kw: object) -> None:
    body = HookRequest.model_validate({"captureId": capture_id, "requestedAt": time.time(), **kw})
    (hook_dir / "r.tmp").write_text(body.model_dump_json(by_alias=True))
    (hook_dir / "r.tmp").rename(hook_dir / "request.json")


def slow_input(seconds: float) -> None:
    time.sleep(seconds)


def run_capture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hz: int) -> Path:
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    hook = Hook(str(tmp_path), poll_seconds=0.0)
    try:
        hook.on_step()
        request(tmp_path, "cap-py", steps=3, skipSteps=0, activities=["cpu"], pythonSampling=hz)
        hook.on_step()  # armed, then recording from the next boundary
        slow_input(0.2)  # before the window: never sampled
        hook.on_step()
        for _ in range(3):
            slow_input(0.05)
            hook.on_step()
        slow_input(0.2)  # after the window: never sampled
    finally:
        hook.enabled = False
    return tmp_path / "captures/cap-py/rank-0"


def test_the_capture_samples_the_recorded_steps_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = run_capture(tmp_path, monkeypatch, 100)
    text = (out / PYTHON_STACKS_FILE).read_text()
    header = json.loads(text.splitlines()[0][len(_sampler.HEADER_PREFIX) :])
    assert header["steps"] == 3 and 100 <= header["windowMs"] < 400  # the three 50 ms steps, not the 200 ms outside
    assert "slow_input (hook/test_sampler.py:" in text and "run_capture (hook/test_sampler.py:" in text


def test_off_writes_nothing_and_starts_no_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    out = run_capture(tmp_path, monkeypatch, 0)
    assert (out / "trace.pt.trace.json.gz").is_file() and not (out / PYTHON_STACKS_FILE).exists()
    assert not [t for t in threading.enumerate() if t.name == _sampler.SAMPLER_THREAD]
