"""poll_pacing: every tick while few pods are live; a bounded rate of asks for a large session."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from stepscope_operator.sidecars.poll_pacing import MAX_GAP_SECONDS, POLLS_PER_SECOND, due_pods, poll_gap

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _pods(n: int) -> list[str]:
    return [f"train-{i}" for i in range(n)]


def test_a_small_session_asks_every_pod_every_tick() -> None:
    live = _pods(POLLS_PER_SECOND)
    polled = dict.fromkeys(live, NOW)  # all asked this very instant
    assert due_pods(live, set(), polled) == live


def test_a_large_session_asks_the_least_recently_asked_share() -> None:
    live = _pods(1024)
    assert poll_gap(1024) == 1024 / POLLS_PER_SECOND
    assert poll_gap(100_000) == MAX_GAP_SECONDS
    polled = {pod: NOW - timedelta(seconds=i % 4) for i, pod in enumerate(live)}  # asked over the last 4 ticks
    due = due_pods(live, set(), polled)
    assert len(due) == 256 and all(int(p.split("-")[1]) % 4 == 3 for p in due)  # those asked 3 s ago


def test_pods_to_start_are_always_asked_and_never_asked_ones_come_first() -> None:
    live = _pods(2048)  # 512 asks a tick
    polled = {pod: NOW for pod in live[:-1]}  # the last never asked
    due = due_pods(live, set(live[:600]), polled)
    assert due[:600] == live[:600] and "train-2047" in due and len(due) == 600 + 512


def test_over_a_large_session_the_asks_per_tick_stay_bounded() -> None:
    live = _pods(4096)
    polled: dict[str, datetime] = {}
    asked = []
    for tick in range(12):
        now = NOW + timedelta(seconds=tick)
        due = due_pods(live, set(live) if tick == 0 else set(), polled)  # all started on the first tick
        polled.update(dict.fromkeys(due, now))
        asked.append(len(due))
    assert asked[0] == 4096
    assert asked[1:] == [1024] * 11  # then a quarter a tick: every pod every 4 s
