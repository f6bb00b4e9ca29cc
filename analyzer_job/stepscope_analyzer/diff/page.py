"""diff.html: one self-contained page in the report's style (the report package's template environment, style
sheet and SVG macro), every name escaped. This module holds the charts' geometry and the rendering call."""

from __future__ import annotations

from stepscope_analyzer.diff.pr_summary import change_label, rule_text
from stepscope_analyzer.report.charts import Chart, Label, Rect
from stepscope_analyzer.report.html import render_page
from stepscope_contract.diff import DiffResult, DiffVerdict, TopChange

MAX_CHART_CHANGES = 20
MAX_TABLE_RANKS = 1024
NAME_CHARS = 60
PLOT_W = 560
ROW_H = 16
SLOWER = "#d9534f"
FASTER = "#4c9f70"
SEVERITY = {
    DiffVerdict.PASSED: "ok",
    DiffVerdict.IMPROVED: "ok",
    DiffVerdict.REGRESSED: "error",
    DiffVerdict.UNUSABLE: "slow",
}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def signed_us(value: float) -> str:
    """A signed µs delta as a readable duration."""
    sign = "+" if value >= 0 else "-"
    v = abs(value)
    if v >= 1_000_000:
        return f"{sign}{v / 1_000_000:.2f} s"
    if v >= 1_000:
        return f"{sign}{v / 1_000:.2f} ms"
    return f"{sign}{v:.0f} µs"


def interval_chart(diff: DiffResult) -> Chart:
    """The slowdown's interval and estimate on a % axis, with the gate's line at +max_regression_pct."""
    chart = Chart(width=PLOT_W + 40, height=58)
    low, high, est = diff.regression_ci_low_pct, diff.regression_ci_high_pct, diff.regression_pct
    if low is None or high is None or est is None:
        return chart
    gate = diff.max_regression_pct
    lo_axis = min(low, -gate, 0.0)
    hi_axis = max(high, gate, 0.0)
    pad = max(5.0, 0.1 * (hi_axis - lo_axis))
    lo_axis, hi_axis = lo_axis - pad, hi_axis + pad

    def x(pct: float) -> float:
        return 20 + (pct - lo_axis) / (hi_axis - lo_axis) * PLOT_W

    chart.rects.append(Rect(x(-gate), 14, x(gate) - x(-gate), 16, "#eef8f0", f"within the gate: ±{gate:g}%"))
    chart.rects.append(Rect(x(0.0) - 0.5, 8, 1, 28, "#9aa4ad", "no change"))
    chart.rects.append(Rect(x(gate) - 1, 6, 2, 32, SLOWER, f"gate: +{gate:g}%"))
    color = SLOWER if diff.verdict is DiffVerdict.REGRESSED else "#2f7ed8"
    chart.rects.append(Rect(x(low), 18, max(x(high) - x(low), 1.0), 8, color, f"interval {low:+.1f}% to {high:+.1f}%"))
    chart.rects.append(Rect(x(est) - 2, 14, 4, 16, "#1d232a", f"estimate {est:+.1f}%"))
    chart.labels.append(Label(x(0.0), 50, "0", anchor="middle"))
    chart.labels.append(Label(x(est), 10, f"{est:+.1f}%", anchor="middle", bold=True))
    chart.labels.append(Label(x(low), 50, f"{low:+.1f}%", anchor="middle"))
    chart.labels.append(Label(x(high), 50, f"{high:+.1f}%", anchor="middle"))
    chart.labels.append(Label(x(gate) - 4, 10, f"gate +{gate:g}%", anchor="end"))
    return chart


def changes_chart(changes: list[TopChange]) -> Chart:
    """The figure the changes are ordered by (µs per step at equal op speed; measured where the gate compares the
    measured steps, the two are the same) of the top changes: bars to the right are slower, to the left faster."""
    shown = changes[:MAX_CHART_CHANGES]
    label_w = 7 * NAME_CHARS
    half = PLOT_W / 2
    chart = Chart(width=label_w + PLOT_W + 80, height=ROW_H * len(shown) + 8)
    top = max((abs(c.at_equal_op_speed_delta_us_per_step) for c in shown), default=0.0)
    center = label_w + half
    for i, c in enumerate(shown):
        y = 4 + i * ROW_H
        chart.labels.append(Label(label_w - 6, y + ROW_H - 5, _cut(c.name, NAME_CHARS)))
        shown_us = c.at_equal_op_speed_delta_us_per_step
        w = abs(shown_us) / top * (half - 60) if top > 0 else 0.0
        slower = shown_us >= 0
        left = center if slower else center - w
        title = f"{_cut(c.name, 400)} ({c.kind}, {c.change.value}): {signed_us(shown_us)} per step"
        chart.rects.append(Rect(left, y, max(w, 0.5), ROW_H - 3, SLOWER if slower else FASTER, title))
        end = center + w + 4 if slower else center - w - 4
        chart.labels.append(Label(end, y + ROW_H - 5, signed_us(shown_us), anchor="start" if slower else "end"))
    return chart


def render_diff_html(diff: DiffResult) -> str:
    return render_page(
        "diff.html.j2",
        diff=diff,
        severity=SEVERITY[diff.verdict],
        interval=interval_chart(diff),
        changes=changes_chart(diff.top_changes),
        ranks=diff.ranks[:MAX_TABLE_RANKS],
        ranks_cut=max(0, len(diff.ranks) - MAX_TABLE_RANKS),
        signed_us=signed_us,
        rule=rule_text(diff),
        change_label=change_label(diff),
        slower=SLOWER,
        faster=FASTER,
    )


def diff_html_bytes(diff: DiffResult) -> bytes:
    """The page as UTF-8; undecodable characters from names become replacement marks."""
    return render_diff_html(diff).encode("utf-8", "replace")
