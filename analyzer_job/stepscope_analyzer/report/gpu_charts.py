"""Geometry of the GPU plots: one line per rank of a metric (SM clock, power) over the captured window, slow ranks
in red and named at the line's end; and the per-rank GPU table's rows. The template draws them. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from stepscope_analyzer.report.charts import LABEL_W, PLOT_W, Chart, Label, Line, Rect, chart_ranks
from stepscope_contract.report import GpuMetrics, RankReport

PLOT_H = 130
TOP = 10
SLOW_COLOR = "#d9534f"
PALETTE = ("#2f7ed8", "#4c9f70", "#8e6bbf", "#f0ad4e", "#17becf", "#7f7f7f", "#bcbd22", "#1f3a93")


@dataclass(frozen=True)
class GpuPlot:
    key: str
    title: str
    unit: str


GPU_PLOTS = (GpuPlot("sm_clock_mhz", "SM clock", "MHz"), GpuPlot("power_w", "power", "W"))


def _values(m: GpuMetrics, key: str) -> list[float | None]:
    values: list[float | None] = getattr(m.series, key)
    return values


def _nice_top(value: float) -> float:
    """A round upper bound of the axis at or above `value` (1, 2 or 5 times a power of ten)."""
    if value <= 0:
        return 1.0
    magnitude = 10.0 ** (len(str(int(value))) - 1)
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


def _segments(ts: list[float], vs: list[float | None], x_of: float, y_of: float) -> list[str]:
    """'x,y ...' runs of known values (a None breaks the line)."""
    runs: list[list[str]] = [[]]
    for t, v in zip(ts, vs, strict=False):
        if v is None:
            runs.append([])
            continue
        runs[-1].append(f"{LABEL_W + t * x_of:.1f},{TOP + PLOT_H - v * y_of:.1f}")
    return [" ".join(run) for run in runs if run]


def gpu_line_chart(ranks: list[RankReport], highlight: set[int], plot: GpuPlot) -> Chart | None:
    """One line per rank with samples of `plot.key`; None when no rank has any."""
    sampled = [r for r in ranks if r.gpu_metrics is not None and any(_values(r.gpu_metrics, plot.key))]
    if not sampled:
        return None
    shown, note = chart_ranks(sampled, highlight)
    metrics = [r.gpu_metrics for r in shown if r.gpu_metrics is not None]
    t_max = max(max(m.series.t_s, default=0.0) for m in metrics) or 1.0
    peak = max(max((v for v in _values(m, plot.key) if v is not None), default=0.0) for m in metrics)
    v_max = _nice_top(peak * 1.05)
    x_of, y_of = PLOT_W / t_max, PLOT_H / v_max
    chart = Chart(width=LABEL_W + PLOT_W + 70, height=TOP + PLOT_H + 24, note=note)
    for frac in (0.0, 0.5, 1.0):
        y = TOP + PLOT_H - frac * PLOT_H
        chart.rects.append(Rect(LABEL_W, y, PLOT_W, 0.6, "#dde2e8", ""))
        chart.labels.append(Label(LABEL_W - 6, y + 4, f"{frac * v_max:,.0f} {plot.unit}"))
    chart.labels.append(Label(LABEL_W, TOP + PLOT_H + 16, "0 s", anchor="start"))
    chart.labels.append(Label(LABEL_W + PLOT_W, TOP + PLOT_H + 16, f"{t_max:.2f} s into the window"))
    ordered = sorted(shown, key=lambda r: r.rank in highlight)  # slow ranks drawn last, on top
    for i, r in enumerate(ordered):
        assert r.gpu_metrics is not None
        m = r.gpu_metrics
        slow = r.rank in highlight
        stats = getattr(m, plot.key)
        mean = f", mean {stats.mean:,.0f} {plot.unit}" if stats is not None else ""
        title = f"rank {r.rank} {plot.title}{mean}"
        color = SLOW_COLOR if slow else PALETTE[i % len(PALETTE)]
        points = _segments(m.series.t_s, _values(m, plot.key), x_of, y_of)
        chart.lines.extend(Line(p, color, title, 2.5 if slow else 1.2) for p in points)
        if slow and points:
            end_x, end_y = (float(c) for c in points[-1].rsplit(" ", 1)[-1].split(","))
            chart.labels.append(Label(end_x + 4, end_y + 4, f"rank {r.rank}", anchor="start", bold=True))
    return chart


def gpu_charts(ranks: list[RankReport], highlight: set[int]) -> list[tuple[GpuPlot, Chart]]:
    out = []
    for plot in GPU_PLOTS:
        chart = gpu_line_chart(ranks, highlight, plot)
        if chart is not None:
            out.append((plot, chart))
    return out
