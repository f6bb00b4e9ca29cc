"""The docs say what is: no history in the topic pages, working links between them, and the statements of
docs/architecture.md's "Who writes what" held against the code.

- No page under docs/ carries history markers ("(was ...)", "tried and ...", "no longer", dates, "A -> B" figures):
  history belongs in CHANGELOG.md. Dates are allowed only in performance.md's figures table (each figure's date).
- Every relative link between the pages and to files of the repository resolves.
- The ProfileSession status has one writer: only the operator's `session/` room and the local emulator talk to a
  `/status` subresource; the analyzer and the sidecar import no Kubernetes client; the analyzer Job gets the accepted
  spec on its command line; every module path the table names exists.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from stepscope_contract.analysis_documents import SessionDocument
from stepscope_contract.session import ProfileSessionSpec
from stepscope_operator.session.analyzer_jobs import job_args

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PAGES = sorted(DOCS.glob("*.md"))
HISTORY = re.compile(
    r"\(was\b|\bwas \d|\bwere \d|\bnow \d|\btried and\b|\bnot adopted\b|\bnot kept\b|\bno longer\b|\bused to\b"
    r"|\bpreviously\b|\bformerly\b|\bfirst version\b|->\s*[\d.,]+\s?(?:ms|s|x|MB|MiB|GB)\b|\bas built\b"
)
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _python_files(*roots: str) -> list[Path]:
    return [p for root in roots for p in (REPO / root).rglob("*.py")]


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_topic_pages_exist() -> None:
    names = {p.name for p in PAGES}
    for page in ("architecture.md", "operator.md", "analyzer.md", "diagnosis.md", "gate.md", "storage.md"):
        assert page in names
    assert "design.md" not in names, "the as-built log lives in CHANGELOG.md; topic pages describe what is"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_history_in_the_docs(page: Path) -> None:
    found = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        found += [f"{page.name}:{number}: {m.group(0)!r} in {line.strip()[:100]}" for m in HISTORY.finditer(line)]
        if page.name != "performance.md":
            found += [f"{page.name}:{number}: date {m.group(0)}" for m in DATE.finditer(line)]
    assert found == [], "history goes in CHANGELOG.md:\n" + "\n".join(found)


@pytest.mark.parametrize("page", [*PAGES, REPO / "README.md"], ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if "://" in target or target.startswith("mailto:"):
            continue
        if not (page.parent / target).exists():
            broken.append(target)
    assert broken == []


def test_only_the_operator_writes_the_session_status() -> None:
    status_writers = []
    for path in _python_files("analyzer_job", "sidecar", "storage", "cli", "contract", "operator"):
        text = path.read_text(encoding="utf-8")
        if re.search(r"patch_namespaced_custom_object_status|replace_namespaced_custom_object_status", text) or (
            re.search(r"""["'/]status["']""", text) and "patch" in text and "custom" in text
        ):
            status_writers.append(path.relative_to(REPO).as_posix())
    assert all(p.startswith("operator/stepscope_operator/") for p in status_writers), status_writers


@pytest.mark.parametrize("root", ["analyzer_job", "sidecar"])
def test_the_analyzer_and_the_sidecar_have_no_kubernetes_client(root: str) -> None:
    users = [
        path.relative_to(REPO).as_posix()
        for path in _python_files(root)
        if any(name == "kubernetes" or name.startswith("kubernetes.") for name in _imported_modules(path))
    ]
    assert users == []


def test_the_analyzer_job_gets_the_accepted_spec_on_its_command_line() -> None:
    spec = ProfileSessionSpec.model_validate(
        {"targets": {"selector": {"matchLabels": {"a": "b"}}}, "storage": {"uri": "s3://bucket/p"}}
    )
    document = SessionDocument(namespace="ns", name="s", uid="u-1", capture_id="c-1", spec=spec)
    args = job_args(document, "all")
    assert args[args.index("--session-json") + 1] == document.to_json()


def test_every_module_the_architecture_names_exists() -> None:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:operator|analyzer_job|sidecar|contract|storage|cli|localcluster)/[\w/.]+)`", text))
    assert named, "the page names no module"
    missing = [name for name in sorted(named) if not (REPO / name).exists()]
    assert missing == []
