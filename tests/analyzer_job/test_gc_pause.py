"""The collector is off inside `paused()` and back as it was after it, whether the block ends or raises."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from stepscope_analyzer.gc_pause import paused

pytestmark = pytest.mark.unit


@pytest.fixture
def collector() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    if enabled:
        gc.enable()
    else:
        gc.disable()


@pytest.mark.parametrize("before", [True, False])
@pytest.mark.usefixtures("collector")
def test_paused_turns_collection_off_and_restores_it(before: bool) -> None:
    gc.enable() if before else gc.disable()
    with paused():
        assert not gc.isenabled()
    assert gc.isenabled() is before


@pytest.mark.usefixtures("collector")
def test_a_failing_block_restores_it_too() -> None:
    gc.enable()
    with pytest.raises(ValueError, match="boom"), paused():
        raise ValueError("boom")
    assert gc.isenabled()
