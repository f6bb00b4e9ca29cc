"""A node summary's declared shape (node_summary_shape): every list field of its models has a cap (a new list field
without one fails here), the caps refuse what is beyond them with the field and the cap's name, numbers must be
finite and bounded anywhere in the document, texts are bounded, and the value count made on the bytes bounds what
decoding builds. A summary is bound to its trace and capture (NodeSummary.binding_error)."""

from __future__ import annotations

import hashlib
import json
import typing

import pytest
from pydantic import BaseModel

from stepscope_contract.analysis_documents import NodeSummary
from stepscope_contract.manifest import ArtifactFile, RankManifest
from stepscope_contract.node_summary_shape import (
    CAPS,
    MAX_MEMORY_POINTS,
    MAX_SPANS_PER_STEP,
    MAX_SUMMARY_STEPS,
    model_shape,
    shape_error,
    value_bound,
)
from stepscope_contract.report import RankReport
from stepscope_contract.wire import CaptureState


def _list_fields(model: type[BaseModel], seen: set[type[BaseModel]]) -> set[str]:
    if model in seen:
        return set()
    seen.add(model)
    found: set[str] = set()
    for name, info in model.model_fields.items():
        pending = [info.annotation]
        while pending:
            annotation = pending.pop()
            if typing.get_origin(annotation) is list:
                found.add(f"{model.__name__}.{name}")
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                found |= _list_fields(annotation, seen)
            pending.extend(typing.get_args(annotation))
    return found


def test_every_list_of_a_node_summary_has_a_declared_cap() -> None:
    assert _list_fields(NodeSummary, set()) == set(CAPS)
    model_shape(NodeSummary)  # builds: every nesting level has its cap


def _doc(summary: dict[str, object]) -> dict[str, object]:
    return {"analyzerVersion": "1.0", "topN": 50, "rank": 0, "summary": {"rank": 0, **summary}}


def test_lists_beyond_their_caps_are_refused_with_the_field_and_the_cap() -> None:
    steps = {"durations_us": [1.0] * MAX_SUMMARY_STEPS}
    assert shape_error(_doc({"step_phases": [{}] * MAX_SUMMARY_STEPS, "steps": steps}), NodeSummary) is None
    why = shape_error(_doc({"step_phases": [{}] * (MAX_SUMMARY_STEPS + 1), "steps": steps}), NodeSummary)
    assert why == f"/summary/step_phases holds {MAX_SUMMARY_STEPS + 1:,} items, more than 1,024 (MAX_SUMMARY_STEPS)"
    spans = [[{"phase": "other", "start_us": 0, "end_us": 1}] * (MAX_SPANS_PER_STEP + 1)]
    assert "(MAX_SPANS_PER_STEP)" in str(shape_error(_doc({"step_spans": spans}), NodeSummary))
    memory = {"device": "cpu", "t_ms": [1.0] * (MAX_MEMORY_POINTS + 1), "allocated_bytes": [1.0] * 241}
    assert "/summary/memory/t_ms holds 241 items" in str(shape_error(_doc({"memory": memory}), NodeSummary))
    calls = {"dur_us": [1.0] * 2000}
    assert "(MAX_COMM_CALLS)" in str(shape_error(_doc({"comm_calls": calls}), NodeSummary))
    unknown = shape_error(_doc({"not_a_field": [[0] * 5000]}), NodeSummary)  # the model refuses it afterwards
    assert "not_a_field/0 holds 5,000 items" in str(unknown)


