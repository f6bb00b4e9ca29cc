"""The memory plot puts every rank on its own step boundaries: a rank twice as slow is drawn over the same steps,
not twice as wide, and each step boundary is every rank's."""

from __future__ import annotations

import pytest

from stepscope_analyzer.report.charts import LABEL_W, PLOT_W
from stepscope_analyzer.report.memory_charts import memory_chart, step_positions
from stepscope_contract.report import MemoryUsage, RankReport, StepStats

pytestmark = pytest.mark.unit
MIB = 2**20


def _rank(rank: int, step_ms: float, steps: int = 3) -> RankReport:
    t = [k * step_ms / 2 for k in range(2 * steps + 1)]  # a sample at every half step, the last at the end
    memory = MemoryUsage(
        device="cpu",
        events=len(t),
        peak_allocated_bytes=64 * MIB,
        t_ms=t,
        allocated_bytes=[(32 + (k % 2) * 32) * MIB for k in range(len(t))],
        step_starts_ms=[k * step_ms for k in range(steps)],
    )
    return RankReport(rank=rank, memory=memory, steps=StepStats(count=steps, durations_us=[step_ms * 1000] * steps))


def test_samples_sit_on_their_own_ranks_steps() -> None:
    fast, slow = _rank(0, 10.0), _rank(1, 20.0)
    assert fast.memory is not None and slow.memory is not None
    expected = [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    assert step_positions(fast.memory, [10.0] * 3) == pytest.approx(expected)
    assert step_positions(slow.memory, [20.0] * 3) == pytest.approx(expected)


def test_the_boundaries_are_every_ranks_steps() -> None:
    chart = memory_chart([_rank(0, 10.0), _rank(1, 20.0)], highlight={1})
    assert chart is not None
    boundaries = [r for r in chart.rects if r.title.startswith("start of recorded step")]
    assert [round(r.x - LABEL_W, 1) for r in boundaries] == [round(PLOT_W / 3, 1), round(2 * PLOT_W / 3, 1)]
    ends = {line.title.split()[1]: line.points.rsplit(" ", 1)[-1].split(",")[0] for line in chart.lines}
    assert float(ends["0"]) == pytest.approx(float(ends["1"]), abs=0.2)  # both end at the end of their step 3
