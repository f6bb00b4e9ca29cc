"""The chart: lint, schema strictness, every rendered object valid for several Kubernetes versions, the CRD kept
identical to crds/, and the operator Deployment configured exactly as docs/interfaces.md says."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from helm_chart import CHART, CI_VALUES, RELEASE_NAMESPACE, REPO, by_kind, one, render, run_helm

from stepscope_contract.storage_defaults import StorageDefaults
from stepscope_contract.tokens import namespace_token
from stepscope_operator.runtime.config import OperatorConfig
from stepscope_operator.webhook.injection import InjectionConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

K8S_VERSIONS = ("1.29.0", "1.32.0", "1.35.0")
# Kinds of other projects' CRDs (cert-manager, Prometheus Operator): no schema in kubernetes-validate.
FOREIGN_KINDS = {
    "cert-manager.io/v1": {"Issuer", "Certificate"},
    "monitoring.coreos.com/v1": {"ServiceMonitor", "PodMonitor"},
}
VALUE_SETS = {"default": (), "ci": (CI_VALUES,)}


def test_lint_default_and_ci_values() -> None:
    for args in ([], ["--values", str(CI_VALUES)]):
        result = run_helm("lint", "--strict", str(CHART), *args)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize(
    "bad", ["bogus=1", "operator.bogus=1", "webhook.certManager.bogus=1", "storage.addressingStyle=odd"]
)
def test_schema_rejects_unknown_or_invalid_values(bad: str) -> None:
    result = run_helm("template", str(CHART), "--set", bad)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr


def _objects_without_additional_properties_false(schema: Any, path: str = "$") -> list[str]:
    bad: list[str] = []
    if isinstance(schema, dict):
        if (
            schema.get("type") == "object"
            and "properties" in schema
            and schema.get("additionalProperties") is not False
        ):
            bad.append(path)
        for key, value in schema.items():
            bad += _objects_without_additional_properties_false(value, f"{path}.{key}")
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            bad += _objects_without_additional_properties_false(value, f"{path}[{i}]")
    return bad


def test_values_schema_is_closed_at_every_level_and_accepts_the_defaults() -> None:
    import jsonschema

    schema = json.loads((CHART / "values.schema.json").read_text())
    assert _objects_without_additional_properties_false(schema) == []
    jsonschema.validate(yaml.safe_load((CHART / "values.yaml").read_text()), schema)
    jsonschema.validate(yaml.safe_load(CI_VALUES.read_text()), {**schema, "required": []})


@pytest.mark.parametrize("values", sorted(VALUE_SETS))
@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_rendered_objects_are_valid_kubernetes(values: str, version: str) -> None:
    docs = render(*VALUE_SETS[values], include_crds=True)
    seen_foreign = set()
    for doc in docs:
        if doc["kind"] in FOREIGN_KINDS.get(doc["apiVersion"], set()):
            seen_foreign.add(doc["kind"])
            training = doc["kind"] == "PodMonitor"  # one per training namespace
            assert training or doc["metadata"]["namespace"] == RELEASE_NAMESPACE
            assert doc["spec"]
            continue
        if doc["kind"].startswith("ValidatingAdmissionPolicy") and version < "1.30":
            continue  # rendered only for clusters >= 1.30 (helm's --kube-version; test_onboarding_rbac.py)
        kubernetes_validate.validate(doc, version, strict=True)
    assert {d["kind"] for d in docs} >= {
        "CustomResourceDefinition",
        "Deployment",
        "ServiceAccount",
        "Service",
        "MutatingWebhookConfiguration",
    }
    assert seen_foreign == ({"Issuer", "Certificate", "ServiceMonitor", "PodMonitor"} if values == "ci" else set())


def test_rendered_objects_validate_through_the_cli(tmp_path: Path) -> None:
    """The acceptance line: `helm template helm/stepscope | kubernetes-validate` is clean."""
    import subprocess

    out = tmp_path / "all.yaml"
    out.write_text(yaml.safe_dump_all(render(include_crds=True)))
    result = subprocess.run(
        [str(REPO / ".venv" / "bin" / "kubernetes-validate"), "--strict", "-k", "1.32.0", str(out)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ERROR" not in result.stdout


def test_chart_crds_are_the_generated_ones() -> None:
    names = ["profilesessions.stepscope.dev.yaml", "profiletriggers.stepscope.dev.yaml"]
    assert sorted(p.name for p in (CHART / "crds").iterdir()) == names
    rendered = {d["metadata"]["name"]: d for d in by_kind(render(include_crds=True), "CustomResourceDefinition")}
    for name in names:
        chart_crd = CHART / "crds" / name
        assert chart_crd.read_bytes() == (REPO / "crds" / name).read_bytes(), (
            "helm/stepscope/crds differs from crds/: run `make crds`"
        )
        assert rendered[name.removesuffix(".yaml")] == yaml.safe_load(chart_crd.read_text())


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


@pytest.mark.parametrize("values", sorted(VALUE_SETS))
def test_operator_deployment_is_hardened_and_probed(values: str) -> None:
    deployment = one(render(*VALUE_SETS[values]), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is True
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["resources"]["limits"]["memory"] and container["resources"]["requests"]["cpu"]
    health = _env(container)["STEPSCOPE_HEALTH_PORT"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe in (container["livenessProbe"], container["readinessProbe"]):
        assert probe["httpGet"]["path"] == "/healthz"
        assert ports[probe["httpGet"]["port"]] == int(health)
    assert container["command"] == ["stepscope", "operator"]
    # never injected into itself
    assert deployment["spec"]["template"]["metadata"]["labels"]["stepscope.dev/inject"] == "false"


def test_operator_env_follows_the_interface_default() -> None:
    docs = render()
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    env = _env(container)
    config = OperatorConfig.from_env(env)
    assert config.watch_namespaces == ()
    assert config.analyzer_image == "stepscope/analyzer:0.1.0"
    assert config.analyzer_service_account == "stepscope-analyzer"
    assert config.analyzer_command == ("stepscope", "analyzer-job")
    assert config.sidecar_token_file == "/var/run/secrets/stepscope/token"
    assert (config.metrics_port, config.health_port) == (8080, 8081)
    injection = InjectionConfig.from_env(env)
    assert injection == InjectionConfig(token_secret="stepscope-sidecar-token")  # no bucket: no storage base
    assert env["STEPSCOPE_WEBHOOK_PORT"] == "9443" and env["STEPSCOPE_WEBHOOK_CERT_DIR"] == "/etc/stepscope/webhook-tls"
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    # the master (from which namespace tokens derive) and the certificate: made or read by the operator at runtime
    assert volumes[mounts["/var/run/secrets/stepscope"]]["emptyDir"]["medium"] == "Memory"
    assert volumes[mounts["/etc/stepscope/webhook-tls"]]["emptyDir"]["medium"] == "Memory"
    assert env["STEPSCOPE_SIDECAR_MASTER_SECRET"] == "stepscope-sidecar-master"
    assert env["STEPSCOPE_OPERATOR_NAMESPACE"] == RELEASE_NAMESPACE
    # every STEPSCOPE_ variable the chart sets is one the operator or the webhook reads
    sources = (
        "".join(
            (REPO / f).read_text()
            for f in (
                "operator/stepscope_operator/runtime/config.py",
                "operator/stepscope_operator/webhook/injection.py",
                "operator/stepscope_operator/webhook/admission.py",
                "contract/stepscope_contract/storage_defaults.py",
                "operator/stepscope_operator/onboarding/namespaces.py",
                "operator/stepscope_operator/handlers/runtime_secrets.py",
            )
        )
        + (REPO / "contract" / "stepscope_contract" / "constants.py").read_text()
    )  # names shared with the sidecar
    for name in env:
        if name.startswith("STEPSCOPE_"):
            assert f'"{name}"' in sources, name


def test_operator_env_follows_the_interface_ci() -> None:
    container = one(render(CI_VALUES), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    config = OperatorConfig.from_env(_env(container))
    assert config.watch_namespaces == ("team-a", "team-b")
    injection = InjectionConfig.from_env(_env(container))
    assert injection.credentials_secret == "stepscope-s3"
    assert injection.storage_base == "s3://traces/stepscope"
    assert injection.storage_endpoint == "https://minio.storage.svc:9000"
    assert container["args"] == ["--verbose"]
    # the operator holds no storage keys: a session's artifacts are deleted by a Job with the session's own Secret
    assert not [e for e in container["env"] if e["name"].startswith("AWS_") or "valueFrom" in e]


def test_interfaces_doc_lists_every_operator_variable_the_chart_sets() -> None:
    doc = (REPO / "docs" / "interfaces.md").read_text()
    documented = set(re.findall(r"`(STEPSCOPE_[A-Z_]+)`", doc))
    container = one(render(CI_VALUES), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    chart = {e["name"] for e in container["env"] if e["name"].startswith("STEPSCOPE_")}
    assert chart - documented == set()


def _webhooks(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    hooks: list[dict[str, Any]] = one(docs, "MutatingWebhookConfiguration")["webhooks"]
    return hooks


@pytest.mark.parametrize("values", sorted(VALUE_SETS))
def test_webhook_never_blocks_pods_and_selects_by_label(values: str) -> None:
    docs = render(*VALUE_SETS[values])
    hooks = {h["clientConfig"]["service"]["path"]: h for h in _webhooks(docs)}
    assert set(hooks) == {"/mutate", "/mutate-namespace"}
    service = one(docs, "Service", "-webhook")
    for hook in hooks.values():
        assert hook["failurePolicy"] == "Ignore" and hook["sideEffects"] == "None"
        assert 1 <= hook["timeoutSeconds"] <= 5
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["rules"] == [
            {
                "operations": ["CREATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["pods"],
                "scope": "Namespaced",
            }
        ]
        assert hook["clientConfig"]["service"]["name"] == service["metadata"]["name"]
        assert {"key": "app.kubernetes.io/part-of", "operator": "NotIn", "values": ["stepscope"]} in hook[
            "objectSelector"
        ]["matchExpressions"]
    pod_hook, ns_hook = hooks["/mutate"], hooks["/mutate-namespace"]
    assert {"key": "stepscope.dev/inject", "operator": "In", "values": ["true"]} in pod_hook["objectSelector"][
        "matchExpressions"
    ]
    assert {"key": "stepscope.dev/inject", "operator": "NotIn", "values": ["false"]} in pod_hook["namespaceSelector"][
        "matchExpressions"
    ]
    assert {"key": "stepscope.dev/inject", "operator": "DoesNotExist"} in ns_hook["objectSelector"]["matchExpressions"]
    assert {"key": "stepscope.dev/inject", "operator": "In", "values": ["true"]} in ns_hook["namespaceSelector"][
        "matchExpressions"
    ]
    watched = {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "team-b"]}
    for hook in hooks.values():
        assert (watched in hook["namespaceSelector"]["matchExpressions"]) is (values == "ci")


def test_default_webhook_tls_is_left_to_the_operator_with_exactly_the_rights_it_needs() -> None:
    docs = render()
    assert not [s for s in by_kind(docs, "Secret") if s["metadata"]["name"].endswith("-webhook-tls")]
    assert all("caBundle" not in hook["clientConfig"] for hook in _webhooks(docs))
    env = _env(one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0])
    assert env["STEPSCOPE_WEBHOOK_SERVICE"] == one(docs, "Service", "-webhook")["metadata"]["name"]
    configuration = one(docs, "MutatingWebhookConfiguration")["metadata"]["name"]
    assert env["STEPSCOPE_WEBHOOK_CONFIGURATION"] == configuration
    role = one(docs, "ClusterRole", "-webhook-ca")
    assert role["rules"] == [{"apiGroups": ["admissionregistration.k8s.io"], "resources":
                              ["mutatingwebhookconfigurations"], "resourceNames": [configuration],
                              "verbs": ["get", "patch"]}]  # fmt: skip
    secrets = one(docs, "Role", "-install-secrets")
    assert secrets["metadata"]["namespace"] == RELEASE_NAMESPACE
    assert secrets["rules"][1]["resourceNames"] == ["stepscope-sidecar-master", "stepscope-webhook-tls"]
    assert secrets["rules"][1]["verbs"] == ["get"] and "resourceNames" not in secrets["rules"][0]


def test_cert_manager_tls_and_ca_injection() -> None:
    docs = render(CI_VALUES)
    assert not [s for s in by_kind(docs, "Secret") if s["metadata"]["name"].endswith("-webhook-tls")]
    certificate = one(docs, "Certificate")
    issuer = one(docs, "Issuer")
    assert certificate["spec"]["issuerRef"]["name"] == issuer["metadata"]["name"]
    assert certificate["spec"]["secretName"] == "stepscope-webhook-tls"
    service = one(docs, "Service", "-webhook")["metadata"]["name"]
    assert f"{service}.{RELEASE_NAMESPACE}.svc" in certificate["spec"]["dnsNames"]
    configuration = one(docs, "MutatingWebhookConfiguration")
    assert configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        f"{RELEASE_NAMESPACE}/{certificate['metadata']['name']}"
    )
    assert all("caBundle" not in h["clientConfig"] for h in configuration["webhooks"])


def test_webhook_disabled_renders_no_webhook() -> None:
    docs = render(sets=("webhook.enabled=false",))
    assert not by_kind(docs, "MutatingWebhookConfiguration")
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert "STEPSCOPE_WEBHOOK_PORT" not in _env(container)


@pytest.mark.parametrize(
    ("values", "namespaces"), [("default", {RELEASE_NAMESPACE}), ("ci", {"team-a", "team-b", "team-c"})]
)
def test_token_secret_and_analyzer_account_in_every_training_namespace(values: str, namespaces: set[str]) -> None:
    docs = render(*VALUE_SETS[values])
    secrets = [s for s in by_kind(docs, "Secret") if s["metadata"]["name"] == "stepscope-sidecar-token"]
    if values == "default":  # the operator makes the master and writes each namespace's token (runtime_secrets.py)
        assert not secrets
        env = _env(one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0])
        assert set(env["STEPSCOPE_ONBOARD_NAMESPACES"].split(",")) == namespaces
    else:
        assert {s["metadata"]["namespace"] for s in secrets} == namespaces
        master = one(docs, "Secret", "-sidecar-master")
        assert master["metadata"]["namespace"] == RELEASE_NAMESPACE
        master_token = base64.b64decode(master["data"]["token"]).decode()
        assert len(master_token) >= 16
        for secret in secrets:  # each namespace holds only its own token, derived from the master
            token = base64.b64decode(secret["data"]["token"]).decode()
            assert token == namespace_token(master_token, secret["metadata"]["namespace"]) != master_token
        assert len({s["data"]["token"] for s in secrets}) == len(secrets)
    accounts = [a for a in by_kind(docs, "ServiceAccount") if a["metadata"]["name"] == "stepscope-analyzer"]
    assert {a["metadata"]["namespace"] for a in accounts} == namespaces


def test_metrics_service_and_service_monitor() -> None:
    docs = render(CI_VALUES)
    service = one(docs, "Service", "-metrics")
    deployment = one(docs, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert all(labels[k] == v for k, v in service["spec"]["selector"].items())
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    monitor = one(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert all(service["metadata"]["labels"][k] == v for k, v in monitor["spec"]["selector"]["matchLabels"].items())
    assert not by_kind(render(), "ServiceMonitor")


def test_notes_name_the_next_steps() -> None:
    result = run_helm(
        "install", "stepscope", str(CHART), "-n", RELEASE_NAMESPACE, "--dry-run=client", "-f", str(CI_VALUES)
    )
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "rollout status deployment/stepscope-operator" in notes
    assert "stepscope.dev/inject" in notes
    assert "uri: s3://traces/stepscope" in notes and "ConfigMap stepscope-system/stepscope-storage" in notes
    assert f"stepscope check -n team-a --install-namespace {RELEASE_NAMESPACE}" in notes
    session = yaml.safe_load(notes.split("<<'YAML'", 1)[1].split("YAML", 1)[0])
    from stepscope_contract.session import ProfileSessionSpec

    ProfileSessionSpec.model_validate(session["spec"])


def test_chart_requires_kubernetes_with_native_sidecars() -> None:
    """The injected sidecar is a native sidecar (restartPolicy Always on an init container): Kubernetes >= 1.29."""
    old = run_helm("template", str(CHART), "--kube-version", "1.28.9")
    assert old.returncode != 0 and "kubeVersion" in old.stderr
    assert run_helm("template", str(CHART), "--kube-version", "1.29.0").returncode == 0


def test_storage_settings_configmap_matches_the_operator_env() -> None:
    docs = render(CI_VALUES)
    settings = one(docs, "ConfigMap", "-storage")
    assert settings["metadata"]["labels"]["app.kubernetes.io/component"] == "storage-settings"
    env = _env(one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0])
    assert {k: env[k] for k in settings["data"]} == settings["data"]
    defaults = StorageDefaults.from_env(settings["data"])
    assert defaults == StorageDefaults(
        base="s3://traces/stepscope",
        endpoint="https://minio.storage.svc:9000",
        region="us-east-1",
        addressing_style="path",
        credentials_secret="stepscope-s3",
    )
    assert StorageDefaults.from_env(one(render(), "ConfigMap", "-storage")["data"]) == StorageDefaults()
