"""Names that compare: memory addresses, object ids, process and thread ids and temporary folders in a name are
per-process details; two recordings of the same code whose names differ only there show no change, and what
identifies the code (function, file, line, op, template arguments) is kept."""

from __future__ import annotations

import pytest
from report_maker import rank, report

from stepscope_analyzer.diff import DiffConfig, diff_reports
from stepscope_analyzer.diff.name_keys import name_key
from stepscope_contract.diff import DiffVerdict

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            "<built-in method run_backward of torch._C._EngineBase object at 0x7f2e5c1d2a40>",
            "<built-in method run_backward of torch._C._EngineBase object at 0x7f91aa03bc10>",
        ),
        ("<function train_step at 0x7f00deadbeef>", "<function train_step at 0x7fffcafe0001>"),
        ("load_batch pid 1234 tid=5678", "load_batch pid 99 tid=42"),
        ("worker[PID:1234]", "worker[PID:4321]"),
        ("tensor id=140234567890123", "tensor id=140111111111111"),
        ("/tmp/tmpab12cd/train.py(42): main", "/tmp/tmpzz99xy/train.py(42): main"),
        ("/var/folders/x1/abc/T/tmp9k/train.py(42): main", "/var/folders/y2/def/T/tmp3j/train.py(42): main"),
    ],
)
def test_per_process_details_compare_equal(a: str, b: str) -> None:
    assert a != b and name_key(a) == name_key(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("/tmp/tmpab12cd/train.py(42): main", "/tmp/tmpab12cd/train.py(43): main"),  # another line
        ("/tmp/tmpab12cd/train.py(42): main", "/tmp/tmpab12cd/model.py(42): main"),  # another file
        ("train.py(42): main", "train.py(42): step"),  # another function
        ("nn.Module: Linear_0", "nn.Module: Linear_1"),
        ("void gemm<float, 128>(float*)", "void gemm<float, 256>(float*)"),
        ("ProfilerStep#3", "ProfilerStep#4"),
    ],
)
def test_what_identifies_the_code_is_kept(a: str, b: str) -> None:
    assert name_key(a) != name_key(b)


def test_the_same_code_with_other_addresses_shows_no_change() -> None:
    steps = [40_000.0 + 100.0 * (k % 3) for k in range(12)]

    def side(address: str, path: str) -> dict[str, tuple[float, int]]:
        return {
            f"<built-in method run_backward of torch._C._EngineBase object at {address}>": (120_000.0, 12),
            f"{path}/train.py(42): main": (400_000.0, 12),
            "aten::mm": (96_000.0, 48),
        }

    base = report([rank(r, steps, functions=side("0x7f2e5c1d2a40", "/tmp/tmpab12cd")) for r in range(2)])
    cand = report([rank(r, steps, functions=side("0x7f91aa03bc10", "/tmp/tmpzz99xy")) for r in range(2)])
    d = diff_reports(base, cand, DiffConfig(max_regression_pct=15.0))
    assert d.changes_total == 0 and d.top_changes == []
    assert d.added_work is None and d.verdict is DiffVerdict.PASSED
