"""The hook's per-step CPU time and CPU wait from Linux's schedstat: the differences between a step span's open and
close, nothing when the file cannot be read, and the live file of this very thread."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from stepscope_hook._schedstat import StepCpu, read

pytestmark = pytest.mark.unit


def _burn(seconds: float) -> None:
    """Compute until this thread has had `seconds` of CPU (by the clock the kernel keeps for it, not the wall clock:
    on a busy machine the thread gets only part of each wall-clock second)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_each_step_gets_the_difference_between_its_open_and_close_in_microseconds(tmp_path: Path) -> None:
    stat = tmp_path / "schedstat"
    cpu = StepCpu(str(stat))
    stat.write_text("1000000 500000 7\n")
    cpu.opened()
    stat.write_text("4000000 2500000 9\n")
    cpu.closed(0)
    cpu.opened()
    stat.write_text("4500000 2500000 10\n")
    cpu.closed(1)
    assert cpu.steps == [[0, 3000, 2000], [1, 500, 0]]
    assert cpu.metadata()["steps"] == cpu.steps and cpu.metadata()["columns"] == ["step", "cpu_us", "cpu_wait_us"]


def test_an_unreadable_or_garbled_file_records_nothing(tmp_path: Path) -> None:
    missing = StepCpu(str(tmp_path / "absent"))
    missing.opened()
    missing.closed(0)
    garbled = tmp_path / "garbled"
    garbled.write_text("not numbers")
    bad = StepCpu(str(garbled))
    bad.opened()
    bad.closed(0)
    assert missing.steps == [] and bad.steps == [] and read(str(garbled)) is None


@pytest.mark.skipif(not Path("/proc/thread-self/schedstat").exists(), reason="no schedstat on this kernel")
def test_this_threads_cpu_time_grows_while_it_computes() -> None:
    before = read()
    _burn(0.02)
    after = read()
    assert before is not None and after is not None
    assert after[0] - before[0] >= 10_000_000 and after[1] >= before[1]  # >= 10 ms of the 20 ms of CPU burnt


@pytest.mark.skipif(not Path("/proc/thread-self/schedstat").exists(), reason="no schedstat on this kernel")
def test_a_step_of_this_thread_is_measured_from_its_own_task_file() -> None:
    cpu = StepCpu()
    cpu.opened()
    _burn(0.02)
    cpu.closed(7)
    cpu.close()
    [(index, on_cpu, waited)] = cpu.steps
    assert index == 7 and on_cpu >= 10_000 and waited >= 0
