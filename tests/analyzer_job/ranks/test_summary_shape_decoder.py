"""The typed, bounded decode of a node summary (summary_shape_decoder) checks what node_summary_shape's walk checks:
every list of every struct carries its cap from CAPS at its nesting level, every number its bound and every text its
length; it refuses the documents the walk refuses (lists beyond their caps, lists that do not go together, NaN,
Infinity and numbers beyond 2^53 anywhere, long texts and keys, unknown keys) and accepts an honest summary, from
which the reader builds the very model the walk's path builds. Its value count is the contract's."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from stepscope_analyzer.ranks import node_summaries
from stepscope_analyzer.ranks.node_summaries import summarise_trace
from stepscope_analyzer.ranks.summary_shape_decoder import _struct, value_bound, within_shape
from stepscope_contract import node_summary_shape
from stepscope_contract.analysis_documents import NodeSummary
from stepscope_contract.node_summary_shape import (
    CAPS,
    MAX_MEMORY_POINTS,
    MAX_SPANS_PER_STEP,
    MAX_SUMMARY_STEPS,
    MAX_TEXT_CHARS,
    NUMBER_BOUND,
    shape_error,
)

TRACE = Path(__file__).parents[1] / "fixtures" / "gloo_2rank_rank1.pt.trace.json.gz"


def _bounds(kind: Any, owner: str, field: str, level: int, seen: set[str]) -> set[str]:
    """The 'Model.field' of every list met under `kind`, each checked to carry its cap; numbers and texts checked to
    carry theirs."""
    info = msgspec.inspect
    if isinstance(kind, info.UnionType):
        return set().union(*(_bounds(t, owner, field, level, seen) for t in kind.types))
    if isinstance(kind, info.ListType):
        assert kind.max_length == CAPS[f"{owner}.{field}"][level].most, (owner, field, level)
        return {f"{owner}.{field}"} | _bounds(kind.item_type, owner, field, level + 1, seen)
    if isinstance(kind, info.FloatType | info.IntType):
        assert (kind.ge, kind.le) == (-NUMBER_BOUND, NUMBER_BOUND), (owner, field)
    elif isinstance(kind, info.StrType):
        assert kind.max_length == MAX_TEXT_CHARS, (owner, field)
    elif isinstance(kind, info.StructType):
        model = kind.cls.__name__.removeprefix("Bounded")
        assert kind.forbid_unknown_fields, model
        if model in seen:
            return set()
        seen.add(model)
        return set().union(*(_bounds(f.type, model, f.name, 0, seen) for f in kind.fields))
    else:
        assert isinstance(kind, info.BoolType | info.NoneType), (owner, field, kind)
    return set()


def test_every_list_number_and_text_carries_its_bound() -> None:
    assert _bounds(msgspec.inspect.type_info(_struct(NodeSummary, {})), "", "", 0, set()) == set(CAPS)


def _doc(summary: dict[str, object]) -> bytes:
    return json.dumps({"analyzerVersion": "1.0", "topN": 50, "rank": 0, "summary": {"rank": 0, **summary}}).encode()


BEYOND: list[dict[str, object]] = [
    {"step_phases": [{}] * (MAX_SUMMARY_STEPS + 1), "steps": {"durations_us": [1.0] * MAX_SUMMARY_STEPS}},
    {"step_spans": [[{"phase": "other", "start_us": 0, "end_us": 1}] * (MAX_SPANS_PER_STEP + 1)]},
    {"memory": {"device": "cpu", "t_ms": [1.0] * (MAX_MEMORY_POINTS + 1), "allocated_bytes": [1.0] * 241}},
    {"comm_calls": {"dur_us": [1.0] * 2000}},
    {"not_a_field": [[0] * 5000]},
    {"not_a_field": 1},
    {"call_floors": {"calls": ["a#0", "b#0"], "floor_us": [1.0, 2.0], "even_us": [1.0, 2.0], "odd_us": [1.0]}},
    {"steps": {"durations_us": [1.0, 2.0]}, "step_phases": [{}]},
    {"memory": {"device": "cpu", "t_ms": [0.0, 1.0], "allocated_bytes": [1.0]}},
    {"steps": {"durations_us": [1.0, 1e300, 2.0]}},
    {"steps": {"median_us": -1e300}},
    {"gpu_metrics": {"series": {"t_s": [0.0, 1.0], "power_w": [None, 1e300]}}},
    {"process_groups": [{"name": "0", "ranks": [2**60]}]},
    {"top_kernels": [{"name": "k" * (MAX_TEXT_CHARS + 1)}]},
    {"k" * (MAX_TEXT_CHARS + 1): 1},
]


@pytest.mark.parametrize("summary", BEYOND, ids=range(len(BEYOND)))
def test_what_the_walk_refuses_the_decoder_refuses(summary: dict[str, object]) -> None:
    data = _doc(summary)
    assert shape_error(json.loads(data), NodeSummary) is not None or "not_a_field" in summary  # the model refuses it
    assert not within_shape(data)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_are_refused(literal: str) -> None:
    assert not within_shape(_doc({"steps": {"durations_us": [1.0, 2.0]}}).replace(b"2.0", literal.encode()))


@functools.cache
def _honest() -> bytes:
    node = summarise_trace(TRACE.read_bytes(), 1, 50, "cap-1")
    return node.model_dump_json(by_alias=True, exclude_none=True).encode()


def test_an_honest_summary_is_within_its_shape_and_built_as_the_walk_builds_it() -> None:
    data = _honest()
    assert within_shape(data)
    assert shape_error(json.loads(data), NodeSummary) is None
    assert node_summaries._model(data) == NodeSummary.model_validate(json.loads(data))
    at_cap = _doc({"steps": {"durations_us": [1.0] * MAX_SUMMARY_STEPS}, "step_phases": [{}] * MAX_SUMMARY_STEPS})
    assert within_shape(at_cap)


def test_what_the_decoder_refuses_is_still_read_with_the_walks_reason() -> None:
    with pytest.raises(ValueError, match=r"summary/step_phases holds 1,025 items, more than 1,024"):
        node_summaries._model(_doc({"step_phases": [{}] * (MAX_SUMMARY_STEPS + 1)}))
    with pytest.raises(ValueError, match="NaN in the document: numbers must be finite"):
        node_summaries._model(_doc({"steps": {"median_us": 1.5}}).replace(b"1.5", b"NaN"))
    snake = json.loads(_honest())
    snake["analyzer_version"] = snake.pop("analyzerVersion")  # a field by its name: within the shape, not the decoder's
    assert not within_shape(json.dumps(snake).encode())
    assert node_summaries._model(json.dumps(snake).encode()) == NodeSummary.model_validate(snake)


def test_the_value_count_is_the_contracts() -> None:
    for text in (b"", b"1", b'{"a":[1,2,{"b":[[],{}]}],"c":"x,y"}', _honest()):
        assert value_bound(text) == node_summary_shape.value_bound(text)
