"""Shared test fixtures: repository paths and the HTA test traces committed with the tests
(tests/analyzer_job/fixtures/hta, see its README); hypothesis profiles (`make fuzz` selects the long one with
HYPOTHESIS_PROFILE=fuzz); on pytest-xdist workers, the modules in tier order (see `pytest_collection_modifyitems`)."""

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


TIERS = ("e2e", "integration")
"""the markers of the modules that wait on real processes, longest first; every other module comes after them"""


def _tier(item: pytest.Item) -> int:
    return next((i for i, name in enumerate(TIERS) if item.get_closest_marker(name)), len(TIERS))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`make test` hands out whole modules in collection order, --no-loadscope-reorder), the
    modules of real clusters and processes go first and the many short unit modules last, so that the workers
    run out of work together instead of one starting a minute-long module while the others have finished. A module
    keeps its tests together and in their order; modules of one tier keep their collection order."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    tier: dict[str, int] = {}
    for item in items:
        path = item.nodeid.split("::")[0]  # the module, as --dist loadfile groups it
        tier[path] = min(tier.get(path, len(TIERS)), _tier(item))
    items.sort(key=lambda item: tier[item.nodeid.split("::")[0]])
