"""Docstrings and comments of the product's packages carry no measured figures ("~70 ms", "3x faster",
"0.55 vs 1.64 ms"): a figure changes with every run and machine, so the code names the benchmark that measures it
and docs/performance.md holds the figure with its date. Examples of the product's own output, quoted, are fine."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("contract", "storage", "cli", "operator", "sidecar", "analyzer_job", "localcluster")
FIGURE = re.compile(
    r"~\s?\d[\d.,]*\s?(?:ms|s|us|µs|MB|MiB|GB|KB)\b"
    r"|\b\d+(?:\.\d+)?x (?:faster|slower|the stdlib|HTA|asarray)"
    r"|\d[\d.,]*\s?(?:ms|µs|us|s|MB) (?:vs|against|instead of) \d"
)


def _prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring line."""
    found = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            doc = node.body[0] if node.body else None
            if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str):
                found += [(doc.lineno + i, line) for i, line in enumerate(doc.value.value.split("\n"))]
    return found


def test_no_measured_figures_in_docstrings_or_comments() -> None:
    hits = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            for line, text in _prose(path.read_text(encoding="utf-8")):
                if FIGURE.search(text) and "'" not in text:  # a quoted example of the product's output is fine
                    hits.append(f"{path.relative_to(REPO)}:{line}: {text.strip()[:120]}")
    assert hits == [], "name the benchmark instead of quoting its figure:\n" + "\n".join(hits)


def test_the_check_sees_a_figure() -> None:
    assert FIGURE.search("compiling costs ~70 ms") and FIGURE.search("3x faster on the 54 MB trace")
    assert not FIGURE.search("at most 64 containers")
