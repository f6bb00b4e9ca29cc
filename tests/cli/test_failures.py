"""A command's failure is one line naming the cause and the fix, exit status 2, no traceback unless --debug:

- `stepscope check` and `stepscope wait` against an API server nobody listens on: "cannot reach the Kubernetes API
  server at URL (connection refused)" and what to check; `--debug` (or STEPSCOPE_DEBUG=1) shows the traceback;
- against an API server that answers 401 or 403: credentials rejected, permission to grant;
- without a usable kubeconfig: which one was tried and how to set it;
- explain() on the errors of the clients (urllib3, kubernetes, botocore), of files, and on anything else (its type
  and message, and --debug).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import botocore.exceptions
import pytest
import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

from stepscope_cli.failures import explain

SCRIPT = str(Path(sys.executable).parent / "stepscope")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return path


def _run(kubeconfig: Path | None, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "STEPSCOPE_DEBUG")}
    if kubeconfig is not None:
        environ["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run(
        [SCRIPT, *args], capture_output=True, text=True, timeout=120, check=False, env={**environ, **env}
    )


def _one_line(got: subprocess.CompletedProcess[str], command: str) -> str:
    assert got.returncode == 2, got.stdout + got.stderr
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"stepscope {command}: "), got.stderr
    assert "Traceback" not in got.stderr
    return lines[0]


@pytest.mark.integration
@pytest.mark.parametrize("command", [["check"], ["wait", "demo"]])
def test_an_unreachable_api_server_is_one_line(tmp_path: Path, command: list[str]) -> None:
    port = _closed_port()
    kubeconfig = _kubeconfig(tmp_path, f"http://127.0.0.1:{port}")
    line = _one_line(_run(kubeconfig, *command), command[0])
    assert f"cannot reach the Kubernetes API server at http://127.0.0.1:{port} (connection refused)" in line
    assert f"check KUBECONFIG ({kubeconfig})" in line and "stepscope local-cluster --background" in line
    debug = _run(kubeconfig, *command, "--debug")
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "MaxRetryError" in debug.stderr
    assert "Traceback" in _run(kubeconfig, *command, STEPSCOPE_DEBUG="1").stderr


class _Refusing(BaseHTTPRequestHandler):
    status = 401

    def do_GET(self) -> None:
        body = json.dumps(
            {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": self.status, "message": "go away"}
        ).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def refusing() -> Iterator[tuple[str, type[_Refusing]]]:
    handler = type("Handler", (_Refusing,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.integration
@pytest.mark.parametrize(
    ("status", "cause", "fix"),
    [
        (401, "rejected the credentials (401 go away)", "renew the credentials of KUBECONFIG"),
        (403, "forbids it (403): go away", "kubectl auth can-i"),
    ],
)
def test_refusals_of_the_api_server_are_one_line(
    tmp_path: Path, refusing: tuple[str, type[_Refusing]], status: int, cause: str, fix: str
) -> None:
    url, handler = refusing
    handler.status = status
    line = _one_line(_run(_kubeconfig(tmp_path, url), "wait", "demo", "--timeout", "5"), "wait")
    assert cause in line and fix in line, line
    if status == 401:  # check's own table would blame every check for what the credentials do
        line = _one_line(_run(_kubeconfig(tmp_path, url), "check", "--timeout", "5"), "check")
        assert cause in line and fix in line, line


@pytest.mark.integration
def test_no_kubeconfig_is_one_line(tmp_path: Path) -> None:
    line = _one_line(_run(tmp_path / "missing.yaml", "check"), "check")
    assert f"no usable kubeconfig (KUBECONFIG {tmp_path / 'missing.yaml'}" in line and "--kubeconfig" in line


def _max_retry(path: str) -> urllib3.exceptions.MaxRetryError:
    pool = urllib3.HTTPConnectionPool("10.0.0.1", 6443)
    refused = urllib3.exceptions.NewConnectionError(pool, "Failed to establish a new connection: [Errno 111] ...")
    return urllib3.exceptions.MaxRetryError(pool, path, refused)


def _wrapped(exc: BaseException) -> RuntimeError:
    try:
        raise exc
    except BaseException as inner:
        try:
            raise RuntimeError("while reading the session") from inner
        except RuntimeError as outer:
            return outer


@pytest.mark.unit
def test_explain_names_cause_and_fix() -> None:
    kube = explain(_wrapped(_max_retry("/apis/stepscope.dev/v1alpha1/profilesessions")))
    assert kube.cause == "cannot reach the Kubernetes API server at http://10.0.0.1:6443 (connection refused)"
    other = explain(_max_retry("/metrics"))
    assert other.cause == "cannot reach http://10.0.0.1:6443 (connection refused)"
    missing = ApiException(status=404, reason="Not Found")
    missing.body = json.dumps({"message": 'profilesessions.stepscope.dev "x" not found'})
    assert explain(missing).cause == 'not found (404): profilesessions.stepscope.dev "x" not found'
    endpoint = botocore.exceptions.EndpointConnectionError(endpoint_url="http://minio:9000/b")
    assert explain(_wrapped(endpoint)).cause.startswith("cannot reach the storage endpoint http://minio:9000/b")
    assert "AWS_ACCESS_KEY_ID" in explain(botocore.exceptions.NoCredentialsError()).fix
    no_bucket = botocore.exceptions.ClientError(
        {"Error": {"Code": "NoSuchBucket", "Message": "nope", "BucketName": "traces"}}, "ListObjectsV2"
    )
    assert explain(no_bucket).cause == "bucket traces does not exist in storage (NoSuchBucket)"
    denied = botocore.exceptions.ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "GetObject")
    assert explain(denied).cause == "the storage refused the credentials (AccessDenied: no)"
    assert explain(FileNotFoundError(2, "No such file", "/x/y")).cause == "no such file or folder: /x/y"
    odd = explain(ValueError("three\nlines\nhere"))
    assert odd.cause == "unexpected ValueError: three" and "--debug" in odd.fix


@pytest.mark.integration
@pytest.mark.parametrize("command", [["analyze", "s3://bucket/ns/sess", "-o"], ["fetch", "s3://bucket/ns/sess"]])
def test_an_unreachable_storage_endpoint_names_the_fix(tmp_path: Path, command: list[str]) -> None:
    """`stepscope analyze` and `stepscope fetch` of a storage URI whose endpoint nobody listens on: the last line
    names the cause and what to check; exit 2, no traceback."""
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    keys = {"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"}
    # one attempt: the retries' backoff (tests/storage/test_s3_transfers.py) ends in the same error, only later
    got = _run(None, *command, str(tmp_path / "out"), "--endpoint", endpoint, **keys, AWS_MAX_ATTEMPTS="1")
    assert got.returncode == 2, got.stdout + got.stderr
    assert "Traceback" not in got.stderr
    last = got.stderr.strip().splitlines()[-1]
    assert last.startswith(f"stepscope {command[0]}: ") and "EndpointConnectionError" in last, got.stderr
    assert last.endswith(
        "check the endpoint (--endpoint, STEPSCOPE_STORAGE_ENDPOINT or AWS_ENDPOINT_URL) and that it is running"
    )


@pytest.mark.integration
def test_fetch_by_name_without_a_kubeconfig_is_one_line(tmp_path: Path) -> None:
    line = _one_line(_run(tmp_path / "missing-kubeconfig", "fetch", "demo"), "fetch")
    assert "no usable kubeconfig" in line and "set KUBECONFIG or pass --kubeconfig" in line


@pytest.mark.unit
def test_storage_failures_carry_their_fix_through_a_storage_error() -> None:
    from stepscope_storage.failure_fix import with_fix
    from stepscope_storage.store import StorageError

    missing = botocore.exceptions.ClientError(
        {"Error": {"Code": "NoSuchBucket", "Message": "gone", "BucketName": "team-a"}}, "ListObjectsV2"
    )
    try:
        raise StorageError("cannot list s3://team-a/x/") from missing
    except StorageError as exc:
        assert with_fix(exc) == "cannot list s3://team-a/x/; check the storage URI and the endpoint (--endpoint)"
    assert with_fix(StorageError("refusing to delete a whole bucket")) == "refusing to delete a whole bucket"
    assert explain(missing).line("fetch") == (
        "stepscope fetch: bucket team-a does not exist in storage (NoSuchBucket); check the storage URI and the "
        "endpoint (--endpoint)"
    )
