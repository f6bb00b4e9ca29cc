"""The ProfileTrigger the e2e tests apply with kubectl: a Job's pods, the given conditions, evaluated every 2 s, and a
short CPU capture stored under the install's storage base (the local cluster's settings fill endpoint and Secret)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

API = "stepscope.dev/v1alpha1"
EVALUATION_INTERVAL_S = 2


def write_trigger(folder: Path, name: str, job: str, conditions: dict[str, Any], **spec: Any) -> Path:
    trigger = {
        "apiVersion": API,
        "kind": "ProfileTrigger",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "targets": {"jobRef": {"kind": "Job", "name": job}},
            "conditions": conditions,
            "evaluationIntervalSeconds": EVALUATION_INTERVAL_S,
            "sessionTemplate": {
                "spec": {
                    "capture": {"steps": 6, "skipSteps": 2, "activities": ["cpu"], "stepTimeoutSeconds": 30},
                    "storage": {"uri": "s3://stepscope-demo/sessions"},
                    "analysis": {"minSlowdownPercent": 20},
                }
            },
            **spec,
        },
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(trigger))
    return path
