"""moto_server as S3 on 127.0.0.1: a subprocess that can be stopped and restarted on the same port.

A restart is an outage: moto keeps objects in memory, so what was stored is lost unless the stop keeps it
(`stop(keep_objects=True)` reads every object of the known buckets first and the next start writes them back, body,
content type and metadata); the buckets made through `create_bucket` are recreated on start.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from stepscope_local.ports import free_port

ACCESS_KEY = "stepscope-local"
SECRET_KEY = "stepscope-local-secret"  # noqa: S105 (moto accepts any credentials)
REGION = "us-east-1"
PORT_TRIES = 5


def _answers_as_s3(endpoint: str) -> bool:
    """Whether what listens at `endpoint` is an S3 server (its root lists buckets), not whatever else took the port."""
    try:
        with urllib.request.urlopen(endpoint + "/", timeout=1) as response:  # noqa: S310 (loopback)
            return b"ListAllMyBucketsResult" in response.read(4096)
    except (urllib.error.URLError, OSError):  # HTTPError included: something answers, but not S3's bucket list
        return False


class S3Server:
    def __init__(self, log_path: Path | None = None, port: int = 0, env: Mapping[str, str] | None = None) -> None:
        self._fixed_port = bool(port)
        self._started = False
        self.port = port or free_port()
        self.log_path = log_path
        self.env = dict(env or {})  # added to this process's environment (e.g. moto's S3_UPLOAD_PART_MIN_SIZE)
        self.buckets: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._kept: list[tuple[str, str, bytes, str, dict[str, str]]] = []  # (bucket, key, body, type, metadata)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def exit_code(self) -> int | None:
        """The status of a server that exited on its own (None while it runs or after `stop`)."""
        return self._proc.poll() if self._proc is not None else None

    def restart(self) -> S3Server:
        """Start again on the same port after the server exited on its own (its objects are lost with it)."""
        self.stop()
        return self.start()

    def start(self, timeout: float = 30.0) -> S3Server:
        """Start moto_server and wait until it answers as S3. A port this server chose itself can be lost between
        choosing and binding (another server in this process or the machine binds it first): then moto exits, and
        a first start retries on fresh ports; a restart (an outage's end) keeps its port, so it fails instead."""
        if self.running:
            return self
        tries = 1 if (self._fixed_port or self._started) else PORT_TRIES
        for attempt in range(tries):
            if attempt:
                self.port = free_port()
            if self._spawn_and_wait(timeout):
                self._started = True
                for bucket in self.buckets:
                    self._make_bucket(bucket)
                self._restore()
                return self
        raise RuntimeError(f"moto_server exited on {tries} port(s), the last {self.port} (taken?); see {self.log_path}")

    def _spawn_and_wait(self, timeout: float) -> bool:
        """True once the server on our port answers with S3's bucket list; False when moto exited (port taken)."""
        exe = Path(sys.executable).parent / "moto_server"
        self._log = self.log_path.open("ab") if self.log_path else None
        out = self._log if self._log else subprocess.DEVNULL
        self._proc = proc = subprocess.Popen(
            [str(exe), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, **self.env},
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.stop()
                return False
            if _answers_as_s3(self.endpoint):
                return True
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto_server did not answer as S3 on port {self.port} in {timeout:g} s")

    def _snapshot(self) -> None:
        """Every object of the known buckets, read into memory for the next start."""
        client = self.client()
        kept = []
        for bucket in self.buckets:
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
                for item in page.get("Contents", []):
                    got = client.get_object(Bucket=bucket, Key=item["Key"])
                    kind = str(got.get("ContentType") or "application/octet-stream")
                    kept.append((bucket, str(item["Key"]), got["Body"].read(), kind, dict(got.get("Metadata") or {})))
        self._kept = kept

    def _restore(self) -> None:
        kept, self._kept = self._kept, []
        client = self.client()
        for bucket, key, body, kind, metadata in kept:
            client.put_object(Bucket=bucket, Key=key, Body=body, ContentType=kind, Metadata=metadata)

    def stop(self, keep_objects: bool = False) -> None:
        """Stop the server; `keep_objects`: what it stores comes back on the next start (see the module's doc)."""
        if keep_objects and self.running:
            self._snapshot()
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        if self._log is not None:
            self._log.close()
            self._log = None

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def _make_bucket(self, name: str) -> None:
        client = self.client()
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou, client.exceptions.BucketAlreadyExists):
            client.create_bucket(Bucket=name)

    def create_bucket(self, name: str) -> None:
        if name not in self.buckets:
            self.buckets.append(name)
        self._make_bucket(name)

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
