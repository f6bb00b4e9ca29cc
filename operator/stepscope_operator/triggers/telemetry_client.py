"""Pulls the step telemetry of a trigger's target pods from their sidecars (`GET /v1/steps`, contract
step_telemetry.PodSteps), with the token of each pod's namespace derived from the master (as the capture requests),
bounded concurrency and a timeout per pod. No Prometheus server is involved: the operator reads the sidecars it
already talks to.

Replies are read whole (every segment until the end of the body) up to MAX_BODY per pod, and all the replies of one
evaluation together up to MAX_TOTAL_BYTES. A value costs tens of bytes once parsed however short its text (`0,`), so
the values of a reply are counted before it is parsed: a JSON text holds at most one value more per array than it
has commas (`value_bound`, a scan of the bytes that builds nothing). A reply may hold at most `reply_value_bound(last)`
(every rank of a pod, each with the steps asked), and all the replies of one evaluation at most MAX_TOTAL_VALUES; a
reply's count is charged before it is parsed (in a worker thread: no handler waits behind a large reply) and what it
really held settled after, on the event loop. A parsed reply may hold no more
steps per rank than were asked. Pods beyond a bound are failures that name it, never memory
(tests/operator/test_telemetry_memory.py measures what a refused reply costs)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import aiohttp
from pydantic import ValidationError

from stepscope_contract.constants import AUTH_SCHEME, SIDECAR_API_PREFIX
from stepscope_contract.step_telemetry import MAX_RANKS_PER_POD, MAX_STEPS_PER_REQUEST, PodSteps, RankSteps
from stepscope_contract.tokens import namespace_token
from stepscope_operator.session.targets import Target

MAX_BODY = 8 * 1024 * 1024  # a pod's reply: 256 ranks x 2048 steps would be more; the sidecar is asked for less
MAX_TOTAL_BYTES = 16 * 1024 * 1024  # every pod's reply of one evaluation together, as read
MAX_TOTAL_VALUES = 1_000_000  # every pod's step values of one evaluation together, as counted before parsing
READ_CHUNK = 64 * 1024
STEP_LISTS = 5  # endedAt, durationMs, backwardMs, dataWaitMs, profiled
RANK_FIELDS = 16  # a rank's other fields and the commas between them, with room to spare


def value_bound(body: bytes) -> int:
    """At most how many values (of arrays, and fields of objects) the JSON text `body` holds: every one but the last
    of each array or object is followed by a comma (commas in strings only raise the bound)."""
    return body.count(b",") + body.count(b"[") + body.count(b"{")


def reply_value_bound(last: int) -> int:
    """The most values a pod's reply may count when `last` steps were asked: every rank a pod may have, each with
    its step lists full."""
    return MAX_RANKS_PER_POD * (STEP_LISTS * last + RANK_FIELDS) + RANK_FIELDS


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

    def take_counted(self, counted: int, last: int) -> None:
        """Charge a reply's values as counted before parsing; refuse a reply over its own bound or beyond the values
        left to the evaluation (nothing is charged then)."""
        bound = reply_value_bound(last)
        if counted > bound:
            raise BodyTooLarge(f"reply of over {bound} values, more than {last} steps of {MAX_RANKS_PER_POD} ranks")
        if counted > self.values_left:
            raise BodyTooLarge(f"replies over {MAX_TOTAL_VALUES} step values in one evaluation; this pod's not used")
        self.values_left -= counted

    def settle(self, counted: int, reply: PodSteps | None, last: int) -> None:
        """Give back what a reply charged with `take_counted` did not hold (all of it when it was not used), and
        refuse one with more steps per rank than asked."""
        self.values_left += counted
        if reply is None:
            return
        values = 0
        for steps in reply.ranks:
            lengths = [len(v) for v in (steps.ended_at, steps.duration_ms, steps.backward_ms, steps.data_wait_ms)]
            if max(lengths, default=0) > last or len(steps.profiled) > last:
                raise BodyTooLarge(f"rank {steps.rank} has more than the {last} steps asked")
            values += sum(lengths) + len(steps.profiled)
        self.values_left -= values


async def parse_reply(body: bytes, last: int, budget: ByteBudget) -> PodSteps:
    """A pod's reply, its values counted and charged before it is parsed (BodyTooLarge, ValidationError). The
    budget is kept on the event loop; the parse runs in a worker thread, so that a large reply delays no handler."""
    counted = value_bound(body)
    budget.take_counted(counted, last)
    reply: PodSteps | None = None
    try:
        reply = await asyncio.to_thread(PodSteps.model_validate_json, body)
    finally:
        budget.settle(counted, reply, last)
    return reply


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
            return await parse_reply(body, last, budget)
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
