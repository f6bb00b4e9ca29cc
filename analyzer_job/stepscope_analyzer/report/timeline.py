"""The step timeline: the job's slowest recorded step, each rank's phases in time order (RankReport.step_spans),
one row per rank, and its geometry for the page. Pure.

Collectives end on every rank at the same instant (when the last rank arrives), so the rows are aligned on the end of
each rank's last collective wait in the step: the rank the others wait for shows its work where theirs shows waiting.
A large job is bounded to MAX_ROWS rows: slow ranks each get a row, the other ranks are grouped by their time in that
step (contiguous groups of similar time) and each group is drawn as its median member. The per-rank summaries carry
every step's spans; the report keeps the timeline's step only.
"""

from __future__ import annotations

import math

from stepscope_analyzer.diagnosis.stats import median
from stepscope_analyzer.report.charts import PLOT_W, ROW_H, Chart, Label, Rect
from stepscope_analyzer.report.phase_charts import PHASE_COLORS
from stepscope_contract.merged_trace import MergedTrace
from stepscope_contract.ranks import format_rank_set
from stepscope_contract.report import PhaseSpan, RankReport, StepTimeline, TimelineRow

MAX_ROWS = 24
ROW_LABEL_W = 150
MIN_TEXT_W = 56
"""px a span needs to carry its name"""
AXIS_H = 18
"""px below the rows: the time axis"""
TICKS = 6
"""about this many ticks on the axis"""


def _with_spans(ranks: list[RankReport]) -> list[RankReport]:
    return [r for r in ranks if r.step_spans and len(r.step_spans) == len(r.steps.durations_us)]


def slowest_step(ranks: list[RankReport]) -> int | None:
    """The index of the recorded step whose median duration over the ranks is the longest."""
    usable = _with_spans(ranks)
    steps = min((len(r.step_spans) for r in usable), default=0)
    if steps == 0:
        return None
    return max(range(steps), key=lambda i: (median([r.steps.durations_us[i] for r in usable]), -i))


