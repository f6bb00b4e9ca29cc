"""Every rank's compact numbers, one row per rank in a columnar table (pass one of the reduce). Pure.

The reduce reads every rank's summary once and keeps of it only these numbers: its identity (rank, status, node,
device, world size, step count) and the figures the ranks are compared on (step times, the time breakdown, the mean
step's phases). Numbers live in typed arrays, one per column (8 bytes a value), and the few strings as codes into one
list of distinct values, so the table costs a few hundred bytes per rank whatever the summaries hold. From the table
the reduce chooses which ranks it reads again in full (ranks/candidates.py), computes the distributions
(reduce/distributions.py), and writes ranks.csv.gz, the drill-down table beside report.json (docs/report-format.md).
Tables of the map step's shards merge by concatenation (`extend`) and travel as JSON (`to_json`/`from_json`).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from stepscope_contract.report import RankReport, RankStatus

__all__ = ["FLOAT_COLUMNS", "FactsTable", "step_p90"]

STRING_COLUMNS = ("status", "node", "device")
INT_COLUMNS = ("rank", "steps", "world_size")
FLOAT_COLUMNS = (
    "step_median_us",
    "step_mean_us",
    "step_p90_us",
    "step_min_us",
    "step_max_us",
    "window_us",
    "compute_time",
    "non_compute_time",
    "idle_time",
    "kernel_time",
    "communication_time",
    "exposed_communication_time",
    "collective_wait_time",
    "host_time",
    "host_gap_time",
    "memory_time",
    "gpu_utilization",
    "cpu_utilization",
    "phase_data_loading",
    "phase_forward",
    "phase_backward",
    "phase_optimizer",
    "phase_communication_wait",
    "phase_other",
)
COLUMNS = INT_COLUMNS[:1] + STRING_COLUMNS + INT_COLUMNS[1:] + FLOAT_COLUMNS
_PHASES = ("data_loading", "forward", "backward", "optimizer", "communication_wait", "other")
_NONE = -1


def step_p90(durations: list[float]) -> float:
    """The 90th percentile of a rank's step times (nearest rank), 0 without steps."""
    if not durations:
        return 0.0
    ordered = sorted(durations)
    return float(ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)])


def _floats(r: RankReport) -> Iterator[float]:
    s = r.steps
    yield from (s.median_us, s.mean_us, step_p90(s.durations_us), s.min_us, s.max_us, r.window_us)
    yield from (r.compute_time, r.non_compute_time, r.idle_time, r.kernel_time, r.communication_time)
    yield from (r.exposed_communication_time, r.collective_wait_time, r.host_time, r.host_gap_time, r.memory_time)
    yield math.nan if r.gpu_utilization is None else r.gpu_utilization
    yield math.nan if r.cpu_utilization is None else r.cpu_utilization
    for phase in _PHASES:
        yield getattr(r.phases, phase) if r.phases is not None else math.nan


