"""The typed, bounded decode of a node summary (summary_shape_decoder) checks what node_summary_shape's walk checks:
every list of every model carries its cap from CAPS at its nesting level, every number its bound and every text its
length, in nested models too (their own validators are not reused); it refuses the documents the walk refuses (lists
beyond their caps, lists that do not go together, NaN, Infinity and numbers beyond 2^53 anywhere, long texts and keys,
unknown keys) and accepts an honest summary, from which the reader builds the very model the walk's path builds. Its
value count is the contract's."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from stepscope_analyzer.ranks import node_summaries
from stepscope_analyzer.ranks.node_summaries import summarise_trace
from stepscope_analyzer.ranks.summary_shape_decoder import PROBE, bounded_schema, bounded_validator, value_bound
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
from stepscope_contract.report import RankReport

TRACE = Path(__file__).parents[1] / "fixtures" / "gloo_2rank_rank1.pt.trace.json.gz"


def _bounds(schema: Any, owner: str, field: str, level: int) -> set[str]:
    """The 'Model.field' of every list met in the core `schema`, each checked to carry its cap; numbers and texts
    checked to carry theirs."""
    if isinstance(schema, list):
        return set().union(set(), *(_bounds(s, owner, field, level) for s in schema))
    if not isinstance(schema, dict):
        return set()
    kind = schema.get("type")
    found: set[str] = set()
    if kind == "model":
        owner, field, level = schema["cls"].__name__, "", 0
        assert schema["config"]["extra_fields_behavior"] == "forbid", owner
    elif kind == "model-field":
        level = 0
    elif kind == "list":
        assert schema["max_length"] <= CAPS[f"{owner}.{field}"][level].most, (owner, field, level)
        found.add(f"{owner}.{field}")
        return found | _bounds(schema["items_schema"], owner, field, level + 1)
    elif kind in ("float", "int"):
        assert schema["ge"] >= -NUMBER_BOUND and schema["le"] <= NUMBER_BOUND, (owner, field)
        assert kind == "int" or schema["allow_inf_nan"] is False, (owner, field)
    elif kind == "str":
        assert schema["max_length"] <= MAX_TEXT_CHARS, (owner, field)
    if kind == "model-fields":
        return set().union(set(), *(_bounds(f, owner, name, 0) for name, f in schema["fields"].items()))
    return set().union(found, *(_bounds(v, owner, field, level) for k, v in schema.items() if k not in _NOT_SCHEMA))


_NOT_SCHEMA = {"cls", "metadata", "serialization", "config", "function", "default", "default_factory", "members"}


def test_every_list_number_and_text_carries_its_bound() -> None:
    schema, models = bounded_schema(NodeSummary)
    assert _bounds(schema, "", "", 0) == set(CAPS)
    assert {m.__name__ for m in models} >= {"NodeSummary", "RankReport", "RankManifest", "StepStats"}


def test_the_bounds_apply_in_nested_models() -> None:
    """pydantic-core compiles the bounded schema's models anew (not their own validators reused): the probe, a
    number past NUMBER_BOUND in a nested model, is refused, and the same document within bounds is not."""
    validator = bounded_validator()
    assert validator is not None
    with pytest.raises(ValidationError):
        validator.validate_json(json.dumps(PROBE))
    within = json.loads(json.dumps(PROBE).replace("1e+300", "1.0"))
    assert validator.validate_json(json.dumps(within)) == NodeSummary.model_validate(within)
    assert RankReport.model_validate({"rank": 0, "steps": {"durations_us": [1e300]}})  # the models themselves unchanged


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


def within_shape(data: bytes) -> bool:
    validator = bounded_validator()
    assert validator is not None
    try:
        validator.validate_json(data)
    except ValidationError:
        return False
    return True


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
    wrong = {**json.loads(_honest()), "topN": 0}  # within the shape, refused by the model
    with pytest.raises(ValueError, match="not a node summary: 1 validation error for NodeSummary\ntopN"):
        node_summaries._model(json.dumps(wrong).encode())


def test_the_value_count_is_the_contracts() -> None:
    for text in (b"", b"1", b'{"a":[1,2,{"b":[[],{}]}],"c":"x,y"}', _honest()):
        assert value_bound(text) == node_summary_shape.value_bound(text)
