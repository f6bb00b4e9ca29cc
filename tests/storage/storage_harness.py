"""Shared names of the storage tests (importable from the test modules, unlike conftest)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
BUCKET = "stepscope-storage-test"
KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
