"""The cross-rank Flight Recorder analysis: on real 4-rank gloo dumps (one per fault) and on generated dumps for the
cases a CPU run cannot make (rings that wrapped, a collective still in flight for a moment, membership, dtypes)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fr_dumps import dump, entry, fixture_dumps, parsed, site

from stepscope_analyzer.flight_recorder import analyse

pytestmark = pytest.mark.unit


def test_a_rank_stuck_in_data_loading_is_missing_from_the_wavefront() -> None:
    findings = analyse(fixture_dumps("stuck"))
    assert findings.culprits == [2] and findings.mismatches == []
    [front] = findings.wavefronts
    assert front.process_group == "0:default_pg" and front.members == [0, 1, 2, 3]
    assert front.waiting_ranks == [0, 1, 3] and front.missing_ranks == [2]
    assert front.collective is not None and front.collective.op == "all_reduce"
    assert front.collective.call_site == site("backward")  # DDP's gradient all_reduce, issued by loss.backward()
    rows = {r.rank: r for r in front.rows}
    assert rows[2].state == "behind" and rows[2].last_completed_seq == front.seq - 1
    assert {rows[r].state for r in (0, 1, 3)} == {"waiting"}


def test_a_rank_that_calls_another_collective_is_the_mismatch() -> None:
    findings = analyse(fixture_dumps("collective"))
    assert findings.culprits == [2]
    [mismatch] = findings.mismatches
    assert mismatch.kind == "op" and mismatch.ranks == [2]
    assert mismatch.message == (
        f"rank 2 called broadcast [1024] where ranks 0, 1, 3 called all_reduce [4], seq {mismatch.seq} of default_pg"
    )


def test_a_rank_that_passes_other_sizes_is_the_mismatch() -> None:
    findings = analyse(fixture_dumps("sizes"))
    assert findings.culprits == [2]
    [mismatch] = findings.mismatches
    assert mismatch.kind == "sizes"
    assert mismatch.message.startswith("rank 2 called all_reduce [8] where ranks 0, 1, 3 called all_reduce [4], seq")


def test_a_rank_whose_process_died_is_the_one_without_a_dump() -> None:
    dumps = fixture_dumps("die")
    assert sorted(dumps) == [0, 1, 3]
    findings = analyse(dumps)
    assert findings.culprits == [2] and findings.mismatches == []
    [front] = findings.wavefronts
    assert front.missing_ranks == [2]
    assert front.collective is not None and front.collective.call_site == site("backward")
    states = {r.rank: r.state for r in front.rows}
    assert states[2] == "no dump"
    # the peers' collective failed when rank 2 vanished: their processes exited during the capture
    assert "exited" in {states[r] for r in (0, 1, 3)}
    assert "no Flight Recorder dump from rank 2" in findings.notes


def test_a_healthy_jobs_dumps_show_no_wavefront() -> None:
    findings = analyse(fixture_dumps("none"))
    assert findings.ranks == [0, 1, 2, 3]
    assert findings.wavefronts == [] and findings.mismatches == [] and findings.culprits == []


def test_a_collective_in_flight_for_a_moment_in_an_on_demand_dump_is_no_wavefront() -> None:
    docs = {r: dump(r, [entry(s) for s in range(1, 10)], reason="on-demand") for r in range(4)}
    docs[0]["entries"].append(entry(10, completed=False, age_s=0.01))  # rank 0 is a step ahead, for 10 ms
    assert analyse(parsed(docs)).wavefronts == []
    docs[0]["entries"][-1] = entry(10, completed=False, age_s=5.0)  # five seconds: the others hold it up
    findings = analyse(parsed(docs))
    assert findings.culprits == [1, 2, 3] and findings.wavefronts[0].waiting_ranks == [0]


def test_rings_that_wrapped_are_compared_where_they_overlap() -> None:
    docs = {r: dump(r, [entry(s) for s in range(100 + r, 200)] + [entry(200, completed=False)]) for r in (0, 1, 3)}
    docs[2] = dump(2, [entry(s) for s in range(150, 200)])
    findings = analyse(parsed(docs))
    assert findings.mismatches == [] and findings.culprits == [2]
    assert findings.wavefronts[0].seq == 200


def test_dtype_mismatch_and_the_majority_decides_even_against_rank_0() -> None:
    docs = {r: dump(r, [entry(1), entry(2, completed=False)]) for r in range(4)}
    docs[0]["entries"][1] = entry(2, dtype="Half", completed=False)
    [mismatch] = analyse(parsed(docs)).mismatches
    assert mismatch.kind == "dtypes" and mismatch.ranks == [0]
    assert "rank 0 called all_reduce [4] Half where ranks 1, 2, 3 called all_reduce [4] Float" in mismatch.message


def test_process_groups_are_aligned_separately_a_cross_group_deadlock_names_both_ranks() -> None:
    groups = {"0": {"desc": "default_pg", "ranks": [0, 1, 2, 3]}, "1": {"desc": "tp", "ranks": [0, 1]}}
    tp = ("1", "tp")
    docs = {
        # rank 0 waits in tp's second collective; rank 1 went to the default group's second one first
        0: dump(0, [entry(1), entry(1, group=tp), entry(2, group=tp, completed=False)], groups=groups),
        1: dump(1, [entry(1), entry(1, group=tp), entry(2, completed=False)], groups=groups),
        2: dump(2, [entry(1), entry(2, completed=False)], groups=groups),
        3: dump(3, [entry(1), entry(2, completed=False)], groups=groups),
    }
    findings = analyse(parsed(docs))
    fronts = {w.process_group: (w.waiting_ranks, w.missing_ranks) for w in findings.wavefronts}
    assert fronts == {"0:default_pg": ([1, 2, 3], [0]), "1:tp": ([0], [1])}
    assert findings.culprits == [0, 1] and findings.mismatches == []


def test_ranks_that_disagree_on_a_groups_membership_are_a_mismatch() -> None:
    agreed = {"0": {"desc": "default_pg", "ranks": [0, 1, 2, 3]}, "1": {"desc": "tp", "ranks": [0, 1]}}
    odd = {"0": {"desc": "default_pg", "ranks": [0, 1, 2, 3]}, "1": {"desc": "tp", "ranks": [0, 1, 3]}}
    docs = {r: dump(r, [entry(1)], groups=odd if r == 3 else agreed) for r in range(4)}
    [mismatch] = analyse(parsed(docs)).mismatches
    assert (mismatch.process_group, mismatch.kind, mismatch.ranks) == ("1:tp", "membership", [3])
    assert mismatch.message == "tp (process group 1): rank 3 has ranks 0-1,3 where ranks 0, 1, 2 have ranks 0-1"


def test_a_group_in_which_every_member_waits_has_no_culprit_but_a_note() -> None:
    docs = {r: dump(r, [entry(1), entry(2, completed=False)]) for r in range(4)}
    findings = analyse(parsed(docs))
    assert findings.culprits == [] and findings.wavefronts == []
    assert any("every member of default_pg is inside all_reduce seq 2" in n for n in findings.notes)


def test_with_two_buckets_in_flight_the_wavefront_is_the_first_one_the_missing_rank_never_entered() -> None:
    docs = {
        r: dump(r, [entry(s, sizes=[[64]]) for s in range(1, 45)] + [entry(45, sizes=[[32]], completed=False)]
                + [entry(46, sizes=[[64]], completed=False)])
        for r in (0, 1, 3)
    }  # fmt: skip
    docs[2] = dump(2, [entry(s, sizes=[[64]]) for s in range(1, 45)])
    [front] = analyse(parsed(docs)).wavefronts
    assert front.seq == 45 and front.collective is not None and front.collective.input_sizes == [[32]]
    assert front.missing_ranks == [2] and front.waiting_ranks == [0, 1, 3]
