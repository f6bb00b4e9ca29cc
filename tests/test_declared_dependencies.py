"""Every third-party module the product imports is declared in pyproject.toml's dependencies or extras (not only in
a test or lint group): a clean install of an extra has what its component imports. (jsonschema was imported by the
local cluster's API emulator while only the test group declared it.)"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("contract", "storage", "cli", "operator", "sidecar", "analyzer_job", "localcluster")
# modules that come with a declared distribution rather than being one
COMES_WITH = {"botocore": "boto3", "s3transfer": "boto3", "multidict": "aiohttp", "yarl": "aiohttp"}


def _name(requirement: str) -> str:
    base = re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0]
    return base.lower().replace("_", "-")


def _declared() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {_name(r) for r in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        names |= {_name(r) for r in extra}
    return names


def _third_party_imports() -> dict[str, set[str]]:
    first_party = {p.name for root in PRODUCT for p in (REPO / root).iterdir() if p.name.startswith("stepscope_")}
    found: dict[str, set[str]] = {}
    for root in PRODUCT:
        for path in (REPO / root).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    mods = [a.name.split(".")[0] for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    mods = [node.module.split(".")[0]]
                else:
                    continue
                for mod in mods:
                    if mod not in sys.stdlib_module_names and mod not in first_party and mod != "__future__":
                        found.setdefault(mod, set()).add(str(path.relative_to(REPO)))
    return found


def test_every_imported_distribution_is_declared() -> None:
    declared = _declared()
    owners = importlib.metadata.packages_distributions()
    missing = {}
    for module, where in _third_party_imports().items():
        dists = {d.lower().replace("_", "-") for d in owners.get(module, [module])}
        if module in COMES_WITH:
            dists = {COMES_WITH[module]}
        if not dists & declared:
            missing[module] = sorted(where)[:3]
    assert missing == {}, f"declare these in pyproject.toml's dependencies or an extra: {missing}"
