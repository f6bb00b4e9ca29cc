"""The injection webhook over real HTTPS on loopback, with real AdmissionReview v1 payloads: every answer is
allowed, patches are base64 JSON Patches that, applied, give a pod Kubernetes accepts (kubernetes-validate)."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import logging
import ssl
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import kopf
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from test_injection import apply_json_patch, make_pod, validate_pod

from stepscope_contract.constants import INJECT_LABEL, INJECTED_ANNOTATION, SIDECAR_CONTAINER_NAME
from stepscope_local.ports import free_port
from stepscope_operator.webhook import admission as webhook
from stepscope_operator.webhook.injection import InjectionConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def write_certificates(folder: Path) -> Path:
    """A CA and a server certificate for 127.0.0.1 (tls.crt/tls.key, as the chart's Secret holds); returns the CA."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("stepscope-test-ca"))
        .issuer_name(_name("stepscope-test-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("stepscope-webhook.stepscope-system.svc"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("stepscope-webhook.stepscope-system.svc"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "tls.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    (folder / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return folder / "ca.crt"


class Client:
    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.session = session
        self.base = base

    async def post(self, body: bytes | dict[str, Any], path: str = webhook.POD_PATH) -> dict[str, Any]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        async with self.session.post(self.base + path, data=data, headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 200
            answer: dict[str, Any] = await resp.json()
        assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
        assert answer["response"]["allowed"] is True  # the webhook never blocks a pod
        return answer["response"]


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    ca = write_certificates(tmp_path / "tls")
    runner = await webhook.serve("127.0.0.1", 0, webhook.ssl_context_from_dir(tmp_path / "tls"), InjectionConfig())
    try:
        trust = ssl.create_default_context(cafile=str(ca))
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trust)) as session:
            yield Client(session, f"https://127.0.0.1:{webhook.bound_port(runner)}")
    finally:
        await runner.cleanup()


def review(pod: dict[str, Any], namespace: str = "team-a", operation: str = "CREATE") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": pod["metadata"].get("name", ""),
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "system:serviceaccount:kube-system:job-controller"},
            "object": pod,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def patched_pod(pod: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    assert response["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(response["patch"]))
    result: dict[str, Any] = apply_json_patch(pod, ops)
    validate_pod(result)
    return result


async def test_labelled_pod_is_injected(client: Client) -> None:
    pod = make_pod({INJECT_LABEL: "true"})
    body = review(pod)
    response = await client.post(body)
    assert response["uid"] == body["request"]["uid"]
    result = patched_pod(pod, response)
    assert [c["name"] for c in result["spec"]["containers"]] == ["trainer"]
    assert [c["name"] for c in result["spec"]["initContainers"]] == ["stepscope-install-hook", SIDECAR_CONTAINER_NAME]
    assert result["metadata"]["annotations"][INJECTED_ANNOTATION] == "true"


async def test_unlabelled_pod_is_skipped(client: Client) -> None:
    response = await client.post(review(make_pod()))
    assert "patch" not in response and "warnings" not in response


async def test_already_injected_pod_is_not_injected_again(client: Client) -> None:
    pod = make_pod({INJECT_LABEL: "true"})
    once = patched_pod(pod, await client.post(review(pod)))
    response = await client.post(review(once))
    assert "patch" not in response
    assert [c["name"] for c in once["spec"]["initContainers"]].count(SIDECAR_CONTAINER_NAME) == 1


async def test_opted_out_pod_in_a_labelled_namespace_is_skipped(client: Client) -> None:
    response = await client.post(review(make_pod({INJECT_LABEL: "false"})), webhook.NAMESPACE_PATH)
    assert "patch" not in response


async def test_unlabelled_pod_of_a_labelled_namespace_is_injected(client: Client) -> None:
    pod = make_pod()
    pod["metadata"] = {"generateName": "ddp-train-", "namespace": "team-a"}  # as the Job controller creates it
    result = patched_pod(pod, await client.post(review(pod), webhook.NAMESPACE_PATH))
    assert result["spec"]["initContainers"][0]["name"] == "stepscope-install-hook"


@pytest.mark.parametrize(
    "body",
    [
        b"not json at all",
        b"[]",
        json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
        json.dumps({"request": {"kind": {"kind": "Pod"}, "object": {"spec": {}}}}).encode(),  # no uid
        json.dumps({"request": {"uid": [[{}]], "kind": {"kind": "Pod"}, "object": {"spec": {}}}}).encode(),
        json.dumps({"request": {"uid": "u", "kind": "Pod", "object": {"spec": {}}}}).encode(),
        b'{"request": {"uid": "u", "kind": {"kind": "Pod"}, "object": ' + b"[" * 5000 + b"]" * 5000 + b"}}",
        b'{"request": {"uid": "u", "kind": {"kind": "Pod"}, "object": {"spec": {"a\xff\xff": 1}}}}',
        b'{"request": {"uid": "u\xff", "kind": {"kind": "Pod"}, "object": {"spec": {}}}}',
    ],
)
async def test_malformed_review_is_allowed_with_a_warning(client: Client, body: bytes) -> None:
    response = await client.post(body)
    assert "patch" not in response
    assert response["warnings"] and "stepscope" in response["warnings"][0]


async def test_review_without_a_pod_spec_is_allowed_with_a_warning(client: Client) -> None:
    body = review(make_pod({INJECT_LABEL: "true"}))
    body["request"]["object"] = {"metadata": {"name": "x"}, "spec": "garbage"}
    response = await client.post(body)
    assert response["uid"] == body["request"]["uid"] and "patch" not in response
    assert response["warnings"]


async def test_pod_with_a_broken_container_list_is_allowed_with_a_warning(client: Client) -> None:
    body = review(make_pod({INJECT_LABEL: "true"}))
    body["request"]["object"]["spec"]["containers"] = [None]
    response = await client.post(body)
    assert "patch" not in response and response["warnings"]


async def test_other_operations_and_kinds_pass_untouched(client: Client) -> None:
    pod = make_pod({INJECT_LABEL: "true"})
    assert "patch" not in await client.post(review(pod, operation="UPDATE"))
    body = review(pod)
    body["request"]["kind"] = {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert "patch" not in await client.post(body)


async def test_plain_http_is_refused_by_the_tls_server(tmp_path: Path) -> None:
    write_certificates(tmp_path / "tls")
    runner = await webhook.serve("127.0.0.1", 0, webhook.ssl_context_from_dir(tmp_path / "tls"), InjectionConfig())
    try:
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ClientError):
                await session.post(f"http://127.0.0.1:{webhook.bound_port(runner)}/mutate", data=b"{}")
    finally:
        await runner.cleanup()


async def test_kopf_startup_handler_serves_from_the_cert_dir_and_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = write_certificates(tmp_path / "tls")
    handlers = {(h.id, h.activity.value) for h in kopf.get_default_registry()._activities.get_all_handlers()}
    assert {("webhook-server", "startup"), ("webhook-server-stop", "cleanup")} <= handlers
    memo = kopf.Memo()
    log = logging.getLogger("test.webhook")
    monkeypatch.delenv("STEPSCOPE_WEBHOOK_PORT", raising=False)
    await webhook.start_webhook(memo=memo, logger=log)
    assert "webhook_runner" not in memo  # no port: no webhook

    port = free_port()
    monkeypatch.setenv("STEPSCOPE_WEBHOOK_PORT", str(port))
    monkeypatch.setenv("STEPSCOPE_WEBHOOK_HOST", "127.0.0.1")
    monkeypatch.setenv("STEPSCOPE_WEBHOOK_CERT_DIR", str(tmp_path / "tls"))
    monkeypatch.setenv("STEPSCOPE_SIDECAR_IMAGE", "registry.example/sidecar:9")
    await webhook.start_webhook(memo=memo, logger=log)
    try:
        pod = make_pod({INJECT_LABEL: "true"})
        trust = ssl.create_default_context(cafile=str(ca))
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trust)) as session:
            response = await Client(session, f"https://127.0.0.1:{port}").post(review(pod))
        result = patched_pod(pod, response)
        assert result["spec"]["initContainers"][1]["image"] == "registry.example/sidecar:9"
    finally:
        await webhook.stop_webhook(memo=memo)
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientError):
            await session.get(f"https://127.0.0.1:{port}/healthz", ssl=False)


async def test_renewed_certificate_is_served_without_a_restart(tmp_path: Path) -> None:
    import asyncio
    import os

    folder = tmp_path / "tls"
    write_certificates(folder)
    loaded = webhook.cert_stamp(folder)
    context = webhook.ssl_context_from_dir(folder)
    runner = await webhook.serve("127.0.0.1", 0, context, InjectionConfig())
    reloader = asyncio.create_task(webhook.reload_certificates(context, folder, interval=0.05, loaded=loaded))
    try:
        new_ca = write_certificates(folder)  # a renewal: another CA, another key
        stamp = folder.stat().st_mtime + 5
        for name in ("tls.crt", "tls.key"):
            os.utime(folder / name, (stamp, stamp))
        trust = ssl.create_default_context(cafile=str(new_ca))
        url = f"https://127.0.0.1:{webhook.bound_port(runner)}/healthz"
        served = False
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trust, force_close=True)) as session:
            for _ in range(100):
                try:
                    async with session.get(url) as resp:
                        served = await resp.text() == "ok"
                        break
                except aiohttp.ClientConnectorCertificateError:
                    await asyncio.sleep(0.05)
        assert served, "the renewed certificate was never served"
    finally:
        reloader.cancel()
        await runner.cleanup()
