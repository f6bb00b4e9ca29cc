"""The version every component reports is pyproject.toml's and the installed distribution's."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import pytest

from stepscope_contract.version import VERSION

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def test_the_version_is_pyproject_s_and_the_installed_one() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert VERSION == declared == importlib.metadata.version("stepscope")


def test_every_component_reports_the_same_version() -> None:
    from stepscope_analyzer import tool_version
    from stepscope_cli.main import version
    from stepscope_sidecar.agent import VERSION as SIDECAR

    assert tool_version() == version() == SIDECAR == VERSION
