"""`GET /v1/steps` parses its query strictly: every `last` that is not a plain decimal number within
1..MAX_STEPS_PER_REQUEST answers 400 with the rule, never 500 (Unicode digits such as '²' included); a good one
answers 200 with a PodSteps, here of a hook folder without rings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from stepscope_contract.step_telemetry import MAX_STEPS_PER_REQUEST, PodSteps
from stepscope_sidecar.step_routes import add_step_telemetry

pytestmark = pytest.mark.integration


@pytest.fixture
async def base_url(tmp_path: Path) -> AsyncIterator[str]:
    app = web.Application()
    add_step_telemetry(app, tmp_path, "pod-a", CollectorRegistry())
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


@pytest.mark.parametrize("last", ["²", "%C2%B2", "٣", "\uff11\uff12", "0", "-1", "+5", " 5", "1e3", "", "9" * 4000])
async def test_a_bad_last_answers_400(base_url: str, last: str) -> None:
    async with aiohttp.ClientSession() as session, session.get(f"{base_url}/v1/steps?last={last}") as resp:
        text = await resp.text()
    assert resp.status == 400, text
    assert f"1..{MAX_STEPS_PER_REQUEST}" in (resp.reason or "")


@pytest.mark.parametrize("last", ["1", "0256", str(MAX_STEPS_PER_REQUEST)])
async def test_a_good_last_answers_the_steps(base_url: str, last: str) -> None:
    async with aiohttp.ClientSession() as session, session.get(f"{base_url}/v1/steps?last={last}") as resp:
        body = await resp.read()
    assert resp.status == 200
    assert PodSteps.model_validate_json(body) == PodSteps(pod="pod-a", ranks=[])
