"""kubectl's imperative commands send protobuf bodies; the emulator decodes them (kube/protobuf.py):

- `kubectl create namespace|secret generic|configmap|serviceaccount` with the real /usr/bin/kubectl store what they
  would on a cluster (names, namespace, data as base64, binaryData, stringData folded, the Secret's default type,
  annotations from --save-config);
- the envelope and messages decoded from hand-built bytes: unknown fields skipped, Go's empty scalars left out;
- a protobuf body of a kind outside the table is a 415 naming the kinds it takes, a body without the magic a 400.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from stepscope_local.kube import EmulatorServer
from stepscope_local.kube.errors import ApiError
from stepscope_local.kube.protobuf import MAGIC, decode_object

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


def _kubectl(api: EmulatorServer, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [KUBECTL, "--kubeconfig", str(api.kubeconfig_path), "--cache-dir", str(cache), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=150, check=False)


@pytest.mark.integration
@pytest.mark.timeout(300)
@pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed")
def test_kubectl_create_namespace_secret_configmap_serviceaccount(api: EmulatorServer, tmp_path: Path) -> None:
    def ok(*args: str) -> None:
        got = _kubectl(api, tmp_path, *args)
        assert got.returncode == 0, got.stderr

    ok("create", "namespace", "team-a")
    ok(
        "create", "secret", "generic", "team-s3", "-n", "team-a", "--save-config",
        "--from-literal=AWS_ACCESS_KEY_ID=key", "--from-literal=AWS_SECRET_ACCESS_KEY=s3cr3t",
    )  # fmt: skip
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)))
    ok("create", "configmap", "settings", "-n", "team-a", "--from-literal=a=b", f"--from-file=blob={blob}")
    ok("create", "serviceaccount", "trainer", "-n", "team-a")
    ok("create", "secret", "docker-registry", "pull", "-n", "team-a", "--docker-server=r", "--docker-username=u",
       "--docker-password=p")  # fmt: skip

    namespace = api.get("v1", "namespaces", None, "team-a")
    assert namespace is not None and namespace["metadata"]["name"] == "team-a"
    secret = api.get("v1", "secrets", "team-a", "team-s3")
    assert secret is not None and secret["type"] == "Opaque"
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == {
        "AWS_ACCESS_KEY_ID": "key",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t",
    }
    applied = json.loads(secret["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert applied["metadata"] == {"name": "team-s3", "namespace": "team-a", "creationTimestamp": None}
    assert "generateName" not in secret["metadata"]  # Go's empty strings are left out
    settings = api.get("v1", "configmaps", "team-a", "settings")
    assert settings is not None and settings["data"] == {"a": "b"}
    assert base64.b64decode(settings["binaryData"]["blob"]) == bytes(range(256))
    assert api.get("v1", "serviceaccounts", "team-a", "trainer") is not None
    pull = api.get("v1", "secrets", "team-a", "pull")
    assert pull is not None and pull["type"] == "kubernetes.io/dockerconfigjson"
    got = _kubectl(
        api, tmp_path, "get", "secret", "team-s3", "-n", "team-a", "-o", "jsonpath={.data.AWS_ACCESS_KEY_ID}"
    )
    assert base64.b64decode(got.stdout).decode() == "key", got.stderr


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes | int) -> bytes:
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _field(1, api_version.encode()) + _field(2, kind.encode())
    return MAGIC + _field(1, type_meta) + _field(2, raw) + _field(3, b"") + _field(4, b"")


def test_envelope_and_messages_decode_from_bytes() -> None:
    labels = _field(11, _field(1, b"team") + _field(2, b"a"))
    metadata = _field(1, b"creds") + _field(2, b"") + _field(3, b"team-a") + labels + _field(7, 0)
    metadata += _field(99, b"a field from a newer Kubernetes")  # skipped
    metadata += _field(8, _field(1, 1_700_000_000))
    string_data = _field(4, _field(1, b"k") + _field(2, b"v"))
    raw = _field(1, metadata) + _field(2, _field(1, b"bin") + _field(2, b"\x00\xff")) + _field(3, b"") + string_data
    raw += _field(5, 1)
    assert decode_object(_envelope("v1", "Secret", raw)) == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "creds",
            "namespace": "team-a",
            "labels": {"team": "a"},
            "creationTimestamp": "2023-11-14T22:13:20Z",
        },
        "data": {"bin": "AP8="},
        "stringData": {"k": "v"},
        "immutable": True,
    }
    account = _field(1, _field(1, b"sa")) + _field(3, _field(1, b"pull")) + _field(4, 0)
    assert decode_object(_envelope("v1", "ServiceAccount", account)) == {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "sa"},
        "imagePullSecrets": [{"name": "pull"}],
    }


def test_other_kinds_and_foreign_bodies_are_refused() -> None:
    with pytest.raises(ApiError) as refused:
        decode_object(_envelope("apps/v1", "Deployment", b""))
    assert refused.value.code == 415 and "ConfigMap, Namespace, Secret, ServiceAccount" in refused.value.message
    with pytest.raises(ApiError) as foreign:
        decode_object(b"\x0a\x03abc")
    assert foreign.value.code == 400
    with pytest.raises(ApiError) as truncated:
        decode_object(MAGIC + b"\x0a\x40abc")
    assert truncated.value.code == 400
