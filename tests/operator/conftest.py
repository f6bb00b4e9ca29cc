"""Operator integration fixtures: the Kubernetes API emulator over HTTP and the real operator process."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from operator_harness import REPO, OperatorProcess

from stepscope_local.kube import EmulatorServer


@pytest.fixture
def api() -> Iterator[EmulatorServer]:
    with EmulatorServer() as server:
        server.apply(yaml.safe_load((REPO / "crds" / "profilesessions.stepscope.dev.yaml").read_text()))
        server.apply(yaml.safe_load((REPO / "crds" / "profiletriggers.stepscope.dev.yaml").read_text()))
        yield server


@pytest.fixture
def operator(api: EmulatorServer, tmp_path: Path) -> Iterator[OperatorProcess]:
    proc = OperatorProcess(api, tmp_path)
    proc.start()
    yield proc
    proc.kill(signal.SIGTERM)
