"""pydantic's plugin loader stood in for where PYDANTIC_DISABLE_PLUGINS turns every plugin off
(stepscope_contract.plugin_lookup): the stand-in answers as pydantic's own loader does then, and a model built after it
leaves importlib.metadata unloaded. Each case runs in a fresh interpreter: the test process has long since loaded
the real loader."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from stepscope_contract.plugin_lookup import DISABLED

pytestmark = pytest.mark.unit


def _run(code: str, plugins: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if plugins is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = plugins
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


MODEL_BUILT = """
    import sys
    from stepscope_contract.plugin_lookup import skip_when_disabled
    stood_in = skip_when_disabled()
    from stepscope_contract.deferred import build_now
    from stepscope_contract.report import StepStats
    build_now(StepStats)
    stats = StepStats.model_validate({"count": 3, "median_us": 2.0, "durations_us": [1.0, 2.0, 3.0]})
    print(stood_in, "importlib.metadata" in sys.modules, stats.count)
"""


@pytest.mark.parametrize("value", DISABLED)
def test_with_plugins_off_a_model_builds_and_validates_without_the_metadata_reader(value: str) -> None:
    assert _run(MODEL_BUILT, value) == "True False 3"


@pytest.mark.parametrize("value", [None, "", "some_plugin"])
def test_with_plugins_on_pydantic_keeps_its_own_loader(value: str | None) -> None:
    assert _run(MODEL_BUILT, value) == "False True 3"


@pytest.mark.parametrize("value", DISABLED)
def test_pydantic_s_own_loader_finds_no_plugin_for_the_values_the_stand_in_covers(value: str) -> None:
    """The stand-in's answer, no plugins, is pydantic's own for every value it is installed for."""
    assert _run("from pydantic.plugin._loader import get_plugins; print(tuple(get_plugins()))", value) == "()"
