"""Geometry of the memory plot: one line per rank of its allocated memory over its recorded steps, slow ranks in red
and named at the line's end. Pure.

Ranks step at different speeds, so the x axis counts steps: a sample k% into a rank's step n sits at n + k/100 on
that rank's own step boundaries, and every rank's step n starts at the same x (the boundaries drawn). Where a rank
has no step starts, the axis is milliseconds since each rank's first step instead, with no boundaries."""

from __future__ import annotations

import bisect

from stepscope_analyzer.report.charts import LABEL_W, PLOT_W, Chart, Label, Line, Rect, chart_ranks
from stepscope_analyzer.report.gpu_charts import PALETTE, PLOT_H, SLOW_COLOR, TOP, _nice_top
from stepscope_contract.report import MemoryUsage, RankReport

MIB = 2**20


def memory_ranks(ranks: list[RankReport]) -> list[RankReport]:
    return [r for r in ranks if r.memory is not None and r.memory.t_ms]


def step_positions(m: MemoryUsage, step_ms: list[float]) -> list[float]:
    """Each sample's place in steps on the rank's own boundaries (`m.step_starts_ms`; `step_ms`: its steps'
    durations, for the last step's end)."""
    starts = m.step_starts_ms
    last = step_ms[len(starts) - 1] if len(step_ms) >= len(starts) else max(max(m.t_ms) - starts[-1], 1e-9)
    ends = [*starts[1:], starts[-1] + max(last, 1e-9)]
    out = []
    for t in m.t_ms:
        k = min(max(bisect.bisect_right(starts, t) - 1, 0), len(starts) - 1)
        out.append(k + min(max((t - starts[k]) / max(ends[k] - starts[k], 1e-9), 0.0), 1.0))
    return out


def memory_chart(ranks: list[RankReport], highlight: set[int]) -> Chart | None:
    """Allocated memory (MiB) over the recorded steps, one line per rank; None when no rank recorded memory."""
    recorded = memory_ranks(ranks)
    if not recorded:
        return None
    shown, note = chart_ranks(recorded, highlight)
    usage = [(r, r.memory) for r in shown if r.memory is not None]
    by_step = all(m.step_starts_ms for _, m in usage)
    xs = {
        r.rank: step_positions(m, [d / 1000.0 for d in r.steps.durations_us]) if by_step else list(m.t_ms)
        for r, m in usage
    }
    x_max = max(max(x) for x in xs.values()) or 1.0
    if by_step:
        x_max = float(max(len(m.step_starts_ms) for _, m in usage))
    v_max = _nice_top(max(m.peak_allocated_bytes for _, m in usage) / MIB * 1.05)
    x_of, y_of = PLOT_W / x_max, PLOT_H / v_max
    chart = Chart(width=LABEL_W + PLOT_W + 70, height=TOP + PLOT_H + 24, note=note)
    for frac in (0.0, 0.5, 1.0):
        y = TOP + PLOT_H - frac * PLOT_H
        chart.rects.append(Rect(LABEL_W, y, PLOT_W, 0.6, "#dde2e8", ""))
        chart.labels.append(Label(LABEL_W - 6, y + 4, f"{frac * v_max:,.0f} MiB"))
    if by_step:
        for n in range(1, int(x_max)):
            chart.rects.append(Rect(LABEL_W + n * x_of, TOP, 0.6, PLOT_H, "#b8c0c8", f"start of recorded step {n + 1}"))
    chart.labels.append(Label(LABEL_W, TOP + PLOT_H + 16, "step 1" if by_step else "0 ms", anchor="start"))
    end = f"{int(x_max)} recorded steps, each rank on its own step times" if by_step else f"{x_max:,.0f} ms"
    chart.labels.append(Label(LABEL_W + PLOT_W, TOP + PLOT_H + 16, end))
    for i, (r, m) in enumerate(sorted(usage, key=lambda pair: pair[0].rank in highlight)):
        slow = r.rank in highlight
        points = " ".join(
            f"{LABEL_W + x * x_of:.1f},{TOP + PLOT_H - v / MIB * y_of:.1f}"
            for x, v in zip(xs[r.rank], m.allocated_bytes, strict=True)
        )
        title = f"rank {r.rank} {m.device} memory allocated, peak {m.peak_allocated_bytes / MIB:,.1f} MiB"
        chart.lines.append(Line(points, SLOW_COLOR if slow else PALETTE[i % len(PALETTE)], title, 2.5 if slow else 1.2))
        if slow:
            last = points.rsplit(" ", 1)[-1].split(",")
            chart.labels.append(
                Label(float(last[0]) + 4, float(last[1]) + 4, f"rank {r.rank}", anchor="start", bold=True)
            )
    return chart
