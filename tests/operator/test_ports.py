"""The operator's probe and metrics ports: `0` means any free port, written back and into the ports file."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from stepscope_operator.main import PORTS_FILE_VARIABLE, resolve_ports

pytestmark = pytest.mark.unit


def test_zero_means_any_free_port_and_the_ports_file_says_which(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "ports.json"
    monkeypatch.setenv("STEPSCOPE_METRICS_PORT", "0")
    monkeypatch.setenv("STEPSCOPE_HEALTH_PORT", "0")
    monkeypatch.setenv(PORTS_FILE_VARIABLE, str(target))
    ports = resolve_ports()
    assert json.loads(target.read_text()) == ports
    assert all(p > 0 for p in ports.values()) and ports["metrics"] != ports["health"]
    assert os.environ["STEPSCOPE_HEALTH_PORT"] == str(ports["health"])  # what kopf and the handlers then use
    for port in ports.values():  # free: this process can bind them
        with socket.socket() as s:
            s.bind(("0.0.0.0", port))


def test_set_ports_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPSCOPE_METRICS_PORT", "9100")
    monkeypatch.delenv("STEPSCOPE_HEALTH_PORT", raising=False)
    monkeypatch.delenv(PORTS_FILE_VARIABLE, raising=False)
    assert resolve_ports() == {"metrics": 9100, "health": 8081}
