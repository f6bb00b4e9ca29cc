"""Geometry of the memory plot: one line per rank of its allocated memory over its recorded steps (time since its
first step's start, step boundaries marked), slow ranks in red and named at the line's end. Pure."""

from __future__ import annotations

from stepscope_analyzer.report.charts import LABEL_W, PLOT_W, Chart, Label, Line, Rect, chart_ranks
from stepscope_analyzer.report.gpu_charts import PALETTE, PLOT_H, SLOW_COLOR, TOP, _nice_top
from stepscope_contract.report import RankReport

MIB = 2**20


def memory_ranks(ranks: list[RankReport]) -> list[RankReport]:
    return [r for r in ranks if r.memory is not None and r.memory.t_ms]


def memory_chart(ranks: list[RankReport], highlight: set[int]) -> Chart | None:
    """Allocated memory (MiB) over the recorded steps, one line per rank; None when no rank recorded memory."""
    recorded = memory_ranks(ranks)
    if not recorded:
        return None
    shown, note = chart_ranks(recorded, highlight)
    usage = [(r, r.memory) for r in shown if r.memory is not None]
    t_max = max(max(m.t_ms) for _, m in usage) or 1.0
    v_max = _nice_top(max(m.peak_allocated_bytes for _, m in usage) / MIB * 1.05)
    x_of, y_of = PLOT_W / t_max, PLOT_H / v_max
    chart = Chart(width=LABEL_W + PLOT_W + 70, height=TOP + PLOT_H + 24, note=note)
    for frac in (0.0, 0.5, 1.0):
        y = TOP + PLOT_H - frac * PLOT_H
        chart.rects.append(Rect(LABEL_W, y, PLOT_W, 0.6, "#dde2e8", ""))
        chart.labels.append(Label(LABEL_W - 6, y + 4, f"{frac * v_max:,.0f} MiB"))
    for start in usage[0][1].step_starts_ms[1:]:
        chart.rects.append(Rect(LABEL_W + start * x_of, TOP, 0.6, PLOT_H, "#b8c0c8", f"step boundary, {start:.1f} ms"))
    chart.labels.append(Label(LABEL_W, TOP + PLOT_H + 16, "0 ms", anchor="start"))
    chart.labels.append(Label(LABEL_W + PLOT_W, TOP + PLOT_H + 16, f"{t_max:,.0f} ms into the recorded steps"))
    for i, (r, m) in enumerate(sorted(usage, key=lambda pair: pair[0].rank in highlight)):
        slow = r.rank in highlight
        points = " ".join(
            f"{LABEL_W + t * x_of:.1f},{TOP + PLOT_H - v / MIB * y_of:.1f}"
            for t, v in zip(m.t_ms, m.allocated_bytes, strict=True)
        )
        title = f"rank {r.rank} {m.device} memory allocated, peak {m.peak_allocated_bytes / MIB:,.1f} MiB"
        chart.lines.append(Line(points, SLOW_COLOR if slow else PALETTE[i % len(PALETTE)], title, 2.5 if slow else 1.2))
        if slow:
            end = points.rsplit(" ", 1)[-1].split(",")
            chart.labels.append(
                Label(float(end[0]) + 4, float(end[1]) + 4, f"rank {r.rank}", anchor="start", bold=True)
            )
    return chart
