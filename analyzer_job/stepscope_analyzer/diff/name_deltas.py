"""Per-name time and calls per step on each side, and what changed: HTA TraceDiff's added / removed / changed
over every kernel, op and function the ranks' reports list. Pure.

A name's figure on one side is its summed time (and calls) over the analysed ranks divided by their recorded steps,
so it reads "µs per step, per rank" and a name present on some ranks only is averaged with zeros elsewhere. Times
are inclusive (an op's time contains the ops it calls), as in HTA. A report lists each rank's top names only
(`--top-n`); when the diff analyses traces itself it keeps many more (DIFF_TOP_N), so a name missing on one side
is really missing there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stepscope_analyzer.diff.step_samples import analysed_ranks
from stepscope_contract.diff import ChangeKind, TopChange
from stepscope_contract.report import Report

KERNEL_KIND = {"COMPUTATION": "kernel", "COMMUNICATION": "communication", "MEMORY": "memory"}
MAX_TOTAL_US = 1e15
"""a name's time beyond this (or not finite) in a report.json is not a measurement: left out"""
MIN_DELTA_US = 0.5
"""|delta| per step below this, with the same calls per step, is no change"""

Key = tuple[str, str]  # (kind, name)


@dataclass
class NameTimes:
    us: dict[Key, float] = field(default_factory=dict)
    calls: dict[Key, float] = field(default_factory=dict)
    steps: int = 0

    def add(self, key: Key, us: float, calls: int) -> None:
        if not 0.0 <= us <= MAX_TOTAL_US or not 0 <= calls <= MAX_TOTAL_US:
            return
        self.us[key] = self.us.get(key, 0.0) + us
        self.calls[key] = self.calls.get(key, 0.0) + calls

    def per_step(self, key: Key) -> tuple[float, float]:
        if self.steps <= 0:
            return 0.0, 0.0
        return self.us.get(key, 0.0) / self.steps, self.calls.get(key, 0.0) / self.steps


def name_times(report: Report) -> NameTimes:
    out = NameTimes()
    for rank in analysed_ranks(report):
        out.steps += max(rank.steps.count, 1)
        seen: set[Key] = set()
        for f in rank.top_functions:
            key = (f.category, f.name)
            seen.add(key)
            out.add(key, f.total_us, f.count)
        for k in rank.top_kernels:  # kernels below the functions' cut
            key = (KERNEL_KIND.get(k.kernel_type, "kernel"), k.name)
            if key not in seen:
                out.add(key, k.sum_us, k.count)
    return out


def name_changes(b: NameTimes, c: NameTimes) -> list[TopChange]:
    """Every name whose time or calls per step differ (baseline `b`, candidate `c`), largest |delta_us_per_step|
    first."""
    changes = []
    for key in b.us.keys() | c.us.keys():
        b_us, b_calls = b.per_step(key)
        c_us, c_calls = c.per_step(key)
        delta = c_us - b_us
        if abs(delta) < MIN_DELTA_US and abs(c_calls - b_calls) < 1e-9:
            continue
        if key not in b.us:
            change = ChangeKind.ADDED
        elif key not in c.us:
            change = ChangeKind.REMOVED
        else:
            change = ChangeKind.CHANGED
        changes.append(
            TopChange(
                name=key[1],
                kind=key[0],
                change=change,
                baseline_us_per_step=b_us,
                candidate_us_per_step=c_us,
                delta_us_per_step=delta,
                baseline_count_per_step=b_calls,
                candidate_count_per_step=c_calls,
                count_delta=c_calls - b_calls,
            )
        )
    changes.sort(key=lambda t: (-abs(t.delta_us_per_step), -abs(t.count_delta), t.kind, t.name))
    return changes
