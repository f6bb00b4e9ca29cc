"""A real sidecar process of namespace team-b, attacked over HTTP:
- an Authorization header that is not UTF-8 gets 401 (not a 500 with a traceback), and the sidecar keeps serving;
- the token of another namespace (derived from the same master) gets 401;
- a destination outside this namespace's folder under the configured storage base, or through another endpoint,
  gets 400 and starts nothing; the session's own folder is accepted."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sidecar_harness import Procs, Sidecar, capture_body, start_sidecar

from stepscope_contract.tokens import namespace_token

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

MASTER = "master-secret-of-the-install"
ENDPOINT = "http://127.0.0.1:9"  # nothing is uploaded: no hook reports in
BASE = "s3://team-bucket/stepscope"
OWN = f"{BASE}/team-b/resnet-01234567"


@pytest.fixture(scope="module")
def sidecar_b(procs: Procs, workdir: Path) -> Iterator[Sidecar]:
    token_file = workdir / "token-team-b"
    token_file.write_text(namespace_token(MASTER, "team-b"))
    yield start_sidecar(procs, workdir, token_file, "team-b", bases=BASE, endpoints=ENDPOINT, namespace="team-b")


def _raw_request(url: str, header: bytes) -> tuple[int, bytes]:
    host, port = url.removeprefix("http://").split(":")
    request = b"GET /v1/status HTTP/1.1\r\nHost: x\r\nAuthorization: " + header + b"\r\nConnection: close\r\n\r\n"
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1]), data


@pytest.mark.parametrize("header", [b"Bearer \xff\xfe\x80", b"\xc3\x28 \xa0\xa1", b"Bearer " + "é".encode("latin-1")])
def test_a_header_that_is_not_utf8_is_refused_with_401(sidecar_b: Sidecar, header: bytes) -> None:
    code, raw = _raw_request(sidecar_b.url, header)
    assert code == 401, raw
    assert sidecar_b.call("GET", "/v1/status", token=namespace_token(MASTER, "team-b"))[0] == 200
    assert "Traceback" not in sidecar_b.log.read_text(errors="replace")


def test_another_namespaces_token_is_refused(sidecar_b: Sidecar) -> None:
    for namespace in ("team-a", "default", "team-bb"):
        code, body = sidecar_b.call("GET", "/v1/status", token=namespace_token(MASTER, namespace))
        assert code == 401, (namespace, body)
    code, body = sidecar_b.call("POST", "/v1/captures", capture_body("x", OWN, ENDPOINT), token=MASTER)
    assert code == 401, body  # the master itself is no sidecar's token either


def _body(capture_id: str, uri: str, endpoint: str | None = ENDPOINT, namespace: str = "team-b") -> dict[str, object]:
    body = capture_body(capture_id, uri, endpoint)
    body["session"]["namespace"] = namespace  # type: ignore[index]
    return body


@pytest.mark.parametrize(
    ("uri", "endpoint", "namespace", "why"),
    [
        ("s3://attacker-bucket/stepscope/team-b/resnet-01234567", ENDPOINT, "team-b", "not this session's folder"),
        (f"{BASE}-evil/team-b/resnet-01234567", ENDPOINT, "team-b", "not this session's folder"),
        (f"{BASE}/team-a/resnet-01234567", ENDPOINT, "team-b", "not this session's folder"),
        (f"{BASE}/team-a/resnet-01234567", ENDPOINT, "team-a", "not this sidecar's namespace"),
        (f"{BASE}/team-b/other-01234567", ENDPOINT, "team-b", "not this session's folder"),
        (f"{BASE}/team-b/resnet-01234567/../../team-a", ENDPOINT, "team-b", "must not contain"),
        (OWN, "https://attacker.example.com", "team-b", "not this sidecar's storage endpoint"),
        (OWN, None, "team-b", "no endpoint given"),
        ("file:///tmp/team-b/resnet-01234567", None, "team-b", "not this session's folder"),
    ],
)
def test_a_foreign_destination_is_refused_with_400(
    sidecar_b: Sidecar, uri: str, endpoint: str | None, namespace: str, why: str
) -> None:
    token = namespace_token(MASTER, "team-b")
    code, body = sidecar_b.call("POST", "/v1/captures", _body("foreign", uri, endpoint, namespace), token=token)
    assert code == 400 and body["error"] == "invalid destination" and why in body["detail"], body
    assert sidecar_b.call("GET", "/v1/captures/foreign", token=token)[0] == 404


def test_the_sessions_own_folder_is_accepted(sidecar_b: Sidecar) -> None:
    token = namespace_token(MASTER, "team-b")
    code, body = sidecar_b.call("POST", "/v1/captures", _body("own", OWN, ENDPOINT + "/"), token=token)
    assert code == 202, body
    assert sidecar_b.call("POST", "/v1/captures/own/abort", token=token)[1]["state"] == "aborted"
