"""Real-process fixtures for the sidecar tests: moto_server as S3, sidecar agents, training processes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sidecar_harness import BUCKET, TOKEN, Procs, s3_client, start_moto


@pytest.fixture(scope="module")
def procs() -> Iterator[Procs]:
    p = Procs()
    yield p
    p.stop_all()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sidecar")


@pytest.fixture(scope="module")
def hook_path(workdir: Path) -> Path:
    """The hook installed the way the init container does it: `stepscope install-hook DEST`."""
    dest = workdir / "hook"
    out = subprocess.run(
        [sys.executable, "-m", "stepscope_cli.main", "install-hook", str(dest)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "sitecustomize.py" in out.stdout
    return dest


@pytest.fixture(scope="module")
def token_file(workdir: Path) -> Path:
    path = workdir / "token"
    path.write_text(TOKEN + "\n")
    return path


@pytest.fixture(scope="module")
def s3(procs: Procs, workdir: Path) -> tuple[str, Any]:
    endpoint = start_moto(procs, workdir)
    client = s3_client(endpoint)
    client.create_bucket(Bucket=BUCKET)
    return endpoint, client
