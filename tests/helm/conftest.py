"""Helm chart fixtures: the pinned helm binary must be there (`make tools`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helm_chart import HELM


@pytest.fixture(scope="session", autouse=True)
def helm_binary() -> Path:
    if not HELM.is_file():
        pytest.fail(f"{HELM} is missing: run `make tools` (the pinned helm binary)")
    return HELM
