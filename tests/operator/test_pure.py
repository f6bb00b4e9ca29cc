"""Unit tests of the operator's pure modules: target resolution, status builders, the analyzer Job builder."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from stepscope_contract.analysis_documents import AnalysisOutcome, SessionDocument, termination_message
from stepscope_contract.session import (
    AnalysisStage,
    ConditionType,
    GateChange,
    Phase,
    ProfileSessionSpec,
    ReportSummary,
    TargetCounts,
    TargetState,
    TargetStatus,
)
from stepscope_contract.status_wire import set_condition
from stepscope_operator.runtime.config import OperatorConfig
from stepscope_operator.session.analyzer_jobs import build_job, job_outcome, outcome_from_pods, shard_count
from stepscope_operator.session.status import (
    bounded,
    capture_phase,
    count_targets,
    failure_summary,
    final_phase,
    progress,
)
from stepscope_operator.session.targets import capture_id, pod_rank, resolve_targets, selector_string

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]


def pod(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    env: list[dict[str, str]] | None = None,
    ready: bool = True,
    ip: str = "10.0.0.1",
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels or {}, "annotations": annotations or {}},
        "spec": {"nodeName": "n1", "containers": [{"name": "trainer", "env": env or []}]},
        "status": {
            "phase": "Running",
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def spec(targets: dict[str, Any]) -> ProfileSessionSpec:
    return ProfileSessionSpec.model_validate({"targets": targets, "storage": {"uri": "s3://bucket/p"}})


def test_rank_precedence() -> None:
    both = pod(
        "a",
        annotations={"stepscope.dev/rank": "7", "batch.kubernetes.io/job-completion-index": "2"},
        env=[{"name": "RANK", "value": "3"}],
    )
    assert pod_rank(both) == 7
    assert (
        pod_rank(
            pod(
                "b", env=[{"name": "RANK", "value": "3"}], annotations={"batch.kubernetes.io/job-completion-index": "2"}
            )
        )
        == 3
    )
    assert pod_rank(pod("c", annotations={"batch.kubernetes.io/job-completion-index": "2"})) == 2
    worker = pod(
        "d", labels={"training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "0"}
    )
    assert pod_rank(worker, pytorchjob_has_master=True) == 1
    assert pod_rank(worker, pytorchjob_has_master=False) == 0
    assert pod_rank(pod("e")) is None


def test_resolution_subset_cap_and_readiness() -> None:
    pods = [pod(f"p{i}", env=[{"name": "RANK", "value": str(i)}]) for i in range(6)]
    pods.append(pod("not-ready", env=[{"name": "RANK", "value": "9"}], ready=False))
    s = spec({"selector": {"matchLabels": {"a": "b"}}, "ranks": "1-4", "maxTargets": 3})
    result = resolve_targets(pods, s.targets, "ns x")
    assert [t.rank for t in result.targets] == [1, 2, 3]
    none = resolve_targets([pods[-1]], s.targets, "ns x, label selector 'a=b'")
    assert not none.targets and "none is Running and Ready" in none.reason
    empty = resolve_targets([], s.targets, "ns x, label selector 'a=b'")
    assert empty.reason == "no pod matches ns x, label selector 'a=b'"


def test_selector_string_and_capture_id() -> None:
    s = spec(
        {
            "selector": {
                "matchLabels": {"app": "t"},
                "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["a", "b"]},
                    {"key": "x", "operator": "DoesNotExist"},
                ],
            }
        }
    )
    assert s.targets.selector is not None
    assert selector_string(s.targets.selector) == "app=t,tier in (a,b),!x"
    assert capture_id("uid-1") == capture_id("uid-1") != capture_id("uid-2")


def test_conditions_keep_transition_time_when_unchanged() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    first = set_condition([], ConditionType.CAPTURED, True, reason="A", message="m", now=t0)
    again = set_condition(first, ConditionType.CAPTURED, True, reason="B", message="n", now=t0 + timedelta(hours=1))
    assert again[0].last_transition_time == first[0].last_transition_time and again[0].reason == "B"
    flipped = set_condition(again, ConditionType.CAPTURED, False, reason="C", message="", now=t0 + timedelta(hours=2))
    assert flipped[0].wire()["lastTransitionTime"] == "2026-01-01T02:00:00Z" and flipped[0].wire()["status"] == "False"


def test_counts_progress_and_phases() -> None:
    targets = [
        TargetStatus(pod=f"p{i}", rank=i, state=s)
        for i, s in enumerate([TargetState.CAPTURED, TargetState.FAILED, TargetState.UPLOADING, TargetState.PENDING])
    ]
    counts = count_targets(targets)
    assert (counts.total, counts.captured, counts.failed, counts.active, counts.pending) == (4, 1, 1, 1, 1)
    assert progress(counts) == "1/4"
    assert capture_phase(targets) is Phase.CAPTURING
    assert capture_phase(targets[:3]) is Phase.UPLOADING
    assert final_phase(targets[:1]) is Phase.SUCCEEDED and final_phase(targets[:2]) is Phase.PARTIALLY_SUCCEEDED
    many = [TargetStatus(pod=f"p{i}", rank=i, state=TargetState.CAPTURED) for i in range(300)]
    many[250] = many[250].model_copy(update={"state": TargetState.FAILED})
    listed, truncated = bounded(many)
    assert truncated and len(listed) == 256 and listed[0].pod == "p250"


def test_analyzer_jobs_validate_and_shard(tmp_path: Path) -> None:
    s = ProfileSessionSpec.model_validate(
        {
            "targets": {"selector": {"matchLabels": {"a": "b"}}},
            "storage": {"uri": "s3://bucket/p", "credentialsSecret": {"name": "creds"}},
            "analysis": {"resources": {"cpu": "2", "memory": "4Gi"}},
        }
    )
    config = OperatorConfig()
    assert shard_count(s, 8, config) == 1 and shard_count(s, 1024, config) == 16
    # ranks summarised by their sidecars cost the Job a read, not a parse: only the others count
    assert shard_count(s, 1024, config, summarised=1024) == 1 and shard_count(s, 1024, config, summarised=1000) == 1
    assert shard_count(s, 1024, config, summarised=512) == 8
    document = SessionDocument(namespace="ns", name="s", uid="u-1", capture_id="c-1", spec=s)
    docs = [
        build_job(document=document, config=config, stage=stage, shards=4)
        for stage in (AnalysisStage.ALL, AnalysisStage.MAP, AnalysisStage.REDUCE)
    ]
    assert [d["metadata"]["name"] for d in docs] == ["s-analyze", "s-analyze-map", "s-analyze-reduce"]
    assert docs[1]["spec"]["completionMode"] == "Indexed" and docs[1]["spec"]["completions"] == 4
    assert "--mode" in docs[2]["spec"]["template"]["spec"]["containers"][0]["args"]
    for doc in docs:
        container = doc["spec"]["template"]["spec"]["containers"][0]
        assert all("value" not in e for e in container["env"] if e["name"].startswith("AWS_"))
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        volumes = doc["spec"]["template"]["spec"]["volumes"]  # the writable /tmp, bounded (report.json fits in it)
        assert volumes == [{"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}}]
        assert doc["metadata"]["ownerReferences"][0]["uid"] == "u-1"
        args = container["args"]  # the accepted session in, the outcome out as the termination message
        assert SessionDocument.from_json(args[args.index("--session-json") + 1]) == document
        assert args[args.index("--outcome-file") + 1] == container["terminationMessagePath"] == "/dev/termination-log"
        assert doc["spec"]["template"]["spec"]["serviceAccountName"] == "stepscope-analyzer"
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    result = subprocess.run(
        [str(REPO / ".venv/bin/kubernetes-validate"), "--strict", "--quiet", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _analyzer_pod(message: str | None, finished: str, owner: str = "job-uid") -> dict[str, object]:
    terminated: dict[str, object] = {"exitCode": 0, "finishedAt": finished}
    if message is not None:
        terminated["message"] = message
    return {
        "metadata": {"ownerReferences": [{"kind": "Job", "name": "s-analyze", "uid": owner}]},
        "status": {"containerStatuses": [{"name": "analyzer", "state": {"terminated": terminated}}]},
    }


def test_the_outcome_is_read_from_the_latest_termination_message() -> None:
    failed = AnalysisOutcome(ok=False, message="analysis failed: storage unreachable")
    written = AnalysisOutcome(ok=True, message="Rank 2 slows the job", summary=ReportSummary(slowest_rank=2))
    pods = [
        _analyzer_pod(termination_message(failed), "2026-01-01T00:00:01Z"),  # the first try
        _analyzer_pod(termination_message(written), "2026-01-01T00:00:09Z"),  # the retry
        _analyzer_pod("OOMKilled: not an outcome", "2026-01-01T00:00:10Z"),
        {"status": {"containerStatuses": [{"name": "analyzer", "state": {"running": {}}}]}},
        _analyzer_pod(termination_message(failed), "2026-01-01T00:00:20Z", owner="another-job"),  # not the Job's
    ]
    assert outcome_from_pods(pods, "job-uid") == written
    assert outcome_from_pods(pods[2:], "job-uid") is None and outcome_from_pods([], "job-uid") is None


def test_a_long_outcome_fits_the_termination_message() -> None:
    change = GateChange(name="aten::mm", kind="op", change="changed", baseline_us_per_step=1.0,
                        candidate_us_per_step=1.4, delta_us_per_step=0.4, count_delta=0.0)  # fmt: skip
    summary = ReportSummary(verdict="v" * 1024, baseline="s3://" + "b" * 2000, top_changes=[change] * 5)
    outcome = AnalysisOutcome(ok=True, message="m" * 4000, summary=summary, report_url="s3://" + "u" * 2000,
                              report_json_url="s3://" + "j" * 2000)  # fmt: skip
    text = termination_message(outcome)
    back = AnalysisOutcome.from_json(text)
    assert len(text.encode()) <= 4096 and back is not None and back.ok
    assert back.report_url is None and back.summary is not None and back.summary.verdict.startswith("vvv")


def test_job_outcome() -> None:
    assert job_outcome(None)[0] == "missing"
    assert job_outcome({"status": {}})[0] == "running"
    assert job_outcome({"status": {"conditions": [{"type": "Complete", "status": "True"}]}})[0] == "succeeded"
    failed = job_outcome(
        {
            "status": {
                "conditions": [
                    {"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "too slow"}
                ]
            }
        }
    )
    assert failed == ("failed", "DeadlineExceeded: too slow")


def test_failure_summary_says_each_reason_once() -> None:
    hung = "no step boundary within stepTimeoutSeconds (30 s)"
    targets = [TargetStatus(pod=f"ddp-{r}", rank=r, state=TargetState.HUNG, message=hung) for r in range(4)]
    targets.append(TargetStatus(pod="ddp-4", rank=4, state=TargetState.FAILED, message="upload failed"))
    targets.append(TargetStatus(pod="ddp-5", rank=5, state=TargetState.CAPTURED))
    assert failure_summary(targets) == (
        f"ddp-0, ddp-1, ddp-2, ddp-3 (ranks 0-3): Hung: {hung}; ddp-4 (rank 4): Failed: upload failed"
    )
    many = [TargetStatus(pod=f"p{r}", rank=r, state=TargetState.HUNG, message=hung) for r in range(9)]
    assert failure_summary(many) == f"p0, p1, p2, p3 and 5 more (ranks 0-8): Hung: {hung}"


@pytest.mark.unit
@pytest.mark.parametrize(("desync", "culprit_state"), [(False, TargetState.HUNG), (True, TargetState.DESYNC)])
def test_a_standstill_names_the_culprit_and_the_ranks_waiting_for_it(desync: bool, culprit_state: TargetState) -> None:
    """Once the report names the rank that holds a hang up, the other hung targets are Waiting (with what they wait
    in and for whom), the culprit Hung (Desync after a desync), and the counts say so: not four hung ranks."""
    from stepscope_operator.session.status import (
        STANDSTILL_CAUSES,
        Standstill,
        count_targets,
        failure_summary,
        standstill_targets,
    )

    targets = [
        TargetStatus(pod=f"pod-{r}", rank=r, state=TargetState.HUNG, message="no step boundary within 30 s")
        for r in range(4)
    ]
    targets.append(TargetStatus(pod="pod-4", rank=4, state=TargetState.CAPTURED))
    assert "(ranks 0-3): Hung" in failure_summary(targets)  # without a report's culprit: as the sidecars said
    found = Standstill(culprits=frozenset({2}), desync=desync, waiting_in="all_reduce at train.py:52 in main")
    told = standstill_targets(targets, found, datetime(2026, 1, 1, tzinfo=UTC))
    assert [t.state for t in told] == [TargetState.WAITING] * 2 + [culprit_state, TargetState.WAITING] + [
        TargetState.CAPTURED
    ]
    assert told[0].message == "waits for rank 2 in all_reduce at train.py:52 in main (no fault of its own)"
    counts = count_targets(told)
    assert (counts.hung, counts.desync, counts.waiting, counts.captured) == (int(not desync), int(desync), 3, 1)
    summary = failure_summary(told)
    assert summary.startswith(f"pod-2 (rank 2): {culprit_state.value}: ")  # the culprit first
    assert "the report's culprit): no step boundary within 30 s" in summary
    assert "pod-0, pod-1, pod-3 (ranks 0-1,3): Waiting: waits for rank 2 in all_reduce" in summary
    assert all(t.state.terminal for t in told) and not told[4].state.standstill
    again = standstill_targets(told, found, datetime(2026, 1, 1, tzinfo=UTC))  # a report handed back twice
    assert [t.message for t in again] == [t.message for t in told]
    assert {"hang", "desync"} == STANDSTILL_CAUSES


def test_the_captured_column_names_the_culprit_of_a_standstill() -> None:
    """'0/4' alone read as four hung ranks: once the report names the one the others wait for, the column says it
    and how many wait for it."""
    from stepscope_operator.session.status import count_targets, progress

    hung = count_targets(TargetStatus(pod=f"p{r}", rank=r, state=TargetState.HUNG) for r in range(4))
    assert progress(hung) == "0/4"
    assert progress(hung, culprit=2) == "0/4, rank 2 hung"
    told = TargetCounts(total=4, hung=1, waiting=3)
    assert progress(told, culprit=2) == "0/4, rank 2 hung, 3 waiting"
    assert progress(TargetCounts(total=4, desync=1, waiting=3), culprit=2, role="desynced") == (
        "0/4, rank 2 desynced, 3 waiting"
    )
    wide = TargetCounts(total=10**6, hung=1, waiting=10**6 - 1)
    assert progress(wide, culprit=10**5) == "0/1000000, rank 100000 hung"  # no room for the waiting count
    many = TargetCounts(total=10**9, hung=10**9)
    assert progress(many, culprit=10**12) == "0/1000000000"  # beyond the column's 32 characters: the counts only
    captured = count_targets([TargetStatus(pod="p", rank=0, state=TargetState.CAPTURED)])
    assert progress(captured, culprit=0) == "1/1"  # nothing hung: nothing to tell
