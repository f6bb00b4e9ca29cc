"""The `stepscope` console script: help, version, exit codes, and every subcommand's options documented with their
defaults."""

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stepscope_cli.main import PARSERS, PYDANTIC_PLUGINS, SUBCOMMANDS, main, parser_of, usage, version

pytestmark = pytest.mark.unit
SCRIPT = Path(sys.executable).parent / "stepscope"


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert name in out
    assert out.strip() == usage().strip()


def test_no_arguments_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert capsys.readouterr().err.strip() == usage().strip()


def test_version() -> None:
    result = subprocess.run([str(SCRIPT), "--version"], capture_output=True, text=True, check=False)
    assert result.returncode == 0 and result.stdout.strip() == f"stepscope {version()}" and version() != "unknown"


def test_unknown_subcommand_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frobnicate"]) == 2
    assert "unknown subcommand 'frobnicate'" in capsys.readouterr().err


def test_every_subcommand_resolves_to_a_callable() -> None:
    import importlib

    for name, (module, func, _) in SUBCOMMANDS.items():
        assert callable(getattr(importlib.import_module(module), func)), name


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_option_has_help_with_its_default(name: str) -> None:
    assert name in PARSERS, f"{name} has no parser listed in PARSERS"
    parser = parser_of(name)
    formatter = parser.formatter_class(prog=parser.prog)
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or not action.option_strings:
            continue
        assert action.help and action.help != argparse.SUPPRESS, f"{name} {action.option_strings} has no help"
        if action.required:
            continue
        shown = formatter._get_help_string(action)  # what --help prints, before % formatting
        assert "%(default)" in shown or "default" in shown, f"{name} {action.option_strings}: no default in {shown!r}"


def test_console_script_installed() -> None:
    result = subprocess.run([str(SCRIPT), "--help"], capture_output=True, text=True, check=False)
    assert result.returncode == 0 and "analyzer-job" in result.stdout
    bare = subprocess.run([str(SCRIPT)], capture_output=True, text=True, check=False)
    assert bare.returncode == 2 and "usage: stepscope" in bare.stderr


def test_check_skip_takes_the_names_of_the_checks() -> None:
    from stepscope_cli.commands.args import CHECK_NAMES
    from stepscope_cli.commands.check import CHECKS

    assert list(CHECK_NAMES) == sorted(CHECKS)


def test_help_after_other_arguments_and_a_usage_error_in_help_mode() -> None:
    """`--help` anywhere after the subcommand prints the help and exits 0, without the command running."""
    assert main(["wait", "some-session", "--timeout", "5", "--help"]) == 0
    assert main(["diff", "--help"]) == 0


@pytest.mark.parametrize(("before", "after"), [(None, "__all__"), ("", ""), ("logfire", "logfire")])
def test_a_subcommand_looks_for_no_pydantic_plugins_unless_told_to(
    before: str | None, after: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every subcommand turns pydantic's plugins off (looking for them reads every installed package's entry points
    before the first model is built) unless PYDANTIC_DISABLE_PLUGINS is already set: an empty value keeps them on."""
    if before is None:
        monkeypatch.delenv(PYDANTIC_PLUGINS, raising=False)
    else:
        monkeypatch.setenv(PYDANTIC_PLUGINS, before)
    assert main(["analyze", str(tmp_path / "missing")]) == 2
    assert os.environ[PYDANTIC_PLUGINS] == after
