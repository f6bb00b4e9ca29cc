"""Run one coroutine per item with at most `width` in flight, by `width` workers that take items in order.

Why not `asyncio.gather` over every item: at 10,000 targets that creates 10,000 tasks whose first steps all run
before the first request leaves (each builds its request, then waits for the client's semaphore), which delays the
first signal by about a second (bench/fanout.py); workers start sending at once and hold `width` tasks, not 10,000.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


async def each(items: Iterable[T], action: Callable[[T], Awaitable[None]], width: int) -> None:
    """`action(item)` for every item, `width` at a time; the first exception is raised once all workers stopped."""
    queue = iter(items)

    async def worker() -> None:
        for item in queue:  # one shared iterator: each item goes to exactly one worker
            await action(item)

    await asyncio.gather(*(worker() for _ in range(max(1, width))))
