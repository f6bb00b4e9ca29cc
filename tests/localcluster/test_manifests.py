"""Pure adjustments of the demo manifests."""

from __future__ import annotations

import pytest
import yaml

from stepscope_local.manifests import SESSION_PATH, s3_location, script_configmap, training_job

pytestmark = pytest.mark.unit


def test_the_demo_session_hard_codes_no_endpoint() -> None:
    doc = yaml.safe_load(SESSION_PATH.read_text())  # the install's storage settings give the endpoint
    assert "endpoint" not in doc["spec"]["storage"] and doc["metadata"]["name"] == "demo"


def test_training_job_overrides() -> None:
    job = training_job(4321, 1, "compute", 12.5)
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert (env["MASTER_PORT"], env["SLOW_RANK"], env["SLOW_MODE"], env["SLOW_MS"]) == ("4321", "1", "compute", "12.5")
    assert env["PYTHONPATH"] == "/stepscope/hook" and env["STEPSCOPE_HOOK_DIR"] == "/stepscope/run"
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == 4


def test_script_configmap_and_s3_location() -> None:
    assert "import stepscope" not in script_configmap()["data"]["train_ddp.py"]
    assert s3_location("s3://b/a/b/report.html") == ("b", "a/b/report.html")
    with pytest.raises(ValueError, match="s3://"):
        s3_location("http://x")
