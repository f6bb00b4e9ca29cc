"""Pulls the step telemetry of a trigger's target pods from their sidecars (`GET /v1/steps`, contract
step_telemetry.PodSteps), with the token of each pod's namespace derived from the master (as the capture requests),
bounded concurrency and a timeout per pod. No Prometheus server is involved: the operator reads the sidecars it
already talks to.

Replies are read whole (every segment until the end of the body) up to MAX_BODY per pod, and all the replies of one
evaluation together up to MAX_TOTAL_BYTES; a parsed reply may hold no more steps per rank than were asked, and all
of them together at most MAX_TOTAL_VALUES numbers (a number costs ~32 bytes parsed, however short its text). Pods
beyond a bound are failures that name it, never memory."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import aiohttp
from pydantic import ValidationError

from stepscope_contract.constants import AUTH_SCHEME, SIDECAR_API_PREFIX
from stepscope_contract.step_telemetry import MAX_STEPS_PER_REQUEST, PodSteps, RankSteps
from stepscope_contract.tokens import namespace_token
from stepscope_operator.session.targets import Target

MAX_BODY = 8 * 1024 * 1024  # a pod's reply: 256 ranks x 2048 steps would be more; the sidecar is asked for less
MAX_TOTAL_BYTES = 16 * 1024 * 1024  # every pod's reply of one evaluation together, as read
MAX_TOTAL_VALUES = 2_000_000  # every pod's step values of one evaluation together, as parsed (~64 MiB)
READ_CHUNK = 64 * 1024


class BodyTooLarge(Exception):
    """A reply beyond a bound; the message names it."""


@dataclass
class ByteBudget:
    """Bytes (as read) and step values (as parsed) the replies of one evaluation may still take."""

    left: int
    values_left: int

    def take(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise BodyTooLarge(f"replies over {MAX_TOTAL_BYTES} bytes in one evaluation; this pod's not read")

    def take_values(self, reply: PodSteps, last: int) -> None:
        """Charge a parsed reply; refuse one with more steps per rank than asked, or beyond the values left."""
        values = 0
        for steps in reply.ranks:
            lengths = [len(v) for v in (steps.ended_at, steps.duration_ms, steps.backward_ms, steps.data_wait_ms)]
            if max(lengths, default=0) > last or len(steps.profiled) > last:
                raise BodyTooLarge(f"rank {steps.rank} has more than the {last} steps asked")
            values += sum(lengths) + len(steps.profiled)
        self.values_left -= values
        if self.values_left < 0:
            raise BodyTooLarge(f"replies over {MAX_TOTAL_VALUES} step values in one evaluation; this pod's not used")


async def read_body(content: aiohttp.StreamReader, cap: int, budget: ByteBudget) -> bytes:
    """The whole body (every segment, to its end), refusing more than `cap` bytes or more than the budget left."""
    parts: list[bytes] = []
    size = 0
    while True:
        chunk = await content.read(READ_CHUNK)
        if not chunk:
            return b"".join(parts)
        size += len(chunk)
        if size > cap:
            raise BodyTooLarge(f"reply larger than {cap} bytes")
        budget.take(len(chunk))
        parts.append(chunk)


@dataclass(frozen=True)
class Pull:
    """What the target pods' sidecars said: every rank's steps, and the pods that did not answer (and why)."""

    ranks: tuple[RankSteps, ...] = ()
    answered: int = 0
    failures: dict[str, str] = field(default_factory=dict)  # pod -> why

    def describe_failures(self, limit: int = 3) -> str:
        parts = [f"{pod}: {why}" for pod, why in list(self.failures.items())[:limit]]
        more = len(self.failures) - limit
        return "; ".join(parts) + (f" and {more} more" if more > 0 else "")


class TelemetryClient:
    def __init__(self, master: str, *, concurrency: int = 64, timeout: float = 5.0) -> None:
        self._master = master
        self._semaphore = asyncio.Semaphore(concurrency)
        self._timeout = aiohttp.ClientTimeout(total=timeout, connect=min(timeout, 3.0))
        self._concurrency = concurrency
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> TelemetryClient:
        connector = aiohttp.TCPConnector(limit=self._concurrency)
        self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def _one(self, target: Target, last: int, budget: ByteBudget) -> PodSteps | str:
        assert self._session is not None, "use TelemetryClient as an async context manager"
        url = f"{target.base_url}{SIDECAR_API_PREFIX}/steps"
        headers = {"Authorization": f"{AUTH_SCHEME} {namespace_token(self._master, target.namespace)}"}
        try:
            async with (
                self._semaphore,
                self._session.get(url, params={"last": str(last)}, headers=headers) as resp,
            ):
                if resp.status != 200:
                    head = await resp.content.read(200)
                    return f"sidecar answered {resp.status}: {head[:200].decode(errors='replace')}"
                body = await read_body(resp.content, MAX_BODY, budget)
            reply = PodSteps.model_validate_json(body)
            del body
            budget.take_values(reply, last)
            return reply
        except BodyTooLarge as exc:
            return str(exc)
        except ValidationError as exc:
            return f"invalid reply: {exc.errors()[0]['msg']}"
        except (aiohttp.ClientError, TimeoutError) as exc:
            return f"unreachable at {url} ({type(exc).__name__}{': ' + str(exc) if str(exc) else ''})"

    async def pull(self, targets: Sequence[Target], last: int, ranks: frozenset[int] | None = None) -> Pull:
        """Every target's ranks (only those in `ranks` when given), each rank once, by rank."""
        last = max(1, min(last, MAX_STEPS_PER_REQUEST))
        budget = ByteBudget(MAX_TOTAL_BYTES, MAX_TOTAL_VALUES)
        replies = await asyncio.gather(*(self._one(t, last, budget) for t in targets))
        seen: dict[int, RankSteps] = {}
        failures: dict[str, str] = {}
        answered = 0
        for target, reply in zip(targets, replies, strict=True):
            if isinstance(reply, str):
                failures[target.pod] = reply
                continue
            answered += 1
            for steps in reply.ranks:
                if (ranks is None or steps.rank in ranks) and steps.rank not in seen:
                    seen[steps.rank] = steps
        return Pull(tuple(seen[r] for r in sorted(seen)), answered, failures)
