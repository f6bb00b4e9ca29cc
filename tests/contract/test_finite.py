"""No status write carries NaN or Infinity: the session's status patch (both writers use it) and any JSON-shaped
document through `finite_wire` come out finite, whatever floats went in; finite values pass unchanged."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stepscope_contract.finite import finite_wire, non_finite_paths
from stepscope_contract.session import ProfileSessionStatus, ReportSummary
from stepscope_contract.status_wire import status_patch

pytestmark = pytest.mark.unit


def test_a_summary_with_nan_and_infinity_is_written_finite() -> None:
    summary = ReportSummary(median_step_ms=float("nan"), p90_step_ms=float("inf"), slowdown_percent=12.5)
    patch = status_patch(ProfileSessionStatus(), ProfileSessionStatus(summary=summary))
    assert non_finite_paths(patch) == []
    wire = json.loads(json.dumps(patch, allow_nan=False))
    assert wire["summary"]["slowdownPercent"] == 12.5
    assert wire["summary"]["medianStepMs"] is None and wire["summary"]["p90StepMs"] is None


def test_non_finite_paths_name_where() -> None:
    doc = {"a": [1.0, float("nan")], "b": {"c": float("-inf")}, "d": "NaN"}
    assert non_finite_paths(doc) == ["/a/1", "/b/c"]
    assert finite_wire(doc) == {"a": [1.0], "b": {"c": None}, "d": "NaN"}


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=5), inner, max_size=5),
    max_leaves=30,
)


@pytest.mark.fuzz
@given(JSON)
def test_any_document_comes_out_finite(doc: object) -> None:
    out = finite_wire(doc)
    assert non_finite_paths(out) == []
    json.dumps(out, allow_nan=False)
    if not non_finite_paths(doc):
        assert out == doc or (isinstance(doc, tuple) and out == list(doc))


def test_finite_values_pass_unchanged() -> None:
    doc = {"x": [0.0, -1.5, 1e308], "y": {"z": 3}}
    assert finite_wire(doc) == doc
    assert all(math.isfinite(v) for v in doc["x"])  # type: ignore[index]
