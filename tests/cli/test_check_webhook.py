"""The webhook check's verdicts on an API server with admission webhooks, from the server's answers: injected (ok),
not injected (FAIL, saying why), no webhook configuration (FAIL), and the honest skip where none can run."""

from __future__ import annotations

from typing import Any

import pytest

from stepscope_cli.commands.check import Context, check_webhook
from stepscope_cli.commands.check_report import Outcome

pytestmark = pytest.mark.unit


class Answers:
    """What an API server answers to the webhook check's three requests (the dry-run pod as the webhook left it)."""

    def __init__(self, groups: list[str], configs: int, injected: bool) -> None:
        self.groups, self.configs, self.injected = groups, configs, injected
        self.calls: list[tuple[str, str, dict[str, str] | None]] = []

    def call(self, method: str, path: str, body: Any = None, query: dict[str, str] | None = None) -> tuple[int, Any]:
        self.calls.append((method, path, query))
        if path == "/apis":
            return 200, {"groups": [{"name": g} for g in self.groups]}
        if path.endswith("mutatingwebhookconfigurations"):
            return 200, {"items": [{"metadata": {"name": f"w{i}"}} for i in range(self.configs)]}
        pod = dict(body)
        if self.injected:
            pod["spec"] = {**body["spec"], "initContainers": [{"name": "stepscope-sidecar", "restartPolicy": "Always"}]}
        return 201, pod


def _run(answers: Answers) -> tuple[Outcome, str]:
    ctx = Context(answers, "ml-team", "stepscope", 5.0, None)  # type: ignore[arg-type]
    result = check_webhook(ctx)
    return result.outcome, result.detail


def test_injected_dry_run_pod_passes_and_nothing_is_created() -> None:
    answers = Answers(["admissionregistration.k8s.io"], 1, injected=True)
    outcome, detail = _run(answers)
    assert outcome is Outcome.OK and "stepscope-sidecar" in detail
    post = [c for c in answers.calls if c[0] == "POST"]
    assert post == [("POST", "/api/v1/namespaces/ml-team/pods", {"dryRun": "All"})]


def test_a_pod_that_comes_back_untouched_fails() -> None:
    outcome, detail = _run(Answers(["admissionregistration.k8s.io"], 1, injected=False))
    assert outcome is Outcome.FAIL and "did not mutate it" in detail


def test_no_webhook_configuration_fails() -> None:
    outcome, detail = _run(Answers(["admissionregistration.k8s.io"], 0, injected=False))
    assert outcome is Outcome.FAIL and "no stepscope MutatingWebhookConfiguration" in detail


def test_a_server_without_admission_webhooks_is_skipped_with_the_reason() -> None:
    outcome, detail = _run(Answers(["stepscope.dev"], 0, injected=False))
    assert outcome is Outcome.SKIP and "runs no admission webhooks" in detail