def _groups(ranks: list[RankReport], index: int, slow: set[int]) -> list[list[RankReport]]:
    """Slow ranks alone; the others in contiguous groups of similar step time, at most MAX_ROWS rows in all."""
    alone = [r for r in ranks if r.rank in slow][: MAX_ROWS // 2]
    rest = sorted((r for r in ranks if r not in alone), key=lambda r: (r.steps.durations_us[index], r.rank))
    room = MAX_ROWS - len(alone)
    if len(rest) <= room:
        return [[r] for r in sorted(alone + rest, key=lambda r: r.rank)]
    size = -(-len(rest) // room)
    return [[r] for r in alone] + [rest[i : i + size] for i in range(0, len(rest), size)]


def job_timeline(ranks: list[RankReport], slow: set[int]) -> StepTimeline | None:
    """The slowest step of every rank that carries its spans (CPU ranks), rows grouped past MAX_ROWS."""
    usable = _with_spans(ranks)
    index = slowest_step(usable)
    if index is None:
        return None
    rows = []
    for group in _groups(usable, index, slow):
        ordered = sorted(group, key=lambda r: r.steps.durations_us[index])
        drawn = ordered[len(ordered) // 2]
        rows.append(
            TimelineRow(
                rank=drawn.rank,
                ranks=format_rank_set(sorted(r.rank for r in group)) if len(group) > 1 else "",
                step_us=drawn.steps.durations_us[index],
                spans=drawn.step_spans[index],
            )
        )
    numbers = usable[0].steps.numbers
    number = numbers[index] if len(numbers) == len(usable[0].steps.durations_us) else None
    return StepTimeline(step_index=index, step_number=number, rows=rows, ranks_total=len(usable))


def _anchor(row: TimelineRow) -> float:
    """Where the row's last collective wait ends (its step's end when it has none)."""
    waits = [s.end_us for s in row.spans if s.phase == "communication_wait"]
    return max(waits) if waits else row.step_us


def _name(span: PhaseSpan) -> str:
    return span.label or span.phase.replace("_", " ")


def tick_step_ms(total_ms: float) -> float:
    """A round tick interval (1, 2 or 5 x 10^k ms) giving about TICKS ticks over `total_ms`."""
    raw = max(total_ms, 1e-6) / TICKS
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _axis(chart: Chart, x0: float, total_us: float, scale: float, top: float) -> None:
    """Ticks in ms from the step's left edge, below the rows."""
    step = tick_step_ms(total_us / 1000)
    count = int(total_us / 1000 / step + 1e-9)
    chart.rects.append(Rect(x0, top, PLOT_W, 0.8, "#888", ""))
    for i in range(count + 1):
        at = x0 + i * step * 1000 * scale
        chart.rects.append(Rect(at - 0.4, top, 0.8, 4, "#888", ""))
        text = f"{i * step:,.{_decimals(step)}f}" + (" ms" if i == count else "")
        chart.labels.append(Label(at, top + 14, text, anchor="middle" if i < count else "end"))


def _decimals(step: float) -> int:
    return 0 if step >= 1 else min(int(-math.floor(math.log10(step))), 6)


def _row_link(row: TimelineRow, merged: MergedTrace | None) -> tuple[str, str]:
    """(href, tooltip) of a row's label: its rank's place in the merged trace, when the trace holds it."""
    if merged is None or not merged.link or row.rank not in merged.ranks:
        return "", ""
    at = merged.row_ts_us.get(str(row.rank))
    where = f", this step from {at / 1000:,.3f} ms" if at is not None else ""
    return merged.link, f"rank {row.rank} is process {row.rank} of the merged trace{where} (open it in Perfetto)"


def timeline_chart(tl: StepTimeline, highlight: set[int], merged: MergedTrace | None = None) -> Chart:
    """Rows aligned on their last collective's end; each span in its phase's colour, named where it fits; a time
    axis in ms; each row's label links to its rank's process in the merged trace (when `merged` holds it)."""
    left = max(_anchor(r) for r in tl.rows)
    right = max(r.step_us - _anchor(r) for r in tl.rows)
    total = max(left + right, 1e-9)
    scale = PLOT_W / total
    x0 = float(ROW_LABEL_W)
    chart = Chart(width=ROW_LABEL_W + PLOT_W + 10, height=ROW_H * len(tl.rows) + 30 + AXIS_H)
    for i, row in enumerate(tl.rows):
        y = 4 + i * ROW_H
        who = f"ranks {row.ranks} (as {row.rank})" if row.ranks else f"rank {row.rank}"
        href, hint = _row_link(row, merged)
        chart.labels.append(Label(ROW_LABEL_W - 6, y + ROW_H - 5, who, bold=row.rank in highlight, href=href,
                                  title=hint))  # fmt: skip
        shift = left - _anchor(row)
        for span in row.spans:
            x = x0 + (shift + span.start_us) * scale
            w = max((span.end_us - span.start_us) * scale, 0.5)
            ms = (span.end_us - span.start_us) / 1000
            title = f"{who}: {_name(span)} ({span.phase.replace('_', ' ')}), {ms:,.2f} ms"
            chart.rects.append(Rect(x, y, w, ROW_H - 3, PHASE_COLORS.get(span.phase, "#c8c8c8"), title))
            if w >= MIN_TEXT_W:
                text = _name(span)
                fit = max(int(w / 6.2), 4)
                chart.labels.append(
                    Label(x + 3, y + ROW_H - 5, text if len(text) <= fit else text[: fit - 1] + "…", "start")
                )
    at = x0 + left * scale
    bottom = ROW_H * len(tl.rows) + 6
    _axis(chart, x0, total, scale, bottom + 1)
    chart.rects.append(Rect(at - 0.5, 0, 1.0, bottom, "#333", "the collective ends on every rank"))
    near_end = at > x0 + PLOT_W - 60
    chart.labels.append(Label(at, chart.height - 4, "collectives end", anchor="end" if near_end else "middle"))
    chart.labels.append(Label(x0, chart.height - 4, f"{total / 1000:,.1f} ms across", anchor="start"))
    return chart
