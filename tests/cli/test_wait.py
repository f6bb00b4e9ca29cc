"""`stepscope wait`'s decision from a session object (pure) and its polling loop over a stand-in reader."""

from __future__ import annotations

from typing import Any

import pytest

from stepscope_cli.commands.wait import FAILED_GATE, PASSED, UNUSABLE, judge, wait_for

pytestmark = pytest.mark.unit

T = "2026-01-01T00:00:00Z"


def _cond(type_: str, status: str, reason: str = "R", message: str = "") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": T}


def _session(phase: str, *conds: dict[str, Any], named: bool = True, **summary: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"baseline": {"session": "main"}} if named else {}
    return {
        "spec": spec,
        "status": {"phase": phase, "message": "m", "conditions": list(conds), "summary": {"verdict": "v", **summary}},
    }


FINISHED = _cond("Finished", "True", "Succeeded")


def test_running_session_is_not_judged() -> None:
    assert judge(_session("Analyzing")) is None


def test_passed_regressed_failed_undecided() -> None:
    passed = judge(_session("Succeeded", FINISHED, _cond("Regressed", "False", "WithinGate"), regressionPercent=3.0))
    assert passed is not None and passed[0] == PASSED
    regressed = _session(
        "Succeeded",
        FINISHED,
        _cond("Regressed", "True", "Regressed", "steps are 40% slower"),
        regressionPercent=40.0,
        regressionLowPercent=30.0,
        regressionHighPercent=50.0,
        stepRegressionPercent=44.5,
        baseline="main",
        topChanges=[
            {"name": "added_work", "kind": "user_annotation", "change": "added", "baselineUsPerStep": 0,
             "candidateUsPerStep": 5000, "deltaUsPerStep": 5000, "countDelta": 1}
        ],
    )  # fmt: skip
    code, lines = judge(regressed) or (None, [])
    assert code == FAILED_GATE
    text = "\n".join(lines)
    assert "vs baseline main: +40.0% (90% interval +30.0% to +50.0%), measured steps +44.5%" in text
    assert "added_work" in text
    assert "gate failed: steps are 40% slower" in text
    failed = judge(_session("Failed", _cond("Finished", "True", "NoTargets")))
    assert failed is not None and failed[0] == UNUSABLE
    for conds in ((FINISHED,), (FINISHED, _cond("Regressed", "Unknown", "BaselineNotFound", "no entry"))):
        undecided = judge(_session("Succeeded", *conds))
        assert undecided is not None and undecided[0] == UNUSABLE, conds


def test_slow_ranks_fail_unless_ignored() -> None:
    slow = _session("Succeeded", FINISHED, named=False, slowRanks=[2])
    assert (judge(slow) or (None,))[0] == FAILED_GATE
    assert (judge(slow, ignore_slow_ranks=True) or (None,))[0] == PASSED
    assert (judge(_session("Succeeded", FINISHED, named=False)) or (None,))[0] == PASSED


def test_wait_for_prints_progress_once_per_change_and_stops_when_finished() -> None:
    answers = [
        (500, None),
        (200, _session("Capturing")),
        (200, _session("Capturing")),
        (200, _session("Succeeded", FINISHED, _cond("Regressed", "False"))),
    ]
    printed: list[str] = []
    code = wait_for(lambda: answers.pop(0), 60, False, printed.append, poll=0.0)
    assert code == PASSED and printed.count("Capturing 0/0: m") == 1 and printed[-1] == "passed"
    assert sum("Succeeded" in line for line in printed) == 1, printed  # the phase and its message once
    assert wait_for(lambda: (404, None), 60, False, printed.append) == UNUSABLE
    assert wait_for(lambda: (200, _session("Capturing")), 0, False, printed.append) == UNUSABLE
    assert printed[-1] == "timed out after 0s"


VERDICT = "Rank 2 on node node-1 slows the job by 31% (host: a stall before each step); 4 of 4 ranks analysed"


@pytest.mark.parametrize(
    ("phase", "conds", "named", "summary"),
    [
        ("Succeeded", (FINISHED, _cond("Regressed", "True", "Regressed", "regressed: added work +28.3%")), True, {}),
        ("Succeeded", (FINISHED,), False, {"slowRanks": [2], "slowestRank": 2}),
        ("Failed", (_cond("Finished", "True", "Failed", "no report (NoTargets)"),), False, {}),
    ],
)
def test_each_thing_is_told_once(phase: str, conds: tuple[dict[str, Any], ...], named: bool, summary: Any) -> None:
    """The verdict (the session's message), the gate's reason and the phase are each printed once, also from a
    status whose summary repeats the verdict (as an operator of an earlier release wrote it)."""
    obj = _session(phase, *conds, named=named, **summary)
    obj["status"]["message"] = VERDICT + ("; gate: Regressed, +28.3% added work." if named else "")
    obj["status"]["summary"]["verdict"] = VERDICT
    printed: list[str] = []
    wait_for(lambda: (200, obj), 60, False, printed.append)
    text = "\n".join(printed)
    assert text.count(VERDICT) == 1 and text.count(phase) == 1, printed
    for cond in conds:
        assert not cond["message"] or text.count(cond["message"]) <= 1, printed
