"""Shared test fixtures: repository paths and the HTA test traces committed with the tests
(tests/analyzer_job/fixtures/hta, see its README); hypothesis profiles (`make fuzz` selects the long one with
HYPOTHESIS_PROFILE=fuzz)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("fuzz", max_examples=5000, deadline=None, suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

REPO_ROOT = Path(__file__).resolve().parent.parent
HTA_TRACES = REPO_ROOT / "tests" / "analyzer_job" / "fixtures" / "hta"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def hta_traces() -> Path:
    """Real Kineto GPU traces (HTA's public test data, some cut to their first steps) and HTA 0.5's outputs on them
    (golden/<trace>/)."""
    return HTA_TRACES
