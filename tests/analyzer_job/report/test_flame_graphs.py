"""Flame graphs of sampled Python stacks in report.html (report.flame_charts): each frame as wide as its share, the
root on top, bounded in frames drawn, every name escaped (names come from the training's code)."""

from __future__ import annotations

import pytest

from stepscope_analyzer.report import flame_charts
from stepscope_analyzer.report.flame_charts import FLAME_W, flame_chart
from stepscope_analyzer.report.html import _environment
from stepscope_contract.python_stacks import FlameStack

pytestmark = pytest.mark.unit


def test_widths_follow_the_time_and_the_root_is_on_top() -> None:
    stacks = [FlameStack(frames=["main (t.py:1)", "load (t.py:5)"], ms_per_step=30.0),
              FlameStack(frames=["main (t.py:1)", "step (t.py:9)"], ms_per_step=10.0)]  # fmt: skip
    chart = flame_chart(stacks, "rank 2")
    assert chart is not None
    by_name = {r.title.split(": ", 1)[1].split(",")[0]: r for r in chart.rects}
    assert by_name["main (t.py:1)"].y < by_name["load (t.py:5)"].y
    assert by_name["load (t.py:5)"].w == pytest.approx(0.75 * FLAME_W, abs=1.0)
    assert "30.00 ms per step (75.0%)" in by_name["load (t.py:5)"].title


def test_frames_are_bounded_and_names_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flame_charts, "MAX_RECTS", 5)
    evil = '<script>alert("x")</script> (t.py:1)'
    stacks = [FlameStack(frames=[evil, f"f{i} (t.py:{i})"], ms_per_step=1.0) for i in range(20)]
    chart = flame_chart(stacks, "rank 0")
    assert chart is not None and len(chart.rects) == 5 and chart.note
    page = _environment().from_string('{% from "_svg.html.j2" import svg %}{{ svg(c) }}').render(c=chart)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert flame_chart([], "rank 0") is None
