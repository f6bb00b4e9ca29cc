"""Fixtures of the storage tests: a moto S3 server on loopback (small multipart parts allowed) and a bucket."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from storage_harness import BUCKET, KEYS, VENV_BIN, free_port


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto_server on 127.0.0.1 (5 MiB minimum part size lifted, so small files go multipart); its URL."""
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    env = {"PATH": str(VENV_BIN), "S3_UPLOAD_PART_MIN_SIZE": "256", **KEYS}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(VENV_BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=out, env=env
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"moto_server did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def raw_s3(moto: str) -> Any:
    """A plain boto3 client on the moto server (to look at what the store wrote, or to tamper with it)."""
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=moto,
        region_name="us-east-1",
        aws_access_key_id=KEYS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=KEYS["AWS_SECRET_ACCESS_KEY"],
    )
    client.create_bucket(Bucket=BUCKET)
    return client
