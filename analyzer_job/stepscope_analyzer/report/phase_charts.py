"""Geometry of the step-phase bars: one stacked bar per rank (µs per step in each phase, one scale for all ranks,
so the slow rank's longer bar and its larger phase stand out), and one bar per recorded step of a slow rank.
The template draws them and escapes every label. Pure."""

from __future__ import annotations

from stepscope_analyzer.report.charts import LABEL_W, PLOT_W, ROW_H, Chart, Label, Rect, chart_ranks
from stepscope_contract.report import RankReport, StepPhases

PHASES = ("data_loading", "forward", "backward", "optimizer", "communication_wait", "other")
PHASE_COLORS = {
    "data_loading": "#8c6bb1",
    "forward": "#2f7ed8",
    "backward": "#4cae4c",
    "optimizer": "#f0ad4e",
    "communication_wait": "#d9534f",
    "other": "#c8c8c8",
}
MAX_STEP_BARS = 100


def _ms(us: float) -> str:
    return f"{us / 1000:.2f} ms" if us < 100_000 else f"{us / 1000:.0f} ms"


def phase_values(p: StepPhases) -> list[tuple[str, float]]:
    return [(name, max(0.0, float(getattr(p, name)))) for name in PHASES]


def _bar(
    chart: Chart, y: float, label: str, phases: StepPhases, *, scale: float, what: str, bold: bool = False
) -> None:
    chart.labels.append(Label(LABEL_W - 6, y + ROW_H - 5, label, bold=bold))
    x = float(LABEL_W)
    total = 0.0
    for name, us in phase_values(phases):
        total += us
        w = us * scale
        if w > 0:
            title = f"{what} {name.replace('_', ' ')}: {_ms(us)}"
            chart.rects.append(Rect(x, y, w, ROW_H - 3, PHASE_COLORS[name], title))
            x += w
    chart.labels.append(Label(x + 4, y + ROW_H - 5, _ms(total), anchor="start"))


def phase_chart(ranks: list[RankReport], highlight: set[int]) -> Chart | None:
    """Per rank with phases: its mean step split into the six phases; None when no rank has phases."""
    with_phases = [r for r in ranks if r.phases is not None]
    if not with_phases:
        return None
    shown, note = chart_ranks(with_phases, highlight)
    longest = max(sum(v for _, v in phase_values(r.phases)) for r in shown if r.phases is not None)
    scale = PLOT_W * 0.9 / longest if longest > 0 else 0.0
    chart = Chart(width=LABEL_W + PLOT_W + 10, height=ROW_H * len(shown) + 8, note=note)
    for i, r in enumerate(shown):
        assert r.phases is not None
        _bar(
            chart,
            4 + i * ROW_H,
            f"rank {r.rank}",
            r.phases,
            scale=scale,
            what=f"rank {r.rank}",
            bold=r.rank in highlight,
        )
    return chart


def step_phase_chart(rank: RankReport) -> Chart | None:
    """The rank's recorded steps, one stacked bar each; None when it has no per-step phases."""
    steps = rank.step_phases[:MAX_STEP_BARS]
    if not steps:
        return None
    longest = max(sum(v for _, v in phase_values(p)) for p in steps)
    scale = PLOT_W * 0.9 / longest if longest > 0 else 0.0
    cut = len(rank.step_phases) - len(steps)
    note = f"first {len(steps)} of {len(rank.step_phases)} steps" if cut else ""
    chart = Chart(width=LABEL_W + PLOT_W + 10, height=ROW_H * len(steps) + 8, note=note)
    for i, p in enumerate(steps):
        _bar(chart, 4 + i * ROW_H, f"step {i}", p, scale=scale, what=f"rank {rank.rank} step {i}")
    return chart
