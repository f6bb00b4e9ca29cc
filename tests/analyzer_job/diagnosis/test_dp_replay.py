"""What-if replay of a data-parallel job: the step time if the slow rank ran like its peers, checked against the
same job generated without the slow rank."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope_analyzer.diagnosis import diagnose
from stepscope_analyzer.diagnosis.dp_replay import dp_work
from stepscope_analyzer.diagnosis.facts import job_facts
from stepscope_analyzer.diagnosis.rank_costs import rank_samples
from stepscope_contract.report import Cause
from stepscope_testing.synthetic import JobShape, synthetic_job

pytestmark = pytest.mark.unit


def test_the_slow_rank_like_its_peers_replays_to_the_healthy_jobs_step() -> None:
    d = diagnose(synthetic_job(JobShape(), slow_rank=3, cause=Cause.COMPUTE, extra_us=30_000.0))
    healthy = diagnose(synthetic_job(JobShape()))
    w = next(w for w in d.what_if if w.kind == "like_peers")
    assert w.change == "rank 3 ran like its peers"
    assert w.step_us == pytest.approx(healthy.median_step_us, rel=0.05)
    assert w.gain_us == pytest.approx(d.median_step_us - healthy.median_step_us, rel=0.2)


def test_a_healthy_data_parallel_job_has_no_what_if() -> None:
    d = diagnose(synthetic_job(JobShape()))
    assert d.what_if == [] and np.isfinite(d.median_step_us)


def test_the_job_s_facts_build_the_work_table_once_for_every_reader() -> None:
    """The permutation test, the ranking's shares and the what-ifs read one table (JobFacts.dp_work), built once from
    the facts' own per-step samples and shared by every view of the facts."""
    ranks = synthetic_job(JobShape(), slow_rank=3, cause=Cause.COMPUTE, extra_us=30_000.0)
    facts = job_facts(ranks)
    table = facts.dp_work
    assert table is not None and facts.dp_work is table and facts.seeing(facts.found).dp_work is table
    assert table == dp_work(facts.ok, rank_samples(facts.ok))
    assert sorted(table.work) == [r.rank for r in ranks] and all(len(w) == table.steps for w in table.work.values())
    heaviest = [max(table.work, key=lambda r: table.work[r][t]) for t in range(table.steps)]
    assert set(heaviest) == {3}
