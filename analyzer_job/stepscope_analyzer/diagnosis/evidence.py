"""The evidence of a slow rank: the cost that stands out (with its effect size and consistency), the wait of the
other ranks, and the names (kernels, ops, functions, places of host time) that take longer on this rank than the
median of the other ranks, per step. Pure.

Per-rank summaries keep only their top entries, so a name absent from a rank's summary counts as 0 there.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from stepscope_analyzer.diagnosis.arrival_order import LastArrivals
from stepscope_analyzer.diagnosis.causes import cause_row, row_for_cost
from stepscope_analyzer.diagnosis.floor_test import FloorEffect
from stepscope_analyzer.diagnosis.gain_permutation import GainTest
from stepscope_analyzer.diagnosis.intermittent import Stall
from stepscope_analyzer.diagnosis.job_view import MeanRatio
from stepscope_analyzer.diagnosis.rank_costs import RankSamples
from stepscope_analyzer.diagnosis.stats import median
from stepscope_analyzer.diagnosis.straggler_test import Effect
from stepscope_contract.report import Cause, Evidence, RankReport

WAIT_LABEL = "collective wait per step"
NAMED = frozenset({"kernel", "memory", "cpu_op", "python", "user_annotation", "runtime", "host_gap", "collective"})
"""categories of the names that name_evidence lists (its detail starts with the category)"""

CALLS_ALIKE = 0.05
"""a call ratio within this of 1: the ranks make the same calls, the floors alone tell the work apart"""


def named(e: Evidence) -> str | None:
    """The category of a name's evidence (name_evidence), None for the other evidence."""
    category = e.detail.split(";", 1)[0]
    return category if category in NAMED and e.detail.startswith(category + ";") else None


def cost_evidence(
    cost: str, e: Effect, wall_excess: float, mine: RankSamples, step_us: float, *, gain_us: float | None = None
) -> Evidence:
    """The cost that stands out: wall-clock value and baseline per step, the test's effect size and consistency;
    `gain_us` (the verdict's figure: what the others wait for it per step) where it differs from the excess."""
    share = 100.0 * wall_excess / step_us if step_us > 0 else 0.0
    value = float(np.median(mine.costs[cost]))
    contended = e.value_us < 0.9 * value
    saves = saving_clause(gain_us, wall_excess, "what the others wait for it")
    detail = (
        f"+{wall_excess / 1000:,.2f} ms per step (medians; {share:.1f}% of the median step){saves}; higher than "
        f"the other ranks in {e.steps_above} of {e.steps} steps; {e.z:.1f}x the job's noise for this cost "
        f"(±{e.noise_us / 1000:,.2f} ms"
        f"{', measured without CPU-contention stretches' if contended else ''})"
    )
    return Evidence(metric=row_for_cost(cost).label, value=value, baseline=value - wall_excess, detail=detail)


_OF_STEP = "% of the median step)"
"""where cost_evidence's detail ends its excess (the saving clause follows)"""


def saving_clause(gain_us: float | None, wall_excess: float, how: str) -> str:
    """', of which fixing it saves 55.30 ms per step (replayed)': the verdict's figure beside the cost's excess,
    where the two differ by 5% or more ('' otherwise)."""
    if gain_us is None or abs(gain_us - wall_excess) < 0.05 * max(wall_excess, 1.0):
        return ""
    return f", of which fixing it saves {gain_us / 1000:,.2f} ms per step ({how})"


def with_saving(evidence: list[Evidence], gain_us: float, how: str) -> list[Evidence]:
    """The evidence with the cost's (cost_evidence) saving clause quoting `gain_us`: the one figure the verdict,
    the gain and the what-ifs give for what fixing the rank saves."""
    out = []
    for e in evidence:
        head, found, tail = e.detail.partition(_OF_STEP)
        if not (found and e.detail.startswith("+") and "; higher than" in tail):
            out.append(e)
            continue
        rest = tail[tail.index("; higher than") :]
        clause = saving_clause(gain_us, e.value - e.baseline, how)
        out.append(e.model_copy(update={"detail": head + found + clause + rest}))
    return out


