"""Property tests (hypothesis) of the admission webhook's decoding: any body (bent AdmissionReviews, any JSON, raw
bytes) is decoded and answered without an exception; the answer always admits the pod; a patch, when there is one,
is a base64 JSON list of operations; the answer's uid is the request's when the request had a string uid."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepscope_operator.webhook.admission import decode_review, review_response
from stepscope_operator.webhook.injection import InjectionConfig
from stepscope_testing.hostile_inputs import admission_review, encoded, json_values

pytestmark = [pytest.mark.unit, pytest.mark.fuzz]
QUICK = settings(max_examples=max(20, settings.default.max_examples // 3))
CONFIG = InjectionConfig()


def _answer(raw: bytes, namespace_labels: dict[str, str] | None) -> dict[str, object]:
    body = decode_review(raw)
    if isinstance(body, str):
        return {"allowed": True, "warnings": [body]}
    response = review_response(body, namespace_labels, CONFIG)["response"]
    assert isinstance(response, dict)
    return response


@QUICK
@given(
    encoded(admission_review()) | encoded(json_values),
    st.sampled_from([None, {"stepscope.dev/inject": "true"}]),
)
def test_any_body_is_answered_and_the_pod_admitted(raw: bytes, labels: dict[str, str] | None) -> None:
    response = _answer(raw, labels)
    assert response["allowed"] is True
    if "patch" in response:
        ops = json.loads(base64.b64decode(str(response["patch"])))
        assert isinstance(ops, list) and all(isinstance(op, dict) and "op" in op for op in ops)


@QUICK
@given(admission_review())
def test_the_uid_is_answered(review: dict[str, object]) -> None:
    raw = json.dumps(review).encode()
    body = decode_review(raw)
    if isinstance(body, str):
        return
    uid = body.get("request", {}).get("uid")
    response = review_response(body, None, CONFIG)["response"]
    assert response["allowed"] is True
    if isinstance(uid, str) and uid:
        assert response["uid"] == uid
