"""Property-based tests (hypothesis) of the contract:
- the storage-key sanitiser: only safe characters, no dot segments, bounded length, deterministic, distinct inputs
  stay distinct; children of a location never climb out of it; parsed URIs never hold '.' or '..' segments;
- the wire models: arbitrary JSON gives a model or a ValidationError; generated requests survive a round trip;
- the CR validation: arbitrary specs give a model or a ValidationError with a readable message, and every spec the
  models accept is accepted by the generated CRD schema as well."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from pydantic import ValidationError

from stepscope_contract.crd import build_crd
from stepscope_contract.errors import describe_validation_error
from stepscope_contract.session import ProfileSessionSpec
from stepscope_contract.storage import (
    MAX_SEGMENT,
    StorageUriError,
    parse_storage_uri,
    sanitize_segment,
    session_location,
)
from stepscope_contract.tokens import namespace_token
from stepscope_contract.wire import CaptureRequest, CaptureStatus, HookRequest, HookState, RankMeta

pytestmark = [pytest.mark.unit, pytest.mark.fuzz]
SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=25,
)


@given(st.text(max_size=300))
def test_sanitized_segments_are_safe_and_bounded(name: str) -> None:
    out = sanitize_segment(name)
    assert out and set(out) <= SAFE and not out.startswith(".") and len(out) <= MAX_SEGMENT
    assert out not in (".", "..") and sanitize_segment(name) == out


@given(st.text(max_size=120), st.text(max_size=120))
def test_distinct_names_stay_distinct(a: str, b: str) -> None:
    assume(a != b)
    assert sanitize_segment(a) != sanitize_segment(b)


@given(
    st.sampled_from(["s3://bucket/base", "oss://bucket", "file:///data/x"]), st.text(max_size=80), st.text(), st.text()
)
def test_a_session_folder_never_climbs_out_of_its_base(base: str, namespace: str, name: str, uid: str) -> None:
    root = parse_storage_uri(base)
    folder = session_location(root, namespace, name, uid)
    below = folder.prefix[len(root.prefix) :].strip("/").split("/")
    assert folder.bucket == root.bucket and folder.prefix.startswith(root.prefix)
    assert len(below) == 2 and all(s not in ("", ".", "..") for s in below)
    assert parse_storage_uri(folder.uri) == folder


@given(st.text(max_size=60))
def test_parsed_uris_hold_no_dot_segments(rest: str) -> None:
    for scheme in ("s3://", "oss://", "file://", ""):
        try:
            location = parse_storage_uri(scheme + rest)
        except StorageUriError:
            continue
        assert all(s not in (".", "..") for s in location.prefix.split("/"))
        assert parse_storage_uri(location.uri) == location


@given(json_values)
def test_wire_models_accept_or_refuse_any_json(value: Any) -> None:
    for model in (CaptureRequest, CaptureStatus, HookRequest, HookState, RankMeta):
        for candidate in (value, {"captureId": "c", "options": value, "destination": value}):
            with contextlib.suppress(ValidationError):
                model.model_validate_json(json.dumps(candidate))


capture_requests = st.builds(
    lambda cid, ns, name, uid, steps, skip, rank, uri: CaptureRequest.model_validate(
        {
            "captureId": cid,
            "session": {"namespace": ns, "name": name, "uid": uid},
            "rank": rank,
            "options": {"steps": steps, "skipSteps": skip, "activities": ["cpu"]},
            "destination": {"sessionUri": uri, "addressingStyle": "path"},
        }
    ),
    st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?\Z"),
    st.text(min_size=1, max_size=63),
    st.text(min_size=1, max_size=100),
    st.text(max_size=64),
    st.integers(1, 1000),
    st.integers(0, 100_000),
    st.none() | st.integers(0, 10**6),
    st.text(max_size=200),
)


@given(capture_requests)
def test_capture_requests_survive_the_wire(request: CaptureRequest) -> None:
    assert CaptureRequest.model_validate_json(json.dumps(request.wire())) == request


spec_like = st.fixed_dictionaries(
    {},
    optional={
        "targets": st.one_of(
            json_values,
            st.fixed_dictionaries(
                {
                    "selector": st.fixed_dictionaries(
                        {"matchLabels": st.dictionaries(st.text(max_size=5), st.text(max_size=5))}
                    )
                },
                optional={"ranks": st.text(max_size=12), "maxTargets": st.integers(-5, 5000)},
            ),
        ),
        "capture": st.one_of(
            json_values,
            st.fixed_dictionaries(
                {},
                optional={
                    "steps": st.integers(-2, 1002),
                    "skipSteps": st.integers(-2, 100_002),
                    "activities": st.lists(st.sampled_from(["cpu", "cuda", "tpu"]), max_size=3),
                    "timeoutSeconds": st.integers(0, 100_000),
                },
            ),
        ),
        "storage": st.one_of(
            json_values,
            st.fixed_dictionaries(
                {
                    "uri": st.sampled_from(
                        ["s3://bucket/p", "oss://bkt", "file:///d", "s3://x", "gs://b", "s3://b/../x"]
                    )
                },
                optional={"endpoint": st.text(max_size=20), "deleteOnSessionDelete": st.booleans()},
            ),
        ),
        "ttlSecondsAfterFinished": st.integers(-1, 10**6),
    },
)


def _crd_spec_schema() -> dict[str, Any]:
    schema: dict[str, Any] = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


CRD_SPEC = jsonschema.Draft7Validator(_crd_spec_schema())


@given(spec_like)
def test_cr_validation_accepts_or_explains_and_agrees_with_the_crd(raw: dict[str, Any]) -> None:
    try:
        spec = ProfileSessionSpec.model_validate(raw)
    except ValidationError as exc:
        assert describe_validation_error(exc)  # a readable message, never an exception
        return
    wire = spec.wire()
    assert ProfileSessionSpec.model_validate(wire) == spec
    assert not list(CRD_SPEC.iter_errors(wire)), [e.message for e in CRD_SPEC.iter_errors(wire)]


@given(st.text(min_size=1, max_size=40), st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?\Z"))
def test_namespace_tokens_differ_per_namespace_and_hide_the_master(master: str, namespace: str) -> None:
    token = namespace_token(master, namespace)
    assert len(token) == 64 and set(token) <= set("0123456789abcdef") and token != master
    assert token != namespace_token(master, namespace + "x") and token != namespace_token(master + "x", namespace)
