"""Deleting a session's artifacts, when its spec asks for it (storage.deleteOnSessionDelete)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import boto3
from botocore.config import Config

from stepscope_contract.session import StorageSpec
from stepscope_contract.storage import Scheme, parse_storage_uri


def _delete(uri: str, storage: StorageSpec) -> int:
    location = parse_storage_uri(uri)
    if location.scheme is Scheme.FILE:
        path = Path(location.prefix)
        count = sum(1 for p in path.rglob("*") if p.is_file()) if path.exists() else 0
        shutil.rmtree(path, ignore_errors=True)
        return count
    style = {"auto": "auto", "path": "path", "virtual": "virtual"}[storage.addressing_style.value]
    client = boto3.client(
        "s3",
        endpoint_url=storage.endpoint,
        region_name=storage.region,
        config=Config(s3={"addressing_style": style}, retries={"mode": "standard", "max_attempts": 5}),
    )
    prefix = location.prefix.rstrip("/") + "/"
    removed = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=location.bucket, Prefix=prefix):
        keys = [{"Key": obj["Key"]} for obj in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=location.bucket, Delete={"Objects": keys, "Quiet": True})
            removed += len(keys)
    return removed


async def delete_prefix(uri: str, storage: StorageSpec) -> int:
    return await asyncio.to_thread(_delete, uri, storage)
