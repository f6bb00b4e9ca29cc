"""The install's storage settings (`STEPSCOPE_STORAGE_*`, from the Helm values or `stepscope local-cluster`): a
session that names only its bucket gets the endpoint, addressing style and credentials Secret from them, in the
sidecars' start requests and in the analyzer Job, and they are frozen in the accepted spec."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from operator_harness import API, SIDECAR_TOKEN, OperatorProcess, add_pod, wait_for
from standin_sidecar import SidecarFleet

from stepscope_local.kube import EmulatorServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SETTINGS = {
    "STEPSCOPE_STORAGE_ENDPOINT": "http://minio.storage.svc:9000",
    "STEPSCOPE_STORAGE_ADDRESSING_STYLE": "path",
    "STEPSCOPE_STORAGE_CREDENTIALS_SECRET": "install-s3",
}


def test_a_session_with_only_a_uri_uses_the_install_settings(api: EmulatorServer, tmp_path: Path) -> None:
    op = OperatorProcess(api, tmp_path, extra_env=SETTINGS)
    op.start()
    try:
        with SidecarFleet(SIDECAR_TOKEN, 1, upload_after=0.5, base="127.0.15.") as fleet:
            (sidecar,) = fleet.sidecars
            add_pod(api, "solo", sidecar.host, sidecar.port, {"app": "solo"}, env=[{"name": "RANK", "value": "0"}])
            api.apply(
                {
                    "apiVersion": API,
                    "kind": "ProfileSession",
                    "metadata": {"name": "bare", "namespace": "default"},
                    "spec": {
                        "targets": {"selector": {"matchLabels": {"app": "solo"}}},
                        "storage": {"uri": "s3://team-bucket/traces"},
                    },
                }
            )
            obj = wait_for(api, "bare", ("Analyzing", "Failed"))
            assert obj["status"]["phase"] == "Analyzing", obj["status"]
            (capture,) = sidecar.captures.values()
            destination = capture.request.destination
            assert destination.endpoint == "http://minio.storage.svc:9000"
            assert destination.addressing_style.value == "path"
            accepted = json.loads(obj["metadata"]["annotations"]["stepscope.dev/accepted-spec"])
            assert accepted["storage"]["credentialsSecret"]["name"] == "install-s3"
            assert "endpoint" not in obj["spec"]["storage"]  # the user's spec is left as written
            job = api.get("batch/v1", "jobs", "default", "bare-analyze")
            assert job is not None
            env = job["spec"]["template"]["spec"]["containers"][0]["env"]
            refs = {e["name"]: e["valueFrom"]["secretKeyRef"]["name"] for e in env if "valueFrom" in e}
            assert refs == {"AWS_ACCESS_KEY_ID": "install-s3", "AWS_SECRET_ACCESS_KEY": "install-s3"}
    finally:
        op.kill(signal.SIGTERM)
