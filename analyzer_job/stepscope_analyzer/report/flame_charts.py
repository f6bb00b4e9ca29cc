"""Flame graphs of sampled Python stacks (report.json's python_profile) as charts.Chart geometry: root at the top,
each frame as wide as its ms per step, children left to right by weight. Bounded: at most MAX_RECTS frames drawn
(the narrowest left out), depth at most the contract's frames per stack; every name is escaped by the template. Pure.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from stepscope_analyzer.report.charts import PLOT_W, Chart, Label, Rect
from stepscope_contract.python_stacks import FlameStack

FLAME_W = PLOT_W + 200
FRAME_H = 15
MAX_RECTS = 600
MIN_W = 0.5
"""px: narrower frames are not drawn"""
CHAR_W = 6.2


@dataclass
class _Node:
    value: float = 0.0
    children: dict[str, _Node] = field(default_factory=dict)


def _tree(stacks: list[FlameStack]) -> _Node:
    root = _Node()
    for s in stacks:
        node = root
        node.value += s.ms_per_step
        for frame in s.frames:
            node = node.children.setdefault(frame, _Node())
            node.value += s.ms_per_step
    return root


def _color(name: str) -> str:
    """A warm colour, the same for the same function."""
    h = zlib.crc32(name.split(" (", 1)[0].encode())
    return f"rgb({205 + h % 50},{80 + (h >> 8) % 120},{40 + (h >> 16) % 40})"


def flame_chart(stacks: list[FlameStack], what: str) -> Chart | None:
    """`what` names the figure in each tooltip ('rank 2', 'rank 2 beyond its peers')."""
    root = _tree(stacks)
    if root.value <= 0:
        return None
    scale = FLAME_W / root.value
    rects: list[tuple[float, int, float, str, float]] = []  # x, depth, w, frame, value
    todo = [(0.0, 0, root)]
    while todo:
        x, depth, node = todo.pop()
        for name, child in sorted(node.children.items(), key=lambda kv: (-kv[1].value, kv[0])):
            w = child.value * scale
            if w >= MIN_W:
                rects.append((x, depth, w, name, child.value))
                todo.append((x, depth + 1, child))
            x += w
    rects.sort(key=lambda r: -r[2])
    rects = rects[:MAX_RECTS]
    depth = max((r[1] for r in rects), default=0) + 1
    chart = Chart(width=FLAME_W + 2, height=depth * FRAME_H + 4)
    if len(rects) == MAX_RECTS:
        chart.note = f"the {MAX_RECTS} widest frames drawn"
    for x, d, w, name, value in rects:
        y = 2 + d * FRAME_H
        title = f"{what}: {name}, {value:,.2f} ms per step ({value / root.value:.1%})"
        chart.rects.append(Rect(x + 1, y, max(w - 0.5, 0.5), FRAME_H - 1, _color(name), title))
        fit = int(w / CHAR_W)
        if fit >= 4:
            text = name if len(name) <= fit else name[: fit - 1] + "…"
            chart.labels.append(Label(x + 3, y + FRAME_H - 4, text, "start"))
    return chart
