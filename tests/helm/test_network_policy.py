"""The chart's NetworkPolicy on the operator's pod: the webhook port admitted only from the API server's addresses
(webhook.networkPolicy.apiServerCIDRs; `helm template` cannot look the endpoints up), the metrics and health ports
open; with no address known the webhook's rule is left out (an ingress rule without `from` would admit every source)
and NOTES.txt warns; the policy selects exactly the operator's pods; it can be switched off; bad CIDRs are refused by
the schema."""

from __future__ import annotations

from typing import Any

import pytest
from helm_chart import CHART, CI_VALUES, RELEASE_NAMESPACE, by_kind, one, render, run_helm

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def _policy(*sets: str) -> dict[str, Any]:
    return one(render(CI_VALUES, sets=sets), "NetworkPolicy", "-operator")


def _rule_for(policy: dict[str, Any], port: str) -> list[dict[str, Any]]:
    return [r for r in policy["spec"]["ingress"] if any(p["port"] == port for p in r["ports"])]


def test_the_webhook_port_is_admitted_only_from_the_api_server() -> None:
    policy = _policy("webhook.networkPolicy.apiServerCIDRs={10.96.0.1/32,fd00::1/128}")
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (webhook,) = _rule_for(policy, "webhook")
    assert webhook["ports"] == [{"port": "webhook", "protocol": "TCP"}]
    assert webhook["from"] == [{"ipBlock": {"cidr": "10.96.0.1/32"}}, {"ipBlock": {"cidr": "fd00::1/128"}}]
    (probes,) = _rule_for(policy, "metrics")
    assert {p["port"] for p in probes["ports"]} == {"metrics", "health"} and "from" not in probes


def test_the_policy_selects_the_operator_pods_and_their_named_ports() -> None:
    docs = render(CI_VALUES, sets=("webhook.networkPolicy.apiServerCIDRs={10.96.0.1/32}",))
    policy = one(docs, "NetworkPolicy", "-operator")
    pod = one(docs, "Deployment")["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert policy["metadata"]["namespace"] == RELEASE_NAMESPACE
    assert all(labels.get(k) == v for k, v in policy["spec"]["podSelector"]["matchLabels"].items())
    ports = {p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
    assert {p["port"] for r in policy["spec"]["ingress"] for p in r["ports"]} <= ports


def test_no_known_address_admits_the_webhook_port_from_nowhere_and_warns() -> None:
    policy = _policy()
    assert _rule_for(policy, "webhook") == []
    assert all("from" not in r for r in policy["spec"]["ingress"])  # the open rule is only metrics and health
    result = run_helm("install", "stepscope", str(CHART), "-n", RELEASE_NAMESPACE, "--dry-run=client")
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "admits the webhook port from no address" in notes and "apiServerCIDRs" in notes


def test_the_policy_can_be_switched_off() -> None:
    assert not by_kind(render(CI_VALUES, sets=("webhook.networkPolicy.enabled=false",)), "NetworkPolicy")
    assert not by_kind(render(CI_VALUES, sets=("webhook.enabled=false",)), "NetworkPolicy")


@pytest.mark.parametrize("cidr", ["10.0.0.1", "any", "10.0.0.0/8;rm"])
def test_the_schema_refuses_what_is_not_a_cidr(cidr: str) -> None:
    result = run_helm("template", str(CHART), "--set", f"webhook.networkPolicy.apiServerCIDRs={{{cidr}}}")
    assert result.returncode != 0 and "apiServerCIDRs" in result.stderr
