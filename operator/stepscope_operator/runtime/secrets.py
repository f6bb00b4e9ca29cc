"""The install's secrets the operator makes itself, so that a render of the chart holds none (two `helm template`
runs with the same values give the same manifests, and a GitOps sync never rotates a token or a CA):

- the sidecars' master token: the Secret `STEPSCOPE_SIDECAR_MASTER_SECRET` in the operator's namespace, created
  with a random token when absent and reused when present, written to `STEPSCOPE_SIDECAR_TOKEN_FILE` for the
  rest of the operator (each training namespace's token is derived from it and written by onboarding);
- the webhook's certificate: the `kubernetes.io/tls` Secret `STEPSCOPE_WEBHOOK_TLS_SECRET` (a CA and a server
  certificate for the webhook Service, `ca.crt` beside them), created when absent and reused when present, written
  to `STEPSCOPE_WEBHOOK_CERT_DIR`; the MutatingWebhookConfiguration `STEPSCOPE_WEBHOOK_CONFIGURATION` gets its CA as
  every webhook's `caBundle` (patched only where it differs).

The pure parts are here; `ensure_*` do the requests. The chart grants exactly these: create Secrets in the release
namespace, get only these names, get and patch only that MutatingWebhookConfiguration.
"""

from __future__ import annotations

import base64
import datetime
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from stepscope_operator.runtime.kube import Kube

MASTER_CHARS = 48
TLS_DAYS = 3650
LABELS = {"app.kubernetes.io/part-of": "stepscope", "app.kubernetes.io/managed-by": "stepscope-operator"}
COMPONENT = "app.kubernetes.io/component"
WEBHOOK_CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def master_secret(namespace: str, name: str) -> dict[str, Any]:
    """A new master token Secret (random, MASTER_CHARS characters)."""
    token = secrets.token_urlsafe(MASTER_CHARS)[:MASTER_CHARS]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": name, "namespace": namespace, "labels": {**LABELS, COMPONENT: "operator"}},
        "data": {"token": _b64(token.encode())},
    }


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def service_names(service: str, namespace: str) -> list[str]:
    return [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]


def tls_secret(namespace: str, name: str, service: str, days: int = TLS_DAYS) -> dict[str, Any]:
    """A new webhook TLS Secret: a CA (ca.crt) and a certificate for the Service signed by it (tls.crt, tls.key)."""
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(f"{service}-ca")
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    dns = service_names(service, namespace)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder().subject_name(_name(dns[0])).issuer_name(ca_name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace, "labels": {**LABELS, COMPONENT: "webhook"}},
        "data": {"tls.crt": _b64(_pem(cert)), "tls.key": _b64(key_pem), "ca.crt": _b64(_pem(ca))},
    }


def secret_value(secret: Mapping[str, Any], key: str) -> bytes:
    """A key of a Secret's data, decoded; ValueError when it has none."""
    value = (secret.get("data") or {}).get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f"Secret {(secret.get('metadata') or {}).get('name')} has no {key}")
    return base64.b64decode(value)


def ca_bundle_patch(configuration: Mapping[str, Any], ca_b64: str) -> list[dict[str, Any]]:
    """The JSON Patch giving every webhook of a MutatingWebhookConfiguration the caBundle `ca_b64` (empty when each
    has it already). Each operation is preceded by a test of the webhook's name, so a configuration changed in
    between is not patched at the wrong place."""
    ops: list[dict[str, Any]] = []
    for i, webhook in enumerate(configuration.get("webhooks") or []):
        if (webhook.get("clientConfig") or {}).get("caBundle") == ca_b64:
            continue
        ops.append({"op": "test", "path": f"/webhooks/{i}/name", "value": webhook.get("name")})
        ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": ca_b64})
    return ops


def _write(folder: Path, files: Mapping[str, bytes]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        partial = folder / f".{name}.partial"
        partial.write_bytes(data)
        partial.chmod(0o600)
        partial.replace(folder / name)


async def ensure_master(kube: Kube, namespace: str, name: str, token_file: Path) -> bool:
    """The master token Secret, created when absent, its token written to `token_file`; whether it was created."""
    collection = f"/api/v1/namespaces/{namespace}/secrets"
    secret, created = await kube.create_or_get(collection, master_secret(namespace, name))
    _write(token_file.parent, {token_file.name: secret_value(secret, "token")})
    return created


async def ensure_webhook_tls(
    kube: Kube, namespace: str, name: str, *, service: str, cert_dir: Path, configuration: str, days: int = TLS_DAYS
) -> tuple[bool, bool]:
    """The webhook's TLS Secret, created when absent, written to `cert_dir`, its CA set as the configuration's
    caBundle; (Secret created, configuration patched)."""
    wanted = tls_secret(namespace, name, service, days)
    secret, created = await kube.create_or_get(f"/api/v1/namespaces/{namespace}/secrets", wanted)
    _write(cert_dir, {"tls.crt": secret_value(secret, "tls.crt"), "tls.key": secret_value(secret, "tls.key")})
    ca_b64 = _b64(secret_value(secret, "ca.crt"))
    path = f"{WEBHOOK_CONFIGURATIONS}/{configuration}"
    ops = ca_bundle_patch(await kube.get_path(path), ca_b64)
    if ops:
        await kube.patch_json(path, ops)
    return created, bool(ops)
