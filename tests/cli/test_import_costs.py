"""Each `stepscope` command loads what it uses, not what the other commands use: `stepscope <command> --help` loads
no models and no library of the command's work; importing a command's module (and
the module its `--help` parser comes from) loads no rendering, diff, analysis or cluster library, and costs at most
a bounded multiple of importing the contract's models (`python -X importtime` in fresh interpreters, each command
right after the contract, in up to RUNS rounds; the lowest round's ratio counts, so that a burst of load on a busy
machine does not fail it, while a command that loads too much is over the bound in every round; a command within the
bound in one round is done)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stepscope_cli.main import PARSERS, SUBCOMMANDS

pytestmark = pytest.mark.integration  # fresh interpreters, a minute or two on a busy machine

REPO = Path(__file__).resolve().parents[2]
COMMAND_MODULES = sorted({module for module, _, _ in SUBCOMMANDS.values()} | {module for module, _ in PARSERS.values()})
CONTRACT = sorted(
    f"stepscope_contract.{p.stem}"
    for p in (REPO / "contract" / "stepscope_contract").glob("*.py")
    if p.stem != "__init__"
)
NOT_AT_IMPORT = (
    "numpy",
    "jinja2",
    "kmock",
    "aiohttp",
    "kopf",
    "boto3",
    "botocore",
    "jsonschema",
    "moto",
    "msgspec",
    "stepscope_analyzer.parse",
    "stepscope_analyzer.analyses",
    "stepscope_analyzer.ranks",
    "stepscope_analyzer.reduce",
    "stepscope_analyzer.diagnosis",
    "stepscope_analyzer.report",
    "stepscope_analyzer.diff.compare",
    "stepscope_analyzer.flight_recorder",
)
"""what no command's module loads when it is imported: each command imports its work once its arguments parse"""
MAX_RATIO = 1.5
RUNS = 3


def _import_us(modules: list[str]) -> int:
    """Microseconds `python -X importtime` counts for importing `modules` (what the interpreter's start loads
    anyway, site and encodings, left out)."""
    statement = "import " + ", ".join(modules)
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement], capture_output=True, text=True, check=True
    ).stderr
    total = 0
    for line in err.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, cumulative, name = line[len("import time:") :].split("|")
        if name.startswith("  "):  # imported by another module: inside its cumulative time
            continue
        if name.strip() not in ("site", "encodings") and not name.strip().startswith(("__editable__", "_distutils")):
            total += int(cumulative)
    return total


def test_the_measure_counts_what_an_import_loads() -> None:
    assert _import_us(["json"]) > 0
    assert _import_us(["stepscope_contract.report"]) > _import_us(["stepscope_contract.constants"])


@pytest.mark.parametrize("module", COMMAND_MODULES)
def test_a_command_module_loads_none_of_the_others_work(module: str) -> None:
    probe = f"import sys, {module}; print(sorted(m for m in {NOT_AT_IMPORT!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", f"{module} loads {out.strip()} when imported"


@pytest.mark.timeout(300)
def test_a_command_module_costs_at_most_a_bounded_multiple_of_the_contract() -> None:
    ratios: dict[str, list[float]] = {m: [] for m in COMMAND_MODULES}
    for _ in range(RUNS):
        # a module within the bound in one round is within it at its lowest ratio: the later rounds measure the rest
        for module in [m for m, r in ratios.items() if not r or min(r) > MAX_RATIO]:
            contract = _import_us(CONTRACT)
            ratios[module].append(_import_us([module]) / contract)
    over = {m: round(min(r), 2) for m, r in ratios.items() if min(r) > MAX_RATIO}
    assert not over, f"import time over {MAX_RATIO}x the contract's: {over}"


HELP_LOADS_NONE_OF = (*NOT_AT_IMPORT, "pydantic", "stepscope_contract.report", "stepscope_contract.session", "torch")
"""what `stepscope <command> --help` never loads: it prints the parser from PARSERS without the command's module"""


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_a_commands_help_loads_neither_its_work_nor_the_models(name: str) -> None:
    probe = (
        "import contextlib, io, sys\n"
        "from stepscope_cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as shown:\n"
        f"    code = main([{name!r}, '--help'])\n"
        f"print(code, 'usage:' in shown.getvalue(), sorted(m for m in {HELP_LOADS_NONE_OF!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0 True []", f"stepscope {name} --help: {out.strip()}"
