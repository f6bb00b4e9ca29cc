"""Pure adjustments of the demo's manifests to one local run (ports, the planted slow rank, the S3 endpoint)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_DIR = REPO_ROOT / "examples" / "demo"
SESSION_PATH = REPO_ROOT / "examples" / "profilesession.yaml"


def load_all(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def script_configmap(namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ddp-train-script", "namespace": namespace},
        "data": {"train_ddp.py": (DEMO_DIR / "train_ddp.py").read_text()},
    }


def training_job(
    master_port: int,
    slow_rank: int,
    slow_mode: str,
    slow_ms: float,
    extra_env: dict[str, str] | None = None,
    *,
    storage_endpoint: str | None = None,
) -> dict[str, Any]:
    """examples/demo/train-job.yaml with this run's rendezvous port and planted slow rank (-1: none; slow_mode
    host, compute, hang or desync), plus `extra_env` on the trainer (e.g. HANG_AFTER_STEPS); `storage_endpoint` (the
    local S3 server) replaces the sidecar's STEPSCOPE_STORAGE_ENDPOINT, the only endpoint it uploads through."""
    job = copy.deepcopy(load_all(DEMO_DIR / "train-job.yaml")[0])
    overrides = {
        "MASTER_PORT": str(master_port),
        "SLOW_RANK": str(slow_rank),
        "SLOW_MODE": slow_mode,
        "SLOW_MS": str(slow_ms),
        **(extra_env or {}),
    }
    trainer = job["spec"]["template"]["spec"]["containers"][0]
    env = trainer.setdefault("env", [])
    for item in env:
        if item["name"] in overrides:
            item["value"] = overrides.pop(item["name"])
    env.extend({"name": k, "value": v} for k, v in overrides.items())
    if storage_endpoint is not None:
        containers = job["spec"]["template"]["spec"]["containers"]
        sidecar = next(c for c in containers if c["name"] == "stepscope-sidecar")
        for item in sidecar.get("env") or []:
            if item["name"] == "STEPSCOPE_STORAGE_ENDPOINT":
                item.pop("valueFrom", None)
                item["value"] = storage_endpoint
    return dict(job)


def session_yaml(capture: dict[str, Any] | None = None) -> str:
    """examples/profilesession.yaml with `capture` overrides (e.g. a short stepTimeoutSeconds for a job that already
    stands still); like the example, it names no endpoint: the install's storage settings give it."""
    doc = load_all(SESSION_PATH)[0]
    doc["spec"].setdefault("capture", {}).update(capture or {})
    return yaml.safe_dump(doc, sort_keys=False)


def s3_location(url: str) -> tuple[str, str]:
    """`s3://bucket/key` -> (bucket, key)."""
    if not url.startswith("s3://"):
        raise ValueError(f"not an s3:// URL: {url}")
    bucket, _, key = url[len("s3://") :].partition("/")
    return bucket, key