def floor_evidence(f: FloorEffect) -> Evidence:
    """More work, not waiting for a CPU: the rank's op calls per step times their floors against the other ranks'."""
    spread = f"the floors of even and odd steps differ by up to {100 * math.expm1(f.noise):.0f}% within a rank"
    if f.peer_spread is not None:
        spread += f", the other ranks' own ratios stay within {100 * math.expm1(f.peer_spread):.0f}% of 1"
    if abs(f.call_ratio - 1.0) < CALLS_ALIKE:
        detail = (
            f"its op calls at their least over the recorded steps take {f.ratio:.2f}x the other ranks' (weighted "
            f"median over {f.calls} calls; {spread}): it does more work per call; waiting for a CPU does not raise a "
            "call's least time"
        )
    else:
        detail = (
            f"its work per step is {f.ratio:.2f}x the other ranks': {f.call_ratio:.2f}x their op calls per step (at "
            f"their time per call), each at {f.per_call:.2f}x their least time per call (weighted median over "
            f"{f.calls} calls; {spread}): waiting for a CPU neither adds calls nor raises a call's least time"
        )
    return Evidence(metric="op calls at their least", value=f.ratio, baseline=1.0, detail=detail)


def late_evidence(m: MeanRatio, step_us: float) -> Evidence:
    """The rank's compute averages more than the others', and they wait for it a large share of their step."""
    how = " without waiting for a CPU" if m.corrected else ""
    detail = (
        f"its compute averages {m.mine_us / 1000:,.2f} ms per step{how}, {m.ratio:.2f}x the other ranks' "
        f"({m.theirs_us / 1000:,.2f} ms), and they wait for it {100 * m.lateness_us / step_us:.0f}% of a step: its "
        "steps vary too much for their median to show it, the waiting does not"
    )
    return Evidence(metric="compute per step on average", value=m.mine_us, baseline=m.theirs_us, detail=detail)


def arrival_evidence(t: LastArrivals) -> Evidence:
    """The rank arrives last at its peers' collectives more often than chance would make it (arrival_order)."""
    detail = (
        f"it arrives last of its {len(t.peers)} peers at most of the step's matched collectives in {t.last_steps} "
        f"of {t.steps} steps ({t.last_calls} of {t.calls} collectives), where chance would make one rank that in "
        f"1 of {len(t.peers)} steps: p = {t.p_value:.2g} over the ranks tested"
    )
    return Evidence(metric="last to arrive", value=float(t.last_steps), baseline=t.steps / len(t.peers), unit="steps",
                    detail=detail)  # fmt: skip


def gain_test_evidence(t: GainTest) -> Evidence:
    """The replay saves the most for the rank more often and by more than chance would make it (gain_permutation)."""
    detail = (
        f"the replay of the recorded steps with it running like its {len(t.peers) - 1} peers saves "
        f"{t.saved_us / 1000:,.1f} ms per step; it did the most work of its {len(t.peers)} peers in {t.heaviest_steps} "
        f"of {t.steps} steps, and exchangeable peers would be given a saving this large with p = {t.p_value:.2g} over "
        f"the ranks tested"
    )
    return Evidence(metric="heaviest in the replay", value=float(t.heaviest_steps), baseline=t.steps / len(t.peers),
                    unit="steps", detail=detail)  # fmt: skip


def every_nth(steps: tuple[int, ...] | list[int]) -> int | None:
    """The period of evenly spaced steps (3 for steps 1, 4, 7), else None."""
    gaps = {b - a for a, b in itertools.pairwise(steps)}
    return gaps.pop() if len(gaps) == 1 and len(steps) >= 2 else None


