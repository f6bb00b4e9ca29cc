"""The real `stepscope operator` process (against the Kubernetes API emulator) serves the injection webhook over
HTTPS when STEPSCOPE_WEBHOOK_PORT is set, with the certificate from STEPSCOPE_WEBHOOK_CERT_DIR."""

from __future__ import annotations

import base64
import json
import signal
import ssl
import urllib.request
from pathlib import Path

import pytest
from operator_harness import OperatorProcess
from test_injection import apply_json_patch, make_pod, validate_pod
from test_webhook import review, write_certificates

from stepscope_contract.constants import INJECT_LABEL, SIDECAR_CONTAINER_NAME
from stepscope_local.kube import EmulatorServer
from stepscope_local.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_operator_process_serves_the_webhook(
    api: EmulatorServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = write_certificates(tmp_path / "tls")
    port = free_port()
    monkeypatch.setenv("STEPSCOPE_WEBHOOK_PORT", str(port))
    monkeypatch.setenv("STEPSCOPE_WEBHOOK_HOST", "127.0.0.1")
    monkeypatch.setenv("STEPSCOPE_WEBHOOK_CERT_DIR", str(tmp_path / "tls"))
    monkeypatch.setenv("STEPSCOPE_SIDECAR_TOKEN_SECRET", "team-token")
    proc = OperatorProcess(api, tmp_path)
    proc.start()
    try:
        pod = make_pod({INJECT_LABEL: "true"})
        request = urllib.request.Request(
            f"https://127.0.0.1:{port}/mutate",
            data=json.dumps(review(pod)).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        context = ssl.create_default_context(cafile=str(ca))
        with urllib.request.urlopen(request, timeout=60, context=context) as resp:
            answer = json.loads(resp.read())
        response = answer["response"]
        assert response["allowed"] is True
        patched = apply_json_patch(pod, json.loads(base64.b64decode(response["patch"])))
        validate_pod(patched)
        assert patched["spec"]["initContainers"][-1]["name"] == SIDECAR_CONTAINER_NAME
        token = next(v for v in patched["spec"]["volumes"] if v["name"] == "stepscope-token")
        assert token["secret"]["secretName"] == "team-token"
    finally:
        proc.kill(signal.SIGTERM)
    assert "sidecar-injection webhook listening on 127.0.0.1" in proc.log()
