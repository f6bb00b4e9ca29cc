"""Fixtures of the storage tests: a moto S3 server on loopback (small multipart parts allowed) and a bucket."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stepscope_local.s3 import S3Server

sys.path.insert(0, str(Path(__file__).resolve().parent))
from storage_harness import BUCKET, KEYS


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto_server on 127.0.0.1 (5 MiB minimum part size lifted, so small files go multipart); its URL."""
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with S3Server(log_path=log, env={"S3_UPLOAD_PART_MIN_SIZE": "256", **KEYS}).start(timeout=60) as s3:
        yield s3.endpoint


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
