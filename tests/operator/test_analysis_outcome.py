"""The operator, the only writer of a session's status, writes what the analyzer Job handed back (its termination
message) when the Job ends: the summary, the report's URL and ReportReady and Regressed, then Finished; a Job that
fails without handing anything back gets ReportReady=False and the Job's own reason as its message; a Job that failed
after an earlier attempt handed back a report gives the report, and the status says the Job failed; each is told
once. Nothing else writes the status:
the analyzer Job here is played by the test, which only sets the Job's and its pod's status, as Kubernetes would."""

from __future__ import annotations

import pytest
from operator_harness import SIDECAR_TOKEN, OperatorProcess, add_pod, finish_analysis, session, times_told, wait_for
from standin_sidecar import SidecarFleet

from stepscope_contract.analysis_documents import AnalysisOutcome, RegressedVerdict
from stepscope_contract.session import ConditionStatus, ReportSummary
from stepscope_local.kube import EmulatorServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def _analyzing(api: EmulatorServer, fleet: SidecarFleet, name: str, app: str) -> None:
    for i, sidecar in enumerate(fleet.sidecars):
        add_pod(api, f"{app}-{i}", sidecar.host, sidecar.port, {"app": app}, env=[{"name": "RANK", "value": str(i)}])
    api.apply(session(name, {"selector": {"matchLabels": {"app": app}}}))
    status = wait_for(api, name, ("Analyzing", "Failed"))["status"]
    assert status["phase"] == "Analyzing", status


def _conditions(obj: dict[str, object]) -> dict[str, dict[str, str]]:
    status = obj["status"]
    assert isinstance(status, dict)
    return {c["type"]: c for c in status["conditions"]}


def test_the_handed_back_outcome_becomes_the_status(api: EmulatorServer, operator: OperatorProcess) -> None:
    with SidecarFleet(SIDECAR_TOKEN, 2, upload_after=0.2, base="127.0.21.") as fleet:
        _analyzing(api, fleet, "gated", "gated")
        gate = RegressedVerdict(status=ConditionStatus.TRUE, reason="Regressed", message="steps are 40% slower")
        summary = ReportSummary(
            verdict="Rank 1 slows the job",
            slowest_rank=1,
            cause="host",
            gate="regressed",
            gate_result="Regressed",
            gate_figure="+21.6% added work",
        )
        outcome = AnalysisOutcome(ok=True, message="Rank 1 slows the job", summary=summary, regressed=gate)
        finish_analysis(api, "gated", outcome)  # no URLs in it: the operator recomputes them from the folder
        final = wait_for(api, "gated", ("Succeeded", "PartiallySucceeded", "Failed"))
    status = final["status"]
    assert status["phase"] == "Succeeded", status
    conditions = _conditions(final)
    assert conditions["ReportReady"]["status"] == "True" and conditions["ReportReady"]["reason"] == "ReportWritten"
    assert conditions["Regressed"]["status"] == "True" and conditions["Regressed"]["message"] == "steps are 40% slower"
    assert conditions["Finished"]["status"] == "True"
    assert status["summary"]["slowestRank"] == 1 and status["summary"]["gate"] == "regressed"
    uid8 = final["metadata"]["uid"].replace("-", "")[:8]
    assert status["reportURL"] == f"s3://bucket/prefix/default/gated-{uid8}/report/report.html"
    assert status["reportJSONURL"] == f"s3://bucket/prefix/default/gated-{uid8}/report/report.json"
    assert status["message"] == "Rank 1 slows the job; gate: Regressed, +21.6% added work."  # one sentence
    # told once: the Finished condition says the outcome in its own words, the summary leaves the verdict out
    assert times_told(status, "Rank 1 slows the job") == 1, status
    assert conditions["Finished"]["message"] == f"analysed; report: {status['reportURL']}", conditions["Finished"]


def test_a_job_that_fails_without_an_outcome_gives_its_reason(api: EmulatorServer, operator: OperatorProcess) -> None:
    with SidecarFleet(SIDECAR_TOKEN, 2, upload_after=0.2, base="127.0.22.") as fleet:
        _analyzing(api, fleet, "killed", "killed")
        failed = {"type": "Failed", "status": "True", "reason": "DeadlineExceeded",
                  "message": "Job was active longer than specified deadline"}  # fmt: skip
        api.patch_status("batch/v1", "jobs", "default", "killed-analyze", {"failed": 1, "conditions": [failed]})
        final = wait_for(api, "killed", ("Succeeded", "PartiallySucceeded", "Failed"))
    assert final["status"]["phase"] == "Failed"
    ready = _conditions(final)["ReportReady"]
    assert ready["status"] == "False" and ready["reason"] == "AnalysisFailed"
    why = "DeadlineExceeded: Job was active longer than specified deadline"
    assert why in final["status"]["message"] and times_told(final["status"], why) == 1, final["status"]
    assert "summary" not in final["status"] and "reportURL" not in final["status"]
    assert _conditions(final)["Finished"]["status"] == "True"


def test_a_failed_job_whose_earlier_attempt_wrote_the_report_is_said_so(
    api: EmulatorServer, operator: OperatorProcess
) -> None:
    with SidecarFleet(SIDECAR_TOKEN, 2, upload_after=0.2, base="127.0.23.") as fleet:
        _analyzing(api, fleet, "retried", "retried")
        failed = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                  "message": "Job has reached the specified backoff limit"}  # fmt: skip
        finish_analysis(api, "retried", job_status={"failed": 1, "conditions": [failed]})
        final = wait_for(api, "retried", ("Succeeded", "PartiallySucceeded", "Failed"))
    status = final["status"]
    assert status["phase"] == "Succeeded", status  # the report is true: it was written and handed back
    note = (
        "analyzer Job retried-analyze failed (BackoffLimitExceeded: Job has reached the specified backoff limit) "
        "after an earlier attempt of it wrote this report"
    )
    complete = _conditions(final)["Complete"]
    assert complete["reason"] == "AnalyzerJobFailed", complete
    assert status["message"] == f"{note}; No slow rank: balanced.", status
    assert times_told(status, note) == times_told(status, "No slow rank: balanced.") == 1, status
    assert _conditions(final)["ReportReady"]["status"] == "True"