class FactsTable:
    """Rows of rank numbers, stored by column."""

    def __init__(self) -> None:
        self.ints: dict[str, array[int]] = {c: array("q") for c in INT_COLUMNS}
        self.floats: dict[str, array[float]] = {c: array("d") for c in FLOAT_COLUMNS}
        self.codes: dict[str, array[int]] = {c: array("l") for c in STRING_COLUMNS}
        self.values: list[str] = []
        self._code_of: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.ints["rank"])

    def _code(self, value: str | None) -> int:
        if value is None:
            return _NONE
        code = self._code_of.get(value)
        if code is None:
            code = self._code_of[value] = len(self.values)
            self.values.append(value)
        return code

    def add(self, r: RankReport) -> None:
        """One rank's row (any status: a rank that was not analysed has zeros and no phases)."""
        self.ints["rank"].append(r.rank)
        self.ints["steps"].append(r.steps.count)
        self.ints["world_size"].append(r.world_size if r.world_size is not None else _NONE)
        for column, value in zip(STRING_COLUMNS, (r.status.value, r.node, r.device), strict=True):
            self.codes[column].append(self._code(value))
        for column, number in zip(FLOAT_COLUMNS, _floats(r), strict=True):
            self.floats[column].append(number)

    def string(self, column: str, index: int) -> str | None:
        code = self.codes[column][index]
        return None if code == _NONE else self.values[code]

    def status(self, index: int) -> RankStatus:
        return RankStatus(self.string("status", index) or RankStatus.ERROR.value)

    def world_size(self, index: int) -> int | None:
        size = self.ints["world_size"][index]
        return None if size == _NONE else size

    def ok_rows(self) -> list[int]:
        """The indices of the analysed ranks (status ok)."""
        ok = self._code_of.get(RankStatus.OK.value, -2)
        return [i for i, code in enumerate(self.codes["status"]) if code == ok]

    def extend(self, other: FactsTable) -> None:
        """`other`'s rows after this table's (a shard's table merged into the job's)."""
        for column in INT_COLUMNS:
            self.ints[column].extend(other.ints[column])
        for column in FLOAT_COLUMNS:
            self.floats[column].extend(other.floats[column])
        for column in STRING_COLUMNS:
            self.codes[column].extend(array("l", (self._code(other.string(column, i)) for i in range(len(other)))))

    def row(self, index: int) -> dict[str, Any]:
        out: dict[str, Any] = {c: self.ints[c][index] for c in INT_COLUMNS}
        out["world_size"] = self.world_size(index)
        out.update({c: self.string(c, index) for c in STRING_COLUMNS})
        out.update({c: self.floats[c][index] for c in FLOAT_COLUMNS})
        return out

    def to_json(self) -> bytes:
        doc = {
            "values": self.values,
            "ints": {c: list(v) for c, v in self.ints.items()},
            "codes": {c: list(v) for c, v in self.codes.items()},
            "floats": {c: [None if math.isnan(x) else x for x in v] for c, v in self.floats.items()},
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> FactsTable:
        """A table as `to_json` wrote it; ValueError when it is not one."""
        try:
            doc = json.loads(data)
            table = cls()
            table.values = [str(v) for v in doc["values"]]
            table._code_of = {v: i for i, v in enumerate(table.values)}
            for c in INT_COLUMNS:
                table.ints[c] = array("q", (int(x) for x in doc["ints"][c]))
            for c in STRING_COLUMNS:
                table.codes[c] = array("l", (int(x) for x in doc["codes"][c]))
                if any(not _NONE <= x < len(table.values) for x in table.codes[c]):
                    raise ValueError(f"column {c}: a code outside the values")
            for c in FLOAT_COLUMNS:
                table.floats[c] = array("d", (math.nan if x is None else float(x) for x in doc["floats"][c]))
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a ranks table: {exc}") from exc
        lengths = {len(v) for v in table.ints.values()} | {len(v) for v in table.codes.values()}
        if len(lengths | {len(v) for v in table.floats.values()}) != 1:
            raise ValueError("not a ranks table: columns of different lengths")
        return table

    def write_csv(self, out: IO[str]) -> None:
        """The table as CSV, ordered by rank (a float with no value, and a missing string, are empty cells)."""
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(COLUMNS)
        order = sorted(range(len(self)), key=self.ints["rank"].__getitem__)
        writer.writerows(zip(*(self._cells(c, order) for c in COLUMNS), strict=True))

    def _cells(self, column: str, order: list[int]) -> list[str]:
        """A column's cells in `order`, as `row` gives its values and `_cell` writes them (column by column: one
        comprehension per column rather than a dict per row)."""
        if column in self.floats:
            values = self.floats[column]
            return ["" if math.isnan(v := values[i]) else _cell(v) for i in order]
        if column in self.codes:
            codes, strings = self.codes[column], self.values
            return ["" if (code := codes[i]) == _NONE else str(strings[code]) for i in order]
        ints = self.ints[column]
        if column == "world_size":
            return ["" if (size := ints[i]) == _NONE else str(size) for i in order]
        return [str(ints[i]) for i in order]

    def save_csv_gz(self, path: Path) -> None:
        """ranks.csv.gz at `path`, written row by row."""
        with gzip.open(path, "wt", encoding="utf-8", newline="", compresslevel=6) as out:
            self.write_csv(out)

    def csv_gz_bytes(self) -> bytes:
        buffer = io.BytesIO()
        with (
            gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=6, mtime=0) as raw,
            io.TextIOWrapper(raw, encoding="utf-8", newline="") as text,
        ):
            self.write_csv(text)
        return buffer.getvalue()


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e15 else repr(value)
    return str(value)
