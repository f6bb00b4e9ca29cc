"""The webhook's work is bounded by what it produces, on its real aiohttp handler path (`webhook.serve`, plain HTTP on
loopback, in this test's event loop).

Checks: four reviews at once of a pod under the 1 MiB body cap holding 41,920 tiny containers are admitted unchanged
with a warning naming the container cap, each answer a few hundred bytes; while they are answered, the event loop's
thread spends no more than 100 ms of CPU between two ticks of a ticker task in the same loop (CPU time of that thread,
not wall time, so that other processes on the machine do not count); a pod at the container cap is still injected; a
patch over the response bound admits the pod unchanged with a warning. The memory a real operator process spends on
the same four reviews: `test_webhook_bounds.py`.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import json
import time
import urllib.request
from typing import Any

import pytest
from test_injection import make_pod

from stepscope_contract.constants import INJECT_LABEL
from stepscope_operator.webhook import admission as webhook
from stepscope_operator.webhook.injection import InjectionConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CONTAINERS = 41_920
TICK = 0.005


def crowded_review(containers: int = CONTAINERS, uid: str = "crowd") -> bytes:
    """An AdmissionReview of a Pod CREATE (labelled for injection) with `containers` tiny containers, under the body
    cap."""
    pod = {"metadata": {"name": "p", "labels": {INJECT_LABEL: "true"}}, "spec": {"containers": []}}
    request = {"uid": uid, "kind": {"kind": "Pod"}, "operation": "CREATE", "namespace": "team-a", "object": pod}
    head, tail = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request},
                            separators=(",", ":")).split("[]")  # fmt: skip
    raw = (head + "[" + ",".join(f'{{"name":"c{i}"}}' for i in range(containers)) + "]" + tail).encode()
    assert len(raw) < webhook.MAX_REVIEW_BYTES
    return raw


def _post(url: str, body: bytes) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=120) as resp:
        return int(resp.status), resp.read()


async def _ticker(worst: list[float], stop: asyncio.Event) -> None:
    """The most CPU time the loop's thread spent between two ticks (a review answered on the loop shows here)."""
    last = time.thread_time()
    while not stop.is_set():
        await asyncio.sleep(TICK)
        now = time.thread_time()
        worst[0] = max(worst[0], now - last)
        last = now


async def test_four_crowded_pods_are_answered_small_and_off_the_loop() -> None:
    runner = await webhook.serve("127.0.0.1", 0, None, InjectionConfig())
    url = f"http://127.0.0.1:{webhook.bound_port(runner)}{webhook.POD_PATH}"
    bodies = [crowded_review(uid=f"crowd-{i}") for i in range(4)]
    worst = [0.0]
    stop = asyncio.Event()
    gc.collect()  # the collector's backlog from earlier tests in this process is not the review's work
    ticker = asyncio.create_task(_ticker(worst, stop))
    try:
        answers = await asyncio.gather(*(asyncio.to_thread(_post, url, body) for body in bodies))
    finally:
        stop.set()
        await ticker
        await runner.cleanup()
    assert worst[0] < 0.1, f"the loop's thread spent {worst[0] * 1000:.0f} ms of CPU between two ticks"
    for i, (status, raw) in enumerate(answers):
        assert status == 200
        assert len(raw) < 1024, f"an answer of {len(raw)} bytes"
        response = json.loads(raw)["response"]
        assert response["uid"] == f"crowd-{i}" and response["allowed"] is True and "patch" not in response
        assert f"{CONTAINERS} containers and init containers, over 64" in response["warnings"][0]


def _answer(pod: dict[str, Any]) -> dict[str, Any]:
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"kind": "Pod"}, "operation": "CREATE", "object": pod},
    }
    answer: dict[str, Any] = json.loads(webhook.answer(json.dumps(review).encode(), None, InjectionConfig()))
    return answer["response"]


def test_a_pod_at_the_cap_is_injected_and_one_over_it_is_not() -> None:
    at_cap = make_pod({INJECT_LABEL: "true"})
    at_cap["spec"]["containers"] += [{"name": f"c{i}", "image": "x"} for i in range(webhook.MAX_PATCHED_CONTAINERS - 2)]
    at_cap["spec"]["initContainers"] = [{"name": "init", "image": "x"}]
    response = _answer(at_cap)
    assert response["patchType"] == "JSONPatch" and "warnings" not in response
    over = make_pod({INJECT_LABEL: "true"})
    over["spec"]["containers"] += [{"name": f"c{i}", "image": "x"} for i in range(webhook.MAX_PATCHED_CONTAINERS)]
    response = _answer(over)
    assert "patch" not in response and "over 64" in response["warnings"][0]


def test_a_patch_over_the_response_bound_admits_the_pod_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    pod = make_pod({INJECT_LABEL: "true"})
    pod["spec"]["containers"][0]["env"] = [{"name": f"V{i}", "value": "x" * 64} for i in range(200)]
    patch = json.loads(base64.b64decode(_answer(pod)["patch"]))
    size = len(json.dumps(patch, separators=(",", ":")))
    monkeypatch.setattr(webhook, "MAX_PATCH_BYTES", size - 1)
    response = _answer(pod)
    assert "patch" not in response and response["allowed"] is True
    assert f"over {size - 1} bytes" in response["warnings"][0]
