"""stepscope's Flight Recorder rules against PyTorch's own analyzer (torch.distributed.flight_recorder) on the same
real dumps: the first collective PyTorch fails is the one stepscope names, with the same ranks. The analyzer image
does not carry torch, so stepscope implements the rules itself; this test keeps the two in step."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fr_dumps import fixture_dumps, fixture_raw

from stepscope_analyzer.flight_recorder import analyse

pytestmark = pytest.mark.unit
builder = pytest.importorskip("torch.distributed.flight_recorder.components.builder")


def pytorch_first_failure(raw: dict[int, dict[str, Any]]) -> tuple[int, set[int], dict[int, str]] | None:
    """PyTorch's verdict: (sequence number, ranks missing from it, rank -> mismatch type) of the first collective
    that does not pass its checks; None when every collective passes. gloo leaves pg_config empty, so the group
    membership stepscope's hook recorded is handed to it in PyTorch's own format."""
    details = {}
    for rank, doc in raw.items():
        groups = doc["stepscope"]["processGroups"]
        config = {name: {"desc": g["desc"], "ranks": str(g["ranks"])} for name, g in groups.items()}
        details[f"rank{rank}"] = {
            "rank": rank,
            "entries": doc["entries"],
            "version": doc["version"],
            "pg_config": config,
        }
    args = argparse.Namespace(
        verbose=False, just_print_entries=False, allow_incomplete_ranks=True, mismatch_cap=10, selected_ranks=None
    )
    db = builder.build_db(details, args, next(iter(raw.values()))["version"])
    # a collective fails PyTorch's checks when it has errors, missing ranks, or no matched call on every rank
    matched = {call.collective_id for call in db.ncclcalls if call.collective_id is not None}
    failed = [c for c in db.collectives if not c.pass_check or c.missing_ranks or c.id not in matched]
    if not failed:
        return None
    first = min(failed, key=lambda c: c.collective_seq_id)
    mismatched = {rank: info.type_of_mismatch.state.name for rank, info in (first.mismatch_collectives or {}).items()}
    return first.collective_seq_id, set(first.missing_ranks or ()), mismatched


def test_a_stuck_rank_pytorch_and_stepscope_name_the_same_collective_and_rank() -> None:
    verdict = pytorch_first_failure(fixture_raw("stuck"))
    assert verdict is not None
    seq, missing, mismatched = verdict
    findings = analyse(fixture_dumps("stuck"))
    [front] = findings.wavefronts
    assert (front.seq, set(front.missing_ranks), mismatched) == (seq, missing, {})
    assert findings.culprits == [2]


def test_a_dead_rank_pytorch_cannot_pair_without_its_dump_stepscope_names_it_and_the_collective(
    caplog: pytest.LogCaptureFixture,
) -> None:
    raw = fixture_raw("die")
    with caplog.at_level(logging.INFO, logger="Flight Recorder"):
        pytorch_first_failure(raw)
    # PyTorch stops at the first collective: it cannot decide anything while a member's dump is missing
    assert "missed FR dumps from ranks ({2})" in caplog.text
    findings = analyse(fixture_dumps("die"))
    assert findings.culprits == [2]
    [front] = findings.wavefronts
    assert front.seq == max(e["collective_seq_id"] for doc in raw.values() for e in doc["entries"])


@pytest.mark.parametrize(
    ("fault", "state"), [("collective", "COLLECTIVE_TYPE_MISMATCH"), ("sizes", "SIZE_OR_SYNTAX_MISMATCH")]
)
def test_desyncs_pytorch_and_stepscope_name_the_same_mismatch(fault: str, state: str) -> None:
    verdict = pytorch_first_failure(fixture_raw(fault))
    assert verdict is not None
    seq, _, mismatched = verdict
    [mismatch] = analyse(fixture_dumps(fault)).mismatches
    assert mismatch.seq == seq
    assert mismatched == {2: state} and mismatch.ranks == [2]


def test_healthy_pytorch_fails_only_the_in_flight_tail_where_stepscope_sees_nothing() -> None:
    raw = fixture_raw("none")
    verdict = pytorch_first_failure(raw)
    common = min(max(e["collective_seq_id"] for e in doc["entries"]) for doc in raw.values())
    # a dump of a running job: PyTorch flags the collective some ranks had not reached yet when they were dumped
    assert verdict is None or verdict[0] > common
    findings = analyse(fixture_dumps("none"))
    assert findings.wavefronts == [] and findings.mismatches == [] and findings.culprits == []