def stall_evidence(cost: str, st: Stall, wall_excess: float, step_us: float) -> Evidence:
    """An intermittent stall: how often, how long each, and what it costs per step on average."""
    share = 100.0 * wall_excess / step_us if step_us > 0 else 0.0
    period = every_nth(st.numbers or st.stalled)
    which = ", ".join(f"#{n}" for n in st.numbers) if st.numbers else ", ".join(str(k) for k in st.stalled)
    named = "ProfilerStep" if st.numbers else "recorded step"
    when = f"every {period} steps: {named} {which}" if period else f"{named} {which}"
    detail = (
        f"stalls in {st.spikes} of {st.steps} recorded steps ({when}), +{st.spike_excess_us / 1000:,.1f} ms "
        f"each (median), {st.z:.1f}x the job's step-to-step noise (±{st.noise_us / 1000:,.2f} ms); "
        f"+{wall_excess / 1000:,.2f} ms per step on average ({share:.1f}% of the median step)"
    )
    label = f"{row_for_cost(cost).label}, intermittent"
    return Evidence(metric=label, value=st.spike_excess_us, baseline=0.0, detail=detail)


def wait_evidence(mine: float, others: float, measured: bool, blocked: float) -> Evidence:
    """The rank's wait for other ranks per step against theirs; `blocked` is its whole time blocked in collectives
    per step (step phase communication_wait: the wait plus the transfer itself)."""
    how = "measured" if measured else "estimated: blocked in collectives beyond the least-blocked rank"
    detail = (
        f"the other ranks wait {max(others - mine, 0.0) / 1000:,.2f} ms per step more than this one (means; {how}); "
        f"it is blocked in collectives {blocked / 1000:,.2f} ms per step (phase communication_wait), of which "
        f"{mine / 1000:,.2f} ms waiting for other ranks"
    )
    return Evidence(metric=WAIT_LABEL, value=mine, baseline=others, detail=detail)


def name_times(r: RankReport, cause: Cause, divisor: float) -> dict[tuple[str, str], float]:
    """(category, name) -> time per step on this rank, for the entries that bear on `cause`."""
    row = cause_row(cause)
    out: dict[tuple[str, str], float] = {}
    if row.kernel_type is not None:
        for k in r.top_kernels:
            if k.kernel_type.upper() == row.kernel_type:
                key = ("kernel", k.name)
                out[key] = out.get(key, 0.0) + k.sum_us / divisor
    for f in r.top_functions:
        if f.category in row.evidence_categories and ("kernel", f.name) not in out:  # a GPU op listed once
            key = (f.category, f.name)
            out[key] = max(out.get(key, 0.0), f.total_us / divisor)
    if cause is Cause.COMMUNICATION:
        for c in r.collectives:
            key = ("collective", c.name if c.process_group is None else f"{c.name} [{c.process_group}]")
            out[key] = out.get(key, 0.0) + max(c.total_us - c.wait_us, 0.0) / divisor
    return out


def name_evidence(
    rank: int,
    cause: Cause,
    tables: dict[int, dict[tuple[str, str], float]],
    step_us: float,
    limit: int,
) -> list[Evidence]:
    """The entries of `rank` that exceed the median of the other ranks the most (at least 1% of a step)."""
    mine = tables.get(rank, {})
    others = [t for r, t in tables.items() if r != rank]
    if not mine or not others:
        return []
    floor = 0.01 * step_us
    rows: list[tuple[float, Evidence]] = []
    for key, value in mine.items():
        baseline = median([t.get(key, 0.0) for t in others])
        excess = value - baseline
        if excess <= floor:
            continue
        ratio = f"{value / baseline:.2f}x the median of the others" if baseline > 0 else "absent on the other ranks"
        detail = f"{key[0]}; {ratio}; +{excess:,.0f} us per step"
        rows.append((excess, Evidence(metric=key[1], value=value, baseline=baseline, detail=detail)))
    rows.sort(key=lambda row: -row[0])
    return [e for _, e in rows[:limit]]
