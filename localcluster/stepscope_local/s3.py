"""moto_server as S3 on 127.0.0.1: a subprocess that can be stopped and restarted on the same port.

A restart is an outage: moto keeps objects in memory, so what was stored is lost; the buckets made through
`create_bucket` are recreated on start.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

ACCESS_KEY = "stepscope-local"
SECRET_KEY = "stepscope-local-secret"  # noqa: S105 (moto accepts any credentials)
REGION = "us-east-1"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class S3Server:
    def __init__(self, log_path: Path | None = None, port: int = 0, env: Mapping[str, str] | None = None) -> None:
        self.port = port or free_port()
        self.log_path = log_path
        self.env = dict(env or {})  # added to this process's environment (e.g. moto's S3_UPLOAD_PART_MIN_SIZE)
        self.buckets: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout: float = 30.0) -> S3Server:
        if self.running:
            return self
        exe = Path(sys.executable).parent / "moto_server"
        self._log = self.log_path.open("ab") if self.log_path else None
        out = self._log if self._log else subprocess.DEVNULL
        self._proc = subprocess.Popen(
            [str(exe), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, **self.env},
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self._proc.returncode} (port {self.port} taken?)")
            try:
                with urllib.request.urlopen(self.endpoint + "/", timeout=1):  # noqa: S310 (loopback)
                    break
            except urllib.error.HTTPError:
                break  # it answers
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        else:
            self.stop()
            raise RuntimeError("moto_server did not answer in time")
        for bucket in self.buckets:
            self._make_bucket(bucket)
        return self

    def stop(self) -> None:
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