def test_lists_that_go_together_have_one_length() -> None:
    floors = {"calls": ["a#0", "b#0"], "floor_us": [1.0, 2.0], "even_us": [1.0, 2.0], "odd_us": [1.0]}
    why = shape_error(_doc({"call_floors": floors}), NodeSummary)
    assert why == "/summary/call_floors/odd_us holds 1 items, /summary/call_floors/calls 2: they go together"
    steps = {"durations_us": [1.0, 2.0], "numbers": []}
    assert shape_error(_doc({"steps": steps, "step_phases": [{}, {}], "step_cpu_wait": []}), NodeSummary) is None
    assert "step_phases holds 1 items" in str(shape_error(_doc({"steps": steps, "step_phases": [{}]}), NodeSummary))
    memory = {"device": "cpu", "t_ms": [0.0, 1.0], "allocated_bytes": [1.0]}
    assert "allocated_bytes holds 1 items" in str(shape_error(_doc({"memory": memory}), NodeSummary))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 1e300])
def test_numbers_must_be_finite_and_bounded_anywhere(bad: float) -> None:
    for where in (
        {"steps": {"durations_us": [1.0, bad, 2.0]}},
        {"steps": {"median_us": bad}},
        {"memory": {"device": "cuda", "t_ms": [0.0], "allocated_bytes": [bad]}},
        {"gpu_metrics": {"series": {"t_s": [0.0, 1.0], "power_w": [None, bad]}}},
        {"unknown": {"deep": [[bad]]}},
    ):
        why = shape_error(_doc(where), NodeSummary)
        assert why is not None and ("finite" in why or "NUMBER_BOUND" in why), (where, why)
    assert shape_error(_doc({"steps": {"durations_us": [1.0, 2.0], "median_us": 1.5}}), NodeSummary) is None


def test_texts_are_bounded() -> None:
    long = "k" * 9000
    assert "MAX_TEXT_CHARS" in str(shape_error(_doc({"top_kernels": [{"name": long}]}), NodeSummary))
    assert "MAX_TEXT_CHARS" in str(shape_error(_doc({long: 1}), NodeSummary))


def test_the_value_count_bounds_what_decoding_builds() -> None:
    for text in ('{"a":[1,2,{"b":[[],{}]}],"c":"x,y"}', "[]", "1", '{"a":{}}', "[[[[[]]]]]"):
        built = 0
        pending = [json.loads(text)]
        while pending:
            value = pending.pop()
            built += 1
            pending.extend(value.values() if isinstance(value, dict) else value if isinstance(value, list) else [])
        assert value_bound(text.encode()) >= built, text


def _bound(trace: bytes = b"trace", capture: str = "cap-1") -> NodeSummary:
    return NodeSummary(analyzer_version="1.0", top_n=50, rank=0, summary=RankReport(rank=0), capture_id=capture,
                       trace_sha256=hashlib.sha256(trace).hexdigest(), trace_size=len(trace))  # fmt: skip


def _manifest(trace: bytes = b"trace", capture: str = "cap-1") -> RankManifest:
    recorded = ArtifactFile(name="trace.json.gz", size=len(trace), sha256=hashlib.sha256(trace).hexdigest())
    return RankManifest(capture_id=capture, namespace="ns", session="s", rank=0, state=CaptureState.UPLOADED,
                        files=[recorded])  # fmt: skip


def test_a_summary_is_bound_to_its_trace_and_capture() -> None:
    assert _bound().binding_error(_manifest(), "trace.json.gz", "cap-1") is None
    assert _bound().binding_error(_manifest(), "trace.json.gz", None) is None  # the session's id unknown
    assert "rank's manifest records 5 bytes" in str(_bound(b"other").binding_error(_manifest(), "trace.json.gz", None))
    replayed = _bound(capture="cap-0")
    assert "made in capture cap-0, this session's is cap-1" in str(replayed.binding_error(_manifest(), "trace.json.gz",
                                                                                           "cap-1"))  # fmt: skip
    assert "manifest says cap-1" in str(replayed.binding_error(_manifest(), "trace.json.gz", None))
    assert "no manifest" in str(_bound().binding_error(None, "trace.json.gz", None))
    assert "records no other.json.gz" in str(_bound().binding_error(_manifest(), "other.json.gz", None))
    unbound = _bound().model_copy(update={"trace_sha256": None})
    assert "names no trace SHA-256" in str(unbound.binding_error(_manifest(), "trace.json.gz", None))
