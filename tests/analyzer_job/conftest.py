"""Fixtures of the analyzer tests: a moto S3 server on loopback, the committed gloo traces, a session folder."""

from __future__ import annotations

import gzip
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from stepscope_local.s3 import S3Server

FIXTURES = Path(__file__).resolve().parent / "fixtures"
VENV_BIN = Path(sys.executable).parent


@pytest.fixture
def moto_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A moto S3 server process on 127.0.0.1 (the local cluster's S3Server); AWS credentials for it in the
    environment."""
    with S3Server().start(timeout=120) as s3:
        for key, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }.items():
            monkeypatch.setenv(key, value)
        yield s3.endpoint


@pytest.fixture(scope="session")
def gloo_traces() -> list[bytes]:
    """Real CPU-only gloo traces of 2 ranks (rank 1 sleeps 20 ms per step before its all_reduce)."""
    return [(FIXTURES / f"gloo_2rank_rank{rank}.pt.trace.json.gz").read_bytes() for rank in range(2)]


@pytest.fixture(scope="session")
def malformed_traces(gloo_traces: list[bytes]) -> dict[str, bytes]:
    """Trace bytes that cannot be analysed, by what is wrong with them."""
    good = gzip.decompress(gloo_traces[0])
    return {
        "truncated gzip": gloo_traces[0][: len(gloo_traces[0]) // 2],
        "invalid json": b'{"traceEvents": [{"name": "x", "ph": "X", "ts": 1,',
        "not a trace": b'{"hello": "world"}',
        "empty": b"",
        "events without fields": b'{"traceEvents": [{"name": "a"}, {"ph": "X"}, 42, null]}',
        "binary garbage": os.urandom(4096),
        "truncated plain json": good[: len(good) // 3],
    }


@pytest.fixture(scope="session")
def analyze_cmd() -> list[str]:
    """`stepscope analyze` as a separate process."""
    return [sys.executable, "-m", "stepscope_cli.main", "analyze"]
