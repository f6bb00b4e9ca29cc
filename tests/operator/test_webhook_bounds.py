"""The webhook bounds what an unauthenticated body can cost the real `stepscope operator` process.

Checks: an 8 MiB review body of empty objects is refused (413) and grows the operator's peak memory (VmHWM of the
process) by less than 64 MiB; a body just under the bound made of empty objects inside the pod, and one nested
10,000 levels deep, are answered (allowed, unchanged, with a warning where the pod cannot be read) within the same
growth; so are four reviews at once of a pod under the cap with 41,920 tiny containers (admitted unchanged with a
warning, each answer under 1 KiB); 8 MiB posted to the metrics and health listeners costs nothing either; a real pod
review is still injected afterwards.
"""

from __future__ import annotations

import json
import signal
import ssl
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from operator_harness import OperatorProcess
from test_injection import make_pod
from test_webhook import review, write_certificates
from test_webhook_load import CONTAINERS, crowded_review

from stepscope_contract.constants import INJECT_LABEL
from stepscope_local.kube import EmulatorServer
from stepscope_local.ports import free_port
from stepscope_operator.webhook.admission import MAX_REVIEW_BYTES

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

MiB = 1 << 20


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def _bomb(size: int) -> bytes:
    head = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",'
    head += b'"kind":{"kind":"Pod"},"operation":"CREATE","object":{"metadata":{},"spec":{"containers":['
    tail = b"]}}}}"
    count = (size - len(head) - len(tail)) // 3
    return head + b",".join([b"{}"] * count) + tail


def _deep(size: int) -> bytes:
    depth = (size - 200) // 2
    return b'{"request":{"uid":"u2","kind":{"kind":"Pod"},"object":' + b"[" * depth + b"]" * depth + b"}}"


def _post(url: str, body: bytes, context: ssl.SSLContext) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=120, context=context) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {}
    except (ConnectionError, urllib.error.URLError):  # the server may close before reading all of a refused body
        return 413, {}


def _plain_post(url: str, body: bytes | None) -> int | None:
    """The HTTP status of a POST (a GET without a body), None when the connection failed."""
    request = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            resp.read()
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, ConnectionError):
        return None  # refused or closed: what matters is the memory


def test_review_bodies_are_bounded_in_the_operator_process(
    api: EmulatorServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = write_certificates(tmp_path / "tls")
    port = free_port()
    monkeypatch.setenv("STEPSCOPE_WEBHOOK_PORT", str(port))
    monkeypatch.setenv("STEPSCOPE_WEBHOOK_HOST", "127.0.0.1")
    monkeypatch.setenv("STEPSCOPE_WEBHOOK_CERT_DIR", str(tmp_path / "tls"))
    proc = OperatorProcess(api, tmp_path, verbose=False)
    proc.start()
    url = f"https://127.0.0.1:{port}/mutate"
    context = ssl.create_default_context(cafile=str(ca))
    try:
        assert proc.proc is not None
        pid = proc.proc.pid
        warm = json.dumps(review(make_pod({INJECT_LABEL: "true"}))).encode()
        assert _post(url, warm, context)[0] == 200  # the first review loads what every review needs
        before = _peak_rss(pid)

        status, _ = _post(url, _bomb(8 * MiB), context)
        grown = _peak_rss(pid) - before
        assert status == 413, f"{status}; the operator's peak memory grew by {grown / MiB:.0f} MiB"
        status, answer = _post(url, _bomb(MAX_REVIEW_BYTES - 1024), context)
        assert status == 200 and answer["response"]["allowed"] is True
        assert answer["response"]["uid"] == "u1" and "patch" not in answer["response"]
        status, answer = _post(url, _deep(MAX_REVIEW_BYTES - 1024), context)
        assert status == 200 and answer["response"]["allowed"] is True
        assert answer["response"].get("warnings") and "patch" not in answer["response"]

        crowded = [crowded_review(uid=f"crowd-{i}") for i in range(4)]
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda body: _post(url, body, context), crowded))
        grown = _peak_rss(pid) - before
        assert grown < 64 * MiB, f"four crowded pods grew the operator's peak memory by {grown / MiB:.0f} MiB"
        for status, answer in answers:
            assert status == 200 and answer["response"]["allowed"] is True and "patch" not in answer["response"]
            assert f"{CONTAINERS} containers" in answer["response"]["warnings"][0]

        environ = dict(
            item.split("=", 1) for item in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in item
        )
        for name, path in (("STEPSCOPE_METRICS_PORT", "/metrics"), ("STEPSCOPE_HEALTH_PORT", "/healthz")):
            listener = f"http://127.0.0.1:{environ[name]}{path}"
            assert _plain_post(listener, None) == 200  # the listener is there
            _plain_post(listener, _bomb(8 * MiB))  # and reads no body

        grown = _peak_rss(pid) - before
        assert grown < 64 * MiB, f"the operator's peak memory grew by {grown / MiB:.0f} MiB"

        status, answer = _post(url, warm, context)
        assert status == 200 and answer["response"]["patchType"] == "JSONPatch"
    finally:
        proc.kill(signal.SIGTERM)
