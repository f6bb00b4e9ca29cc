"""Fixtures of the local-cluster tests: a live emulator with the ProfileSession CRD registered."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from stepscope_local.kube import EmulatorServer

REPO = Path(__file__).resolve().parents[2]
CRD_PATH = REPO / "crds" / "profilesessions.stepscope.dev.yaml"


@pytest.fixture
def api() -> Iterator[EmulatorServer]:
    with EmulatorServer() as server:
        server.apply(yaml.safe_load(CRD_PATH.read_text()))
        yield server


def session_body(name: str, **spec_extra: object) -> dict[str, object]:
    return {
        "apiVersion": "stepscope.dev/v1alpha1",
        "kind": "ProfileSession",
        "metadata": {"name": name, "namespace": "default", "labels": {"team": "a"}},
        "spec": {
            "targets": {"selector": {"matchLabels": {"app": "trainer"}}},
            "storage": {"uri": "s3://bucket/p"},
            **spec_extra,
        },
    }
