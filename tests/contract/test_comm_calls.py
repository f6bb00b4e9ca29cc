"""A rank summary's communication calls are parallel lists: one that says otherwise (a node summary written by a
broken or hostile sidecar) is refused when read, with the reason, rather than half read by the matching."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from stepscope_contract.report import MAX_COMM_CALLS, CommCalls, RankReport

pytestmark = pytest.mark.unit

GOOD: dict[str, Any] = {
    "ops": ["allreduce", "recv"],
    "groups": ["0:default_pg"],
    "op_index": [0, 1],
    "group_index": [0, -1],
    "peer": [-1, 3],
    "step": [4, 4],
    "start_us": [0.0, 120.0],
    "dur_us": [100.0, 20.0],
}


def test_a_well_formed_list_of_calls_is_read() -> None:
    assert len(CommCalls.model_validate(GOOD).dur_us) == 2
    assert CommCalls.model_validate({**GOOD, "start_us": [], "toward": [0, 1]}).toward == [0, 1]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"peer": [-1]}, "one entry per call"),
        ({"start_us": [0.0]}, "or none"),
        ({"toward": [0, 2]}, r"toward is -1, 0 or \+1"),
        ({"op_index": [0, 2]}, "outside ops"),
        ({"group_index": [1, -1]}, "outside groups"),
        ({"dur_us": [100.0, -1.0]}, "negative"),
    ],
)
def test_a_malformed_list_of_calls_is_refused_with_the_reason(change: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        CommCalls.model_validate({**GOOD, **change})


def test_more_calls_than_the_bound_are_refused() -> None:
    n = MAX_COMM_CALLS + 1
    many = {"ops": ["allreduce"], "op_index": [0] * n, "group_index": [-1] * n, "peer": [-1] * n, "step": [0] * n}
    with pytest.raises(ValidationError, match="more than MAX_COMM_CALLS"):
        CommCalls.model_validate({**many, "dur_us": [1.0] * n})


@given(
    st.fixed_dictionaries(
        {k: st.lists(st.integers(-3, 3), max_size=4) for k in ("op_index", "group_index", "peer", "step", "toward")}
        | {"dur_us": st.lists(st.floats(-1.0, 10.0), max_size=4), "ops": st.lists(st.text(max_size=3), max_size=3)}
    )
)
def test_a_list_of_calls_that_is_read_holds_one_entry_per_call(calls: dict[str, Any]) -> None:
    try:
        read = RankReport.model_validate({"rank": 0, "comm_calls": calls}).comm_calls
    except ValidationError:
        return
    assert read is not None
    n = len(read.dur_us)
    assert len(read.op_index) == len(read.group_index) == len(read.peer) == len(read.step) == n
    assert all(0 <= i < len(read.ops) for i in read.op_index) and all(d >= 0 for d in read.dur_us)
