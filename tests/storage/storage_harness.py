"""Shared names of the storage tests (importable from the test modules, unlike conftest)."""

from __future__ import annotations

import sys
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
BUCKET = "stepscope-storage-test"
KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
