"""Geometry of the inline SVG charts; the template draws them (and escapes every label). Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from stepscope_contract.report import Bottleneck, RankReport

MAX_CHART_RANKS = 64
ROW_H = 16
LABEL_W = 90
PLOT_W = 640

SEGMENT_COLORS = {"compute": "#2f7ed8", "non_compute": "#f28f43", "idle": "#c8c8c8"}


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str
    title: str


@dataclass(frozen=True)
class Label:
    x: float
    y: float
    text: str
    anchor: str = "end"
    bold: bool = False
    href: str = ""
    """a relative link the label opens (the template escapes it)"""
    title: str = ""
    """the link's tooltip (only with href)"""


@dataclass(frozen=True)
class Line:
    """A polyline: 'x,y x,y ...' in chart coordinates."""

    points: str
    stroke: str
    title: str
    width: float = 1.5


@dataclass
class Chart:
    width: int
    height: int
    rects: list[Rect] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)
    note: str = ""
    lines: list[Line] = field(default_factory=list)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def chart_ranks(ranks: list[RankReport], highlight: set[int]) -> tuple[list[RankReport], str]:
    """At most MAX_CHART_RANKS ranks: the highlighted ones first, then the lowest ranks."""
    if len(ranks) <= MAX_CHART_RANKS:
        return ranks, ""
    chosen = [r for r in ranks if r.rank in highlight][:MAX_CHART_RANKS]
    rest = [r for r in ranks if r.rank not in highlight]
    chosen += rest[: MAX_CHART_RANKS - len(chosen)]
    chosen.sort(key=lambda r: r.rank)
    return chosen, f"showing {len(chosen)} of {len(ranks)} ranks (slow ranks first, then the lowest)"


def breakdown_chart(ranks: list[RankReport], highlight: set[int]) -> Chart:
    """Per rank: compute / non-compute / idle share of the analysed window (HTA temporal breakdown)."""
    shown, note = chart_ranks(ranks, highlight)
    chart = Chart(width=LABEL_W + PLOT_W + 10, height=ROW_H * len(shown) + 24, note=note)
    for i, r in enumerate(shown):
        y = 4 + i * ROW_H
        x = float(LABEL_W)
        chart.labels.append(Label(LABEL_W - 6, y + ROW_H - 5, f"rank {r.rank}", bold=r.rank in highlight))
        for key, pct in (
            ("compute", r.compute_time_pctg),
            ("non_compute", r.non_compute_time_pctg),
            ("idle", r.idle_time_pctg),
        ):
            w = max(0.0, min(pct, 100.0)) / 100.0 * PLOT_W
            if w > 0:
                title = f"rank {r.rank} {key.replace('_', '-')}: {pct:.1f}%"
                chart.rects.append(Rect(x, y, w, ROW_H - 3, SEGMENT_COLORS[key], title))
                x += w
    return chart


def bottleneck_chart(bottlenecks: list[Bottleneck], name_chars: int = 60) -> Chart:
    """Bottleneck ratio of the top functions (names cut to `name_chars`, full name in the tooltip)."""
    label_w = 7 * name_chars
    plot_w = 300
    top = max((b.bottleneck_ratio for b in bottlenecks), default=0.0)
    chart = Chart(width=label_w + plot_w + 60, height=ROW_H * len(bottlenecks) + 8)
    for i, b in enumerate(bottlenecks):
        y = 4 + i * ROW_H
        name = _cut(b.name, name_chars)
        chart.labels.append(Label(label_w - 6, y + ROW_H - 5, name))
        w = (b.bottleneck_ratio / top * plot_w) if top > 0 else 0.0
        chart.rects.append(
            Rect(label_w, y, max(w, 0.5), ROW_H - 3, "#8e6bbf", f"{_cut(b.name, 400)}: {b.bottleneck_ratio:.2%}")
        )
        chart.labels.append(Label(label_w + w + 4, y + ROW_H - 5, f"{b.bottleneck_ratio:.1%}", anchor="start"))
    return chart
