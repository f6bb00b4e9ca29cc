"""The reduce at any world size: every rank's compact numbers in the ranks table, the diagnosis on a bounded set of
ranks read again in full, report.json of one size whatever the number of ranks, the planted slow rank still named."""

from __future__ import annotations

import csv
import gzip
import io
import math

import pytest

from stepscope_analyzer.ranks.candidates import compared_rows
from stepscope_analyzer.ranks.discovery import RankInput
from stepscope_analyzer.ranks.facts import COLUMNS, FLOAT_COLUMNS, FactsTable
from stepscope_analyzer.ranks.pipeline import RankOutcome
from stepscope_analyzer.ranks.two_pass import Gathered, gather
from stepscope_analyzer.reduce.reduction import reduce_outcomes
from stepscope_analyzer.report import html_bytes, model_json_bytes
from stepscope_contract.report import REPORT_RANKS_IN_FULL, Cause, RankReport, RankStatus
from stepscope_testing.synthetic import JobShape, synthetic_job

pytestmark = pytest.mark.unit

BUDGET = 48
SLOW = 37


def _job(world: int) -> list[RankReport]:
    shape = JobShape(world_size=world, steps=4)
    return synthetic_job(shape, slow_rank=SLOW, cause=Cause.COMPUTE, extra_us=12_000, noise=0.01, seed=3)


def _gathered(ranks: list[RankReport], budget: int = BUDGET) -> Gathered:
    """The ranks through both passes as parsed here (no node summary: let go into the spool, read back from it)."""
    outcomes = [RankOutcome(r) for r in ranks]
    outcomes.append(RankOutcome(RankReport(rank=len(ranks), status=RankStatus.ERROR, error="unreadable")))
    inputs = [RankInput(name=f"rank{i}", rank=i) for i in range(len(outcomes))]
    return gather(enumerate(outcomes), inputs, lambda _: None, budget=budget)


def test_only_the_budget_is_held_and_the_spool_gives_back_each_summary_unchanged() -> None:
    ranks = _job(256)
    gathered = _gathered(ranks)
    assert gathered.sampled and len(gathered.table) == 257
    held = [o.summary for o in gathered.outcomes if o.summary.status is RankStatus.OK]
    assert len(held) == BUDGET
    assert [o.summary.rank for o in gathered.outcomes if o.summary.status is RankStatus.ERROR] == [256]
    by_rank = {r.rank: r for r in ranks}
    assert all(model_json_bytes(h) == model_json_bytes(by_rank[h.rank]) for h in held)
    assert SLOW in {h.rank for h in held}


def test_a_job_within_the_budget_is_held_whole() -> None:
    ranks = _job(40)
    gathered = _gathered(ranks)
    assert not gathered.sampled
    assert [o.summary.rank for o in gathered.outcomes] == list(range(41))


def test_report_json_does_not_grow_with_the_ranks_and_the_table_holds_every_rank() -> None:
    reports = {}
    for world in (128, 512):
        gathered = _gathered(_job(world))
        reports[world] = reduce_outcomes(gathered.outcomes, table=gathered.table, released_errors=gathered.errors)
        assert [s.rank for s in reports[world].diagnosis.slow_ranks][:1] == [SLOW]
        assert reports[world].diagnosis.ranks_analysed == world
        assert reports[world].distributions is not None and reports[world].distributions.analysed == world
        rows = list(csv.DictReader(io.StringIO(gzip.decompress(gathered.table.csv_gz_bytes()).decode())))
        assert [int(r["rank"]) for r in rows] == list(range(world + 1))
        assert rows[SLOW]["status"] == "ok" and rows[world]["status"] == "error"
    small, large = (len(model_json_bytes(reports[w])) for w in (128, 512))
    assert large <= 1.15 * small, (small, large)
    for report in reports.values():
        ok = [r for r in report.ranks if r.status is RankStatus.OK]
        assert SLOW in {r.rank for r in ok} and len(ok) <= REPORT_RANKS_IN_FULL
    in_full = [len(b"".join(model_json_bytes(r) for r in reports[w].ranks)) for w in (128, 512)]
    assert abs(in_full[1] - in_full[0]) <= 0.05 * in_full[0], in_full
    pages = {w: html_bytes(reports[w].model_copy(update={"ranks_table": "ranks.csv.gz"})) for w in (128, 512)}
    assert len(pages[512]) <= 1.15 * len(pages[128])
    assert b"513 read, 48 compared in full" in pages[512] and b"ranks.csv.gz" in pages[512]


def test_shard_tables_merge_into_the_whole_table() -> None:
    ranks = _job(24)
    whole = FactsTable()
    for r in ranks:
        whole.add(r)
    merged = FactsTable()
    for index in range(4):
        part = FactsTable()
        for r in ranks[index::4]:
            part.add(r)
        merged.extend(FactsTable.from_json(part.to_json()))
    assert merged.csv_gz_bytes() == whole.csv_gz_bytes()

    def ranks_of(table: FactsTable) -> list[int]:
        return sorted(table.ints["rank"][i] for i in compared_rows(table, 8))

    assert len(ranks_of(merged)) == 8 and ranks_of(merged) == ranks_of(whole)  # whatever order the shards came in
    header = gzip.decompress(whole.csv_gz_bytes()).decode().splitlines()[0]
    assert header.split(",") == list(COLUMNS)


def test_every_extreme_of_every_compared_number_is_read_in_full() -> None:
    table = FactsTable()
    ranks = _job(300)
    for r in ranks:
        table.add(r)
    chosen = set(compared_rows(table, 200))
    for column in FLOAT_COLUMNS:
        values = [(v, i) for i, v in enumerate(table.floats[column]) if not math.isnan(v)]
        if values:
            assert min(values)[1] in chosen and max(values)[1] in chosen, column
    assert len(chosen) == 200
    assert len(compared_rows(table, 40)) == 40


def test_a_table_that_does_not_add_up_is_refused() -> None:
    table = FactsTable()
    for r in _job(4):
        table.add(r)
    data = table.to_json().replace(b'"rank":[0,1,2,3]', b'"rank":[0,1,2]')
    with pytest.raises(ValueError, match="different lengths"):
        FactsTable.from_json(data)
    with pytest.raises(ValueError, match="not a ranks table"):
        FactsTable.from_json(b'{"values": []}')
