"""The install's secrets made by the real `stepscope operator` process against the API emulator when the chart
leaves them to it: at the first start the sidecar master token Secret and the webhook's TLS Secret are created, the
master written to the token file, the certificate to the webhook's folder (the webhook answers over it, verified
with the CA) and the CA set as every webhook's caBundle; at a restart both Secrets are read, not made again, and
nothing changes. The unit half: a new master is random, a certificate is for the Service and signed by its CA, and
the caBundle patch touches only webhooks that lack it."""

from __future__ import annotations

import base64
import json
import signal
import ssl
import urllib.request
from pathlib import Path

import pytest
from cryptography import x509
from operator_harness import OperatorProcess
from test_injection import make_pod
from test_webhook import review

from stepscope_contract.constants import INJECT_LABEL
from stepscope_local.kube import EmulatorServer
from stepscope_local.ports import free_port
from stepscope_operator.runtime.secrets import ca_bundle_patch, master_secret, service_names, tls_secret

NAMESPACE = "stepscope-system"
MASTER = "stepscope-sidecar-master"
TLS = "stepscope-webhook-tls"
CONFIGURATION = "stepscope-sidecar-injector"


def _configuration() -> dict[str, object]:
    def hook(name: str) -> dict[str, object]:
        service = {"name": "stepscope-webhook", "namespace": NAMESPACE, "path": "/mutate"}
        return {"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "clientConfig": {"service": service}}  # fmt: skip

    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": CONFIGURATION},
        "webhooks": [hook("pod.inject.stepscope.dev"), hook("namespace.inject.stepscope.dev")],
    }


# The emulator serves what a CustomResourceDefinition declares: the built-in MutatingWebhookConfiguration, as such.
WEBHOOK_TYPE = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "mutatingwebhookconfigurations.admissionregistration.k8s.io"},
    "spec": {
        "group": "admissionregistration.k8s.io",
        "scope": "Cluster",
        "names": {"plural": "mutatingwebhookconfigurations", "singular": "mutatingwebhookconfiguration",
                  "kind": "MutatingWebhookConfiguration"},
        "versions": [{"name": "v1", "served": True, "storage": True}],
    },
}  # fmt: skip


def _data(secret: dict[str, object] | None, key: str) -> bytes:
    assert secret is not None
    return base64.b64decode(secret["data"][key])  # type: ignore[index]


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_the_operator_makes_its_secrets_when_absent_and_reuses_them(api: EmulatorServer, tmp_path: Path) -> None:
    api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    api.apply(WEBHOOK_TYPE)
    api.apply(_configuration())
    port = free_port()
    env = {
        "STEPSCOPE_OPERATOR_NAMESPACE": NAMESPACE,
        "STEPSCOPE_SIDECAR_MASTER_SECRET": MASTER,
        "STEPSCOPE_WEBHOOK_TLS_SECRET": TLS,
        "STEPSCOPE_WEBHOOK_SERVICE": "stepscope-webhook",
        "STEPSCOPE_WEBHOOK_CONFIGURATION": CONFIGURATION,
        "STEPSCOPE_WEBHOOK_PORT": str(port),
        "STEPSCOPE_WEBHOOK_HOST": "127.0.0.1",
        "STEPSCOPE_WEBHOOK_CERT_DIR": str(tmp_path / "tls"),
    }
    seen = []
    for start in range(2):
        proc = OperatorProcess(api, tmp_path, extra_env=env, verbose=False)
        proc.start()
        try:
            master = api.get("v1", "secrets", NAMESPACE, MASTER)
            tls = api.get("v1", "secrets", NAMESPACE, TLS)
            assert master is not None and tls is not None and tls["type"] == "kubernetes.io/tls"
            assert (tmp_path / "token").read_bytes() == _data(master, "token") and len(_data(master, "token")) == 48
            assert (tmp_path / "tls" / "tls.crt").read_bytes() == _data(tls, "tls.crt")
            configuration = api.get("admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", None,
                                    CONFIGURATION)  # fmt: skip
            assert configuration is not None
            bundles = {w["clientConfig"].get("caBundle") for w in configuration["webhooks"]}
            assert bundles == {base64.b64encode(_data(tls, "ca.crt")).decode()}
            context = ssl.create_default_context(cadata=_data(tls, "ca.crt").decode())
            context.check_hostname = False  # the certificate names the Service; the chain is what is checked here
            body = json.dumps(review(make_pod({INJECT_LABEL: "true"}))).encode()
            request = urllib.request.Request(f"https://127.0.0.1:{port}/mutate", data=body, method="POST",
                                             headers={"Content-Type": "application/json"})  # fmt: skip
            with urllib.request.urlopen(request, timeout=60, context=context) as resp:
                assert json.loads(resp.read())["response"]["patchType"] == "JSONPatch"
            seen.append((master["data"], tls["data"], configuration["metadata"].get("resourceVersion")))
            assert ("created" if start == 0 else "read") + f" Secret {NAMESPACE}/{MASTER}" in proc.log()
        finally:
            proc.kill(signal.SIGTERM)
    assert seen[0] == seen[1], "the second start made or changed something"


@pytest.mark.unit
def test_a_new_master_is_random_and_a_certificate_is_for_the_service() -> None:
    tokens = {_data(master_secret(NAMESPACE, MASTER), "token") for _ in range(3)}
    assert len(tokens) == 3 and all(len(t) == 48 for t in tokens)
    secret = tls_secret(NAMESPACE, TLS, "stepscope-webhook")
    cert = x509.load_pem_x509_certificate(_data(secret, "tls.crt"))
    ca = x509.load_pem_x509_certificate(_data(secret, "ca.crt"))
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert names == service_names("stepscope-webhook", NAMESPACE)
    configuration = _configuration()
    ops = ca_bundle_patch(configuration, "Q0E=")
    assert [op["path"] for op in ops if op["op"] == "add"] == [f"/webhooks/{i}/clientConfig/caBundle" for i in (0, 1)]
    configuration["webhooks"][0]["clientConfig"]["caBundle"] = "Q0E="  # type: ignore[index]
    paths = [op["path"] for op in ca_bundle_patch(configuration, "Q0E=")]
    assert paths == ["/webhooks/1/name", "/webhooks/1/clientConfig/caBundle"]
