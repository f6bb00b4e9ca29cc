"""Helpers for the sidecar tests: process management, sidecar HTTP calls, moto_server, capture bodies."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope_local.ports import free_port

HERE = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent
TOKEN = "test-token-0123456789"
BUCKET = "stepscope-test"
NAMESPACE = "team-a"  # the namespace of the sidecars and of capture_body's session
SESSION_DIR = "resnet-01234567"  # capture_body's session folder: <base>/team-a/resnet-01234567


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Procs:
    """Every process a test starts; all are stopped (process group) at teardown."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(
        self, args: list[str], env: dict[str, str], log: Path, cwd: Path | None = None
    ) -> subprocess.Popen[bytes]:
        fh = open(log, "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(args, env=env, stdout=fh, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True)
        fh.close()
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STEPSCOPE_", "AWS_", "PYTHONPATH"))}
    env.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
    )
    return env


@dataclass
class Sidecar:
    url: str
    hook_dir: Path
    proc: subprocess.Popen[bytes]
    log: Path

    def call(self, method: str, path: str, body: Any = None, token: str | None = TOKEN) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if token is not None:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                raw = resp.read()
                status = resp.status
        except urllib.error.HTTPError as err:
            raw, status = err.read(), err.code
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode()

    def wait_terminal(self, capture_id: str, timeout: float) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            code, body = self.call("GET", f"/v1/captures/{capture_id}")
            assert code == 200, body
            return body if body["state"] in ("uploaded", "hung", "failed", "aborted") else None

        return dict(wait_for(done, timeout, f"capture {capture_id} on {self.url} to finish", 0.2))


def start_moto(procs: Procs, workdir: Path, port: int | None = None, name: str = "moto") -> str:
    port = port or free_port()
    env = base_env() | {"S3_UPLOAD_PART_MIN_SIZE": "256"}
    procs.start([str(VENV_BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)], env, workdir / f"{name}.log")
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            return False

    wait_for(up, 180, "moto_server")
    return url


def s3_client(endpoint: str) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def start_sidecar(
    procs: Procs,
    workdir: Path,
    token_file: Path,
    name: str,
    *extra: str,
    bases: str = "",
    endpoints: str = "",
    namespace: str = NAMESPACE,
) -> Sidecar:
    """A sidecar process of `namespace` that uploads only under `bases` (comma-separated) through `endpoints`."""
    hook_dir = workdir / f"run-{name}"
    hook_dir.mkdir(parents=True, exist_ok=True)
    port_file = workdir / f"{name}.port"
    port_file.unlink(missing_ok=True)
    log = workdir / f"sidecar-{name}.log"
    env = base_env() | {
        "STEPSCOPE_POD_NAME": f"pod-{name}",
        "STEPSCOPE_NODE_NAME": f"node-{name}",
        "STEPSCOPE_POD_NAMESPACE": namespace,
        "STEPSCOPE_STORAGE_BASE": bases,
        "STEPSCOPE_STORAGE_ENDPOINT": endpoints,
    }
    args = [sys.executable, "-m", "stepscope_cli.main", "sidecar", "--host", "127.0.0.1", "--port", "0"]
    args += ["--hook-dir", str(hook_dir), "--token-file", str(token_file), "--port-file", str(port_file), *extra]
    proc = procs.start(args, env, log)
    port = wait_for(lambda: port_file.exists() and port_file.read_text().strip(), 180, f"sidecar {name} to listen")
    return Sidecar(url=f"http://127.0.0.1:{port}", hook_dir=hook_dir, proc=proc, log=log)


def stored_key(session_prefix: str, rank: int, name: str) -> str:
    """Where a rank's file `name` lies in the bucket, for a session folder at `session_prefix` (contract layout)."""
    from stepscope_contract.storage import Scheme, StorageLocation, rank_artifact_key

    return rank_artifact_key(StorageLocation(Scheme.S3, BUCKET, session_prefix), rank, name)


def stored_path(session_dir: Path, rank: int, name: str) -> Path:
    """The same for a file:// session folder."""
    from stepscope_contract.storage import parse_storage_uri, rank_artifact_key

    return Path(rank_artifact_key(parse_storage_uri(f"file://{session_dir}"), rank, name))


def capture_body(capture_id: str, session_uri: str, endpoint: str | None = None, **options: Any) -> dict[str, Any]:
    opts: dict[str, Any] = {"steps": 3, "skipSteps": 1, "activities": ["cpu"], "timeoutSeconds": 60}
    opts.update(options)
    dest: dict[str, Any] = {"sessionUri": session_uri, "region": "us-east-1", "addressingStyle": "path"}
    if endpoint:
        dest["endpoint"] = endpoint
    return {
        "captureId": capture_id,
        "session": {"namespace": NAMESPACE, "name": "resnet", "uid": "0123456789abcdef"},
        "options": opts,
        "destination": dest,
    }


class TcpForwarder:
    """A loopback TCP relay to `target_port`: the "network comes back" half of the outage test."""

    def __init__(self, port: int, target_port: int) -> None:
        import threading

        self.port = port
        self.target_port = target_port
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self._sock.listen(16)
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        import threading

        while not self._closed:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed = True
        self._sock.close()
