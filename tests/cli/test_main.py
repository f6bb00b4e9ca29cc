import subprocess
import sys
from pathlib import Path

import pytest

from stepscope_cli.main import SUBCOMMANDS, main, usage

pytestmark = pytest.mark.unit


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert name in out
    assert out.strip() == usage().strip()


def test_unknown_subcommand_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frobnicate"]) == 2
    assert "unknown subcommand 'frobnicate'" in capsys.readouterr().err


def test_every_subcommand_resolves_to_a_callable() -> None:
    import importlib

    for name, (module, func, _) in SUBCOMMANDS.items():
        assert callable(getattr(importlib.import_module(module), func)), name


def test_console_script_installed() -> None:
    script = Path(sys.executable).parent / "stepscope"
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=False)
    assert result.returncode == 0 and "analyzer-job" in result.stdout
