"""Pure adjustments of the demo manifests."""

from __future__ import annotations

import pytest
import yaml

from stepscope_local.manifests import SESSION_PATH, s3_location, script_configmap, session_yaml, training_job

pytestmark = pytest.mark.unit


def test_the_demo_session_hard_codes_no_endpoint() -> None:
    doc = yaml.safe_load(SESSION_PATH.read_text())  # the install's storage settings give the endpoint
    assert "endpoint" not in doc["spec"]["storage"] and doc["metadata"]["name"] == "demo"


def test_session_yaml_applies_capture_overrides() -> None:
    short = yaml.safe_load(session_yaml({"stepTimeoutSeconds": 5}))
    assert short["spec"]["capture"]["stepTimeoutSeconds"] == 5 and "endpoint" not in short["spec"]["storage"]


def test_training_job_overrides() -> None:
    job = training_job(4321, 1, "compute", 12.5)
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert (env["MASTER_PORT"], env["SLOW_RANK"], env["SLOW_MODE"], env["SLOW_MS"]) == ("4321", "1", "compute", "12.5")
    assert env["PYTHONPATH"] == "/stepscope/hook" and env["STEPSCOPE_HOOK_DIR"] == "/stepscope/run"
    # the Flight Recorder on, as injection turns it on
    assert env["TORCH_FR_BUFFER_SIZE"] == env["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "2000"
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == 4


def test_script_configmap_and_s3_location() -> None:
    assert "import stepscope" not in script_configmap()["data"]["train_ddp.py"]
    assert s3_location("s3://b/a/b/report.html") == ("b", "a/b/report.html")
    with pytest.raises(ValueError, match="s3://"):
        s3_location("http://x")


def test_the_demo_sidecar_uploads_only_to_the_install_base_through_the_install_endpoint() -> None:
    from stepscope_local.install import STORAGE_BASE, STORAGE_CONFIGMAP

    plain = training_job(4321, 1, "compute", 12.5)
    sidecar = next(c for c in plain["spec"]["template"]["spec"]["containers"] if c["name"] == "stepscope-sidecar")
    env = {e["name"]: e for e in sidecar["env"]}
    for name in ("STEPSCOPE_STORAGE_BASE", "STEPSCOPE_STORAGE_ENDPOINT"):  # the install's settings, no fixed port
        assert env[name]["valueFrom"]["configMapKeyRef"] == {"name": STORAGE_CONFIGMAP, "key": name}
    assert yaml.safe_load(SESSION_PATH.read_text())["spec"]["storage"]["uri"] == STORAGE_BASE
    job = training_job(4321, 1, "compute", 12.5, storage_endpoint="http://127.0.0.1:5555")
    sidecar = next(c for c in job["spec"]["template"]["spec"]["containers"] if c["name"] == "stepscope-sidecar")
    endpoint = next(e for e in sidecar["env"] if e["name"] == "STEPSCOPE_STORAGE_ENDPOINT")
    assert endpoint == {"name": "STEPSCOPE_STORAGE_ENDPOINT", "value": "http://127.0.0.1:5555"}


def test_the_demo_token_secret_holds_the_token_derived_for_its_namespace() -> None:
    from stepscope_contract.tokens import namespace_token
    from stepscope_local.manifests import DEMO_DIR, load_all

    secret = next(d for d in load_all(DEMO_DIR / "secrets.yaml") if d["metadata"]["name"] == "stepscope-sidecar-token")
    namespace = secret["metadata"]["namespace"]
    assert secret["stringData"]["token"] == namespace_token("demo-master-token", namespace)
