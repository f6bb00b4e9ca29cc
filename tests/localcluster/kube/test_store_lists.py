"""The store's lists: list_objects hands out copies; list_rendered serialises the stored objects under the lock,
with the same selection and order."""

from __future__ import annotations

import json

import pytest

from stepscope_local.kube.store import Store

pytestmark = pytest.mark.unit


def _pod(name: str, app: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns", "labels": {"app": app}}}


def test_rendered_lists_match_copied_ones_and_copies_stay_apart() -> None:
    store = Store()
    pods = store.type_for_kind("v1", "Pod")
    for i, app in enumerate(["a", "b", "a", "a"]):
        store.create(pods, "ns", _pod(f"p{3 - i}", app))  # created in reverse name order: the lists keep creation order
    copied, rv = store.list_objects(pods, "ns", "app=a")
    rendered = store.list_rendered(pods, "ns", "app=a", None, lambda items, v: (json.dumps(items), v))
    assert [o["metadata"]["name"] for o in copied] == ["p3", "p1", "p0"]
    assert (json.loads(rendered[0]), rendered[1]) == (copied, rv)
    copied[0]["metadata"]["labels"]["app"] = "changed"  # a caller's copy is its own
    assert store.list_objects(pods, "ns", "app=a")[0][0]["metadata"]["labels"] == {"app": "a"}
    assert store.list_rendered(pods, "other", None, None, lambda items, _: items) == []
