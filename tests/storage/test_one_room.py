"""stepscope_storage is the one room that talks to object storage: no product module outside it imports boto3 or
botocore (the local cluster's S3 server aside), and importing the package itself loads neither (the operator's
image has no boto3 and still uses its credential names)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("contract", "storage", "cli", "operator", "sidecar", "analyzer_job", "localcluster")
ALLOWED = {
    Path("storage/stepscope_storage/s3.py"),  # the S3/OSS/MinIO backend
    Path("localcluster/stepscope_local/s3.py"),  # the local cluster's S3 server (moto) and its admin client
}
FORBIDDEN = ("boto3", "botocore", "s3transfer")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_no_boto_outside_the_storage_room() -> None:
    offenders = {}
    for root in PRODUCT:
        for path in sorted((REPO / root).rglob("*.py")):
            rel = path.relative_to(REPO)
            found = _imports(path) & set(FORBIDDEN)
            if found and rel not in ALLOWED:
                offenders[str(rel)] = sorted(found)
    assert offenders == {}, f"import storage through stepscope_storage: {offenders}"


def test_the_scan_sees_boto_where_it_is() -> None:
    assert _imports(REPO / "storage/stepscope_storage/s3.py") & {"boto3", "botocore"}


def test_importing_the_package_loads_no_boto() -> None:
    code = (
        "import sys, stepscope_storage, stepscope_storage.credentials, stepscope_storage.endpoints, "
        "stepscope_storage.fetch, stepscope_storage.local\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 's3transfer')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_storage_room_imports_only_the_contract() -> None:
    first_party = {"stepscope_cli", "stepscope_operator", "stepscope_sidecar", "stepscope_hook",
                   "stepscope_analyzer", "stepscope_local"}  # fmt: skip
    for path in (REPO / "storage/stepscope_storage").rglob("*.py"):
        assert not _imports(path) & first_party, path
