"""Changes ranked as a person reads them: by the self time of leaf work, so an op added under `forward` comes before
the inclusive Python frames above it; a collective's transfer time is its change and the waiting in it is never the
headline (a note names what caused it); a change on one rank is kept on that rank, not averaged over the job."""

from __future__ import annotations

import pytest
from report_maker import report, steps

from stepscope_analyzer.diff import DiffConfig, diff_reports
from stepscope_contract.diff import ChangeKind
from stepscope_contract.report import Bottleneck, Collective, RankReport, Report

pytestmark = pytest.mark.unit

N = 20  # recorded steps


def fn(name: str, category: str, total_ms: float, self_ms: float, calls: int = 1) -> Bottleneck:
    """Per step figures (ms, calls), summed over the N steps as a rank's report holds them."""
    return Bottleneck(
        name=name, category=category, count=calls * N, total_us=total_ms * 1000 * N, self_us=self_ms * 1000 * N
    )


def side(ranks: list[RankReport]) -> Report:
    return report(ranks)


def one_rank(r: int, step_ms: float, functions: list[Bottleneck], collectives: list[Collective] = ()) -> RankReport:
    durations = [step_ms * 1000 * (1 + 0.002 * (k % 3)) for k in range(N)]
    return RankReport(rank=r, steps=steps(durations), top_functions=functions, collectives=list(collectives))


def frames(extra_ms: float) -> list[Bottleneck]:
    """The Python frames around the training step: their inclusive time holds every op below them."""
    return [
        fn("<module>", "python", 40 + extra_ms, 0.1),
        fn("train.py(88): main", "python", 39 + extra_ms, 0.2),
        fn("torch/nn/modules/module.py(1751): _call_impl", "python", 30 + extra_ms, 0.5, calls=6),
    ]


OPS = [
    fn("aten::addmm", "cpu_op", 12, 12, 3),
    fn("aten::relu", "cpu_op", 3, 3, 2),
    fn("aten::linear", "cpu_op", 13, 1, 3),
]


def test_an_added_op_comes_before_the_frames_that_call_it() -> None:
    base = side([one_rank(r, 42, frames(0) + OPS) for r in range(2)])
    added = [
        fn("aten::matmul", "cpu_op", 5.5, 0.3),
        fn("aten::mm", "cpu_op", 5.2, 5.2),
        fn("aten::tanh", "cpu_op", 1, 1),
    ]
    cand = side([one_rank(r, 48.5, frames(6.5) + OPS + added) for r in range(2)])
    d = diff_reports(base, cand, DiffConfig(max_regression_pct=15.0))
    first = [c.name for c in d.top_changes[:3]]
    assert first[:2] == ["aten::mm", "aten::tanh"]
    assert not {c.kind for c in d.top_changes[:3]} & {"python"}
    mm = d.top_changes[0]
    assert mm.change is ChangeKind.ADDED and mm.basis == "self" and mm.delta_us_per_step == pytest.approx(5200.0)
    # the frames did not change themselves: their own time is the same, their inclusive time carries the op
    assert all(c.kind != "python" for c in d.top_changes)


def test_a_new_call_site_is_the_change_with_its_inclusive_time() -> None:
    base = side([one_rank(r, 42, frames(0) + OPS) for r in range(2)])
    region = fn("added_round", "user_annotation", 6.2, 0.1)
    cand = side([one_rank(r, 48.2, frames(6.2) + OPS + [region, fn("aten::mm", "cpu_op", 6.1, 6.1)]) for r in range(2)])
    d = diff_reports(base, cand, DiffConfig(max_regression_pct=15.0))
    top = d.top_changes[0]
    assert (top.name, top.basis, top.change) == ("added_round", "inclusive", ChangeKind.ADDED)
    assert top.delta_us_per_step == pytest.approx(6200.0)
    assert d.top_changes[1].name == "aten::mm"
    # the added work sums self times: the region's own 0.1 ms and the op's 6.1 ms, not the region twice
    assert d.added_work is not None and d.added_work.us_per_step == pytest.approx(6200.0)


def _pipeline(load_ms: float, wait_ms: float, slow: int | None) -> Report:
    """Four ranks of an 80 ms step; `slow` loads its batch `load_ms` longer, the others wait that long for it in
    the all-reduce (the collective table's wait_us; top_functions lists the collective's whole time)."""
    ranks = []
    for r in range(4):
        extra = load_ms if r == slow else 0.0
        wait = wait_ms if r != slow else 0.0
        comm_ms = 10 + wait
        ranks.append(
            one_rank(
                r,
                80 + load_ms,
                [
                    fn("load_batch", "user_annotation", 5 + extra, 5 + extra),
                    fn("aten::addmm", "cpu_op", 40, 40, 3),
                    fn("gloo:all_reduce", "communication", comm_ms, comm_ms),
                ],
                [Collective(name="gloo:all_reduce", count=N, total_us=comm_ms * 1000 * N, wait_us=wait * 1000 * N)],
            )
        )
    return side(ranks)


def test_waiting_is_not_the_headline_and_a_one_rank_change_stays_on_its_rank() -> None:
    d = diff_reports(_pipeline(0, 0, None), _pipeline(60, 60, 3), DiffConfig(max_regression_pct=15.0))
    top = d.top_changes[0]
    assert (top.name, top.rank) == ("load_batch", 3)
    assert top.delta_us_per_step == pytest.approx(60_000.0)  # +60 ms on rank 3, not +15 ms averaged over four
    comm = next(c for c in d.top_changes if c.kind == "communication")
    assert comm.delta_us_per_step == pytest.approx(0.0, abs=1.0)  # the transfer did not change
    assert comm.wait_delta_us_per_step == pytest.approx(45_000.0)  # the waiting did: 60 ms on 3 ranks of 4
    assert any("waiting in gloo:all_reduce" in n and "a consequence of load_batch on rank 3" in n for n in d.notes)
    assert "top change: load_batch +60.00 ms/step (changed on rank 3)" in d.reason
