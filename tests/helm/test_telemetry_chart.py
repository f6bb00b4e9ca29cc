"""The chart's step-telemetry parts: the ProfileTrigger CRD, the operator's trigger tick, the optional PodMonitor per
training namespace (the sidecars' /metrics, scraped with that namespace's token), and the optional Grafana dashboard,
whose every query names metrics the sidecar exports with labels it has."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helm_chart import CHART, CI_VALUES, by_kind, one, render

from stepscope_operator.runtime.config import OperatorConfig
from stepscope_sidecar.step_metrics import LABELS, StepCollector

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_nothing_for_prometheus_or_grafana_by_default() -> None:
    docs = render()
    assert not by_kind(docs, "PodMonitor")
    assert not [d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"].endswith("-dashboard")]
    env = {e["name"]: e["value"] for e in one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert OperatorConfig.from_env(env).trigger_tick_seconds == 5.0


def test_a_podmonitor_per_training_namespace_with_its_token() -> None:
    monitors = {d["metadata"]["namespace"]: d for d in by_kind(render(CI_VALUES), "PodMonitor")}
    assert set(monitors) == {"team-a", "team-b", "team-c"}
    for monitor in monitors.values():
        (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
        assert endpoint["port"] == "stepscope" and endpoint["path"] == "/metrics"  # the injected sidecar's port
        assert endpoint["authorization"] == {
            "type": "Bearer",
            "credentials": {"name": "stepscope-sidecar-token", "key": "token"},
        }
        assert monitor["metadata"]["labels"]["release"] == "prometheus"


def test_the_dashboard_configmap_holds_the_charts_dashboard() -> None:
    docs = render(CI_VALUES)
    config = one(docs, "ConfigMap", "-dashboard")
    assert config["metadata"]["namespace"] == "monitoring"
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads((CHART / "dashboards" / "stepscope-steps.json").read_text())
    assert json.loads(config["data"]["stepscope-steps.json"]) == shipped


def test_every_dashboard_query_uses_what_the_sidecar_exports() -> None:
    dashboard = json.loads((CHART / "dashboards" / "stepscope-steps.json").read_text())
    exported = set()
    for family in StepCollector(Path("/nonexistent")).describe():
        suffixes = ("_bucket", "_sum", "_count") if family.type == "histogram" else ("",)
        exported |= {family.name + s for s in suffixes}
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queries += [v["query"]["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    assert len(dashboard["panels"]) >= 6
    for query in queries:
        names = set(re.findall(r"\bstepscope_[a-z_]+", query))
        assert names and names <= exported, (query, names - exported)
        for label in re.findall(r"\b([a-z_]+)=~", query) + re.findall(r"by \(([a-z_, ]+)\)", query):
            for name in label.split(","):
                assert name.strip() in (*LABELS, "le"), (query, name)
