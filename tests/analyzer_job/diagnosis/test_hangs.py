"""Hang diagnosis: the culprit alone in slow_ranks, the waiting ranks in hangs with what they wait in and the line
that issued it; from the Flight Recorder when dumps exist, else from the stacks; the shown stacks put the main
thread first and leave stepscope's own thread out."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "flight_recorder"))
from fr_dumps import FIXTURES, fixture_dumps, site

from stepscope_analyzer.diagnosis import HangEvidence, diagnose
from stepscope_analyzer.diagnosis.hangs import find_hangs
from stepscope_analyzer.diagnosis.thread_stacks import parse_stacks, position
from stepscope_contract.report import Cause, RankStatus

pytestmark = pytest.mark.unit

WATCHDOG = """Thread 140 (stepscope-watchdog):
  File "/usr/lib/python3.11/threading.py", line 1002, in _bootstrap
    self._bootstrap_inner()
  File "/hook/stepscope_hook/_runtime.py", line 270, in _watch
    self._watch_once()
"""


def waiting_stacks(line: int = 52) -> str:
    return f"""stepscope: rank 0 saw no step boundary for 30.1 s (capture cap-1)
pid: 10

{WATCHDOG}
Thread 139 (MainThread):
  File "/app/train.py", line 80, in <module>
    main()
  File "/app/train.py", line {line}, in main
    loss.backward()
  File "/venv/lib/python3.11/site-packages/torch/_tensor.py", line 623, in backward
    torch.autograd.backward(
  File "/venv/lib/python3.11/site-packages/torch/autograd/graph.py", line 979, in _engine_run_backward
    return Variable._execution_engine.run_backward(

--- faulthandler ---
Thread 0x00007f (most recent call first):
  File "/venv/lib/python3.11/site-packages/torch/autograd/graph.py", line 979 in _engine_run_backward
"""


STUCK = f"""stepscope: rank 2 saw no step boundary for 30.1 s (capture cap-1)
pid: 12

{WATCHDOG}
Thread 139 (MainThread):
  File "/app/train.py", line 80, in <module>
    main()
  File "/app/train.py", line 41, in main
    x = load_batch()
  File "/app/train.py", line 35, in wait_forever
    time.sleep(3600)
"""


def evidence(stacks: dict[int, str]) -> list[HangEvidence]:
    return [
        HangEvidence(rank=r, hung=True, node=f"node-{r}", last_step=7, seconds_since_last_step=30.0, stacks=s)
        for r, s in stacks.items()
    ]


def test_from_stacks_the_rank_outside_the_collective_is_the_only_culprit() -> None:
    found = find_hangs(evidence({0: waiting_stacks(), 1: waiting_stacks(), 2: STUCK, 3: waiting_stacks()}))
    assert [(s.rank, s.cause) for s in found.slow_ranks] == [(2, Cause.HANG)]
    assert found.slow_ranks[0].confidence >= 0.9
    hangs = {h.rank: h for h in found.hangs}
    assert sorted(hangs) == [0, 1, 2, 3]
    assert hangs[2].culprit and hangs[2].waiting_collective is None
    assert hangs[2].location == "train.py:35 in wait_forever"
    for r in (0, 1, 3):
        assert not hangs[r].culprit and hangs[r].waiting_collective == "backward (DDP gradient all-reduce)"
        assert hangs[r].location == "train.py:52 in main"
    assert found.verdict is not None and found.verdict.startswith("Hang: ranks 0, 1, 3 wait in backward")
    assert "rank 2 never reached it: stuck rank 2 at train.py:35 in wait_forever" in found.verdict
    # stepscope's own thread and faulthandler's repeat are not shown; the main thread is
    for h in found.hangs:
        assert "stepscope-watchdog" not in h.stacks and "_watch_once" not in h.stacks and "faulthandler" not in h.stacks
        assert "(MainThread)" in h.stacks


def test_a_rank_in_another_collective_than_the_others_is_the_odd_one() -> None:
    broadcast = """Thread 1 (MainThread):
  File "/app/train.py", line 60, in main
    dist.broadcast(t, 0)
  File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3145, in broadcast
    work.wait()
"""
    reduce = broadcast.replace("broadcast(t, 0)", "all_reduce(t)").replace("in broadcast", "in all_reduce")
    found = find_hangs(evidence({0: reduce, 1: reduce, 2: broadcast, 3: reduce}))
    assert [s.rank for s in found.slow_ranks] == [2]
    assert found.verdict is not None and found.verdict.startswith("Desync: rank 2 waits in broadcast")


def test_when_every_rank_waits_in_the_same_collective_no_rank_is_blamed() -> None:
    found = find_hangs(evidence({r: waiting_stacks() for r in range(4)}))
    assert found.slow_ranks == []
    assert found.verdict is not None and "no rank stands out" in found.verdict
    assert all(h.waiting_collective for h in found.hangs)


def test_old_faulthandler_only_stacks_still_find_the_collective_and_the_culprit() -> None:
    waiting = (
        'Thread 0x1 (most recent call first):\n  File "/x/torch/distributed/distributed_c10d.py", line 2501 in '
        'all_reduce\n  File "/x/train.py", line 40 in step\n'
    )
    stuck = 'Thread 0x1 (most recent call first):\n  File "/x/data.py", line 9 in load_batch\n'
    pos = position(parse_stacks(waiting))
    assert (pos.collective, pos.location) == ("all_reduce", "train.py:40 in step")
    found = find_hangs(evidence({0: waiting, 1: waiting, 2: stuck, 3: waiting}))
    assert [s.rank for s in found.slow_ranks] == [2]


def test_the_flight_recorder_wins_over_the_stacks_and_names_the_line() -> None:
    stacks = {r: (FIXTURES / "stuck" / str(r) / "stacks.txt").read_text() for r in range(4)}
    found = find_hangs(evidence(stacks), fixture_dumps("stuck"), 4)
    assert [s.rank for s in found.slow_ranks] == [2] and found.slow_ranks[0].confidence >= 0.95
    hangs = {h.rank: h for h in found.hangs}
    assert hangs[2].culprit and hangs[2].location == "train_faults.py:29 in stuck_in_data_loader"
    for r in (0, 1, 3):
        assert (hangs[r].waiting_collective, hangs[r].location) == ("all_reduce", site("backward"))
    assert found.verdict is not None and found.flight_recorder is not None
    seq = found.flight_recorder.wavefronts[0].seq
    where = f"(seq {seq} of default_pg, issued at {site('backward')})"
    assert found.verdict.startswith(f"Hang: ranks 0, 1, 3 wait in all_reduce [289] {where}")
    assert found.verdict.endswith("rank 2 never reached it: it is stuck at train_faults.py:29 in stuck_in_data_loader.")


def test_a_desync_is_named_from_the_dumps_in_the_diagnosis() -> None:
    stacks = {r: (FIXTURES / "collective" / str(r) / "stacks.txt").read_text() for r in range(4)}
    d = diagnose([], hang_evidence=evidence(stacks), flight_recorder=fixture_dumps("collective"))
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(2, Cause.DESYNC)]  # its own cause, with its own advice
    assert d.next_steps[0].startswith("Rank 2 took a code path the other ranks did not")
    assert d.verdict.startswith(
        "Desync (collective mismatch): rank 2 called broadcast [1024] where ranks 0, 1, 3 called all_reduce [4], seq"
    )
    assert d.flight_recorder is not None and d.flight_recorder.culprits == [2]
    assert [h.rank for h in d.hangs if h.culprit] == [2]


def test_a_rank_that_passes_other_sizes_is_named_from_the_dumps_in_the_diagnosis() -> None:
    stacks = {r: (FIXTURES / "sizes" / str(r) / "stacks.txt").read_text() for r in range(4)}
    d = diagnose([], hang_evidence=evidence(stacks), flight_recorder=fixture_dumps("sizes"))
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(2, Cause.DESYNC)]
    assert d.flight_recorder is not None
    [mismatch] = d.flight_recorder.mismatches
    assert (mismatch.kind, mismatch.ranks) == ("sizes", [2])
    expected = "rank 2 called all_reduce [8] where ranks 0, 1, 3 called all_reduce [4], seq"
    assert mismatch.message.startswith(expected) and d.verdict.startswith(f"Desync (sizes mismatch): {expected}")


def test_a_dead_rank_is_named_although_it_left_nothing() -> None:
    d = diagnose([], hang_evidence=[], flight_recorder=fixture_dumps("die"))
    assert [s.rank for s in d.slow_ranks] == [2]
    assert "rank 2 never reached it: it left neither stacks nor a Flight Recorder dump" in d.verdict
    assert site("backward") in d.verdict


def test_a_rank_that_exited_normally_during_a_capture_blames_no_rank_that_kept_stepping() -> None:
    from fr_dumps import dump, entry, parsed

    from stepscope_testing.synthetic import JobShape, synthetic_job

    ranks = synthetic_job(JobShape(world_size=4))
    ranks[3] = ranks[3].model_copy(update={"status": RankStatus.ERROR, "error": "the training process exited"})
    dumps = parsed({3: dump(3, [entry(s) for s in range(1, 20)], reason="exit")})
    d = diagnose(ranks, flight_recorder=dumps)
    assert d.slow_ranks == [] and d.hangs == []
    assert not d.verdict.startswith("Hang")
