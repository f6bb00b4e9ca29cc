"""Container spec -> local process translation (pure)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stepscope_local.runner.containers import (
    ContainerConfigError,
    container_argv,
    container_env,
    expand,
    field_value,
    map_executable,
    rewrite_path,
)

pytestmark = pytest.mark.unit
POD = {
    "metadata": {"name": "p", "namespace": "ns", "uid": "u", "annotations": {"a/b": "3"}, "labels": {"l": "x"}},
    "spec": {"nodeName": "node-1"},
    "status": {"podIP": "127.0.0.9"},
}


def test_expand_known_unknown_and_escaped() -> None:
    assert expand("$(A)-$(B)-$$(A)", {"A": "1"}) == "1-$(B)-$(A)"


def test_field_refs() -> None:
    assert field_value(POD, "status.podIP") == "127.0.0.9"
    assert field_value(POD, "spec.nodeName") == "node-1"
    assert field_value(POD, "metadata.annotations['a/b']") == "3"
    assert field_value(POD, "metadata.labels['l']") == "x"
    with pytest.raises(ContainerConfigError):
        field_value(POD, "status.phase")


def test_rewrite_path_prefixes_and_flags() -> None:
    mounts = {"/stepscope/run": Path("/h/run"), "/stepscope": Path("/h/all")}
    assert rewrite_path("/stepscope/run/x", mounts) == "/h/run/x"
    assert rewrite_path("/stepscope/hook", mounts) == "/h/all/hook"
    assert rewrite_path("--dir=/stepscope/run", mounts) == "--dir=/h/run"
    assert rewrite_path("/stepscopex", mounts) == "/stepscopex"
    assert rewrite_path("echo /stepscope/run", mounts) == "echo /stepscope/run"  # documented gap


def test_env_order_secret_and_missing_secret() -> None:
    container = {
        "env": [
            {"name": "A", "value": "a"},
            {"name": "B", "value": "$(A)b"},
            {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        ]
    }
    env = container_env(container, POD, lambda ns, n: {"k": f"{ns}/{n}"}, lambda ns, n: None, {"PATH": "/bin"})
    assert env == {"PATH": "/bin", "A": "a", "B": "ab", "S": "ns/s", "IP": "127.0.0.9"}
    with pytest.raises(ContainerConfigError):
        container_env(container, POD, lambda ns, n: None, lambda ns, n: None, {})


def test_argv_maps_python_and_stepscope_to_the_venv() -> None:
    argv = container_argv(
        {"command": ["python3", "/w/x.py"], "args": ["--ip", "$(IP)"]}, {"IP": "1.2.3.4"}, {"/w": Path("/host/w")}
    )
    assert argv == [sys.executable, "/host/w/x.py", "--ip", "1.2.3.4"]
    assert map_executable("stepscope") == str(Path(sys.executable).parent / "stepscope")
    assert map_executable("sleep") == "sleep"
    with pytest.raises(ContainerConfigError):
        container_argv({"name": "c"}, {}, {})
