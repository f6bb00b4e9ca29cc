"""Every rank artifact and diff side is read from storage with its limit (`most=`), so an oversized object is refused
from its size before it is downloaded: GPU metrics (a rank error naming max_gpu_metrics_file_bytes), a Flight
Recorder dump (max_flight_recorder_file_bytes, test_budget.py), a diff side's report.json (a SideError naming the
bound). A metrics file within the limit is still read."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from stepscope_analyzer import limits
from stepscope_analyzer.diff import sides
from stepscope_analyzer.ranks.rank_artifacts import rank_extras
from stepscope_analyzer.ranks.storage_io import LocalStore
from stepscope_contract.report import RankReport, RankStatus

pytestmark = pytest.mark.unit

MiB = 1 << 20


class SpyStore(LocalStore):
    """The local store, recording the `most` of every read."""

    def __init__(self) -> None:
        super().__init__()
        self.bounds: list[int | None] = []

    def read(self, key: str, most: int | None = None, truncate: bool = False) -> bytes:
        self.bounds.append(most)
        return super().read(key, most, truncate)


def test_gpu_metrics_over_the_limit_are_refused_by_size(tmp_path: Path) -> None:
    path = tmp_path / "gpu_metrics.jsonl.gz"
    path.write_bytes(b"\0" * (2 * MiB))
    store = SpyStore()
    with limits.override(max_gpu_metrics_file_bytes=1 * MiB):
        update, errors = rank_extras(store, str(path), None, RankReport(rank=3, status=RankStatus.OK))
    assert store.bounds == [1 * MiB]
    assert "gpu_metrics" not in update
    (error,) = errors
    assert error.rank == 3 and "max_gpu_metrics_file_bytes" in error.message


def test_gpu_metrics_within_the_limit_are_read(tmp_path: Path) -> None:
    path = tmp_path / "gpu_metrics.jsonl.gz"
    lines = b"".join(
        b'{"t": %d.0, "gpu": 0, "name": "H100", "utilization": {"gpu": 50}, "memory": {"used": 10}}\n' % t
        for t in range(4)
    )
    path.write_bytes(gzip.compress(lines))
    store = SpyStore()
    update, errors = rank_extras(store, str(path), None, RankReport(rank=0, status=RankStatus.OK))
    assert store.bounds == [limits.current().max_gpu_metrics_file_bytes]
    assert errors == [] and update["gpu_metrics"] is not None


def test_a_report_side_over_its_bound_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(b" " * (2 * MiB))
    monkeypatch.setattr(sides, "MAX_REPORT_BYTES", 1 * MiB)
    store = SpyStore()
    with pytest.raises(sides.SideError, match="more than a report may be"):
        sides._read_report(store, str(path))
    assert store.bounds == [1 * MiB]
