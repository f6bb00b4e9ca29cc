"""Cron schedules as a CronJob reads them: fields, steps, ranges, lists, Sunday as 0 or 7, either day field matching
when both are restricted, the next time after a moment, and the one due run made up after a gap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from stepscope_operator.triggers.cron import latest_due, next_after, parse

pytestmark = pytest.mark.unit


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("* * * * *", "2026-03-01T10:00:30", "2026-03-01T10:01:00"),
        ("0 3 * * *", "2026-03-01T03:00:00", "2026-03-02T03:00:00"),
        ("*/15 * * * *", "2026-03-01T10:16:00", "2026-03-01T10:30:00"),
        ("5-7 2 * * *", "2026-03-01T02:06:00", "2026-03-01T02:07:00"),
        ("0 0 1,15 * *", "2026-03-02T00:00:00", "2026-03-15T00:00:00"),
        ("30 4 * * 7", "2026-03-02T00:00:00", "2026-03-08T04:30:00"),  # 7 is Sunday, as 0 is
        ("30 4 * * 0", "2026-03-02T00:00:00", "2026-03-08T04:30:00"),
        ("0 12 13 * 5", "2026-03-01T00:00:00", "2026-03-06T12:00:00"),  # day 13 or a Friday: the Friday comes first
        ("0 0 29 2 *", "2026-03-01T00:00:00", "2028-02-29T00:00:00"),
        ("10/20 * * * *", "2026-03-01T10:31:00", "2026-03-01T10:50:00"),
    ],
)
def test_next_after(expression: str, after: str, expected: str) -> None:
    assert next_after(parse(expression), at(after)) == at(expected)


@pytest.mark.parametrize(
    "expression",
    ["*/7 3-5 * * *", "0 0 1,15 * *", "30 4 * * 1-5", "0 12 13 * 5", "15 */6 10-12 * 0", "0 0 31 * *", "59 23 * 12 *"],
)
def test_next_after_is_the_first_matching_minute(expression: str) -> None:
    """Against a minute-by-minute walk over up to six weeks from several starting moments (skipping whole months,
    days and hours must not skip a match)."""
    schedule = parse(expression)
    for start in ("2026-02-27T23:58:00", "2026-03-01T04:29:30", "2026-11-30T23:59:00", "2027-01-12T11:59:00"):
        moment = at(start).replace(second=0) + timedelta(minutes=1)
        for _ in range(42 * 24 * 60):
            if schedule.matches(moment):
                break
            moment += timedelta(minutes=1)
        else:
            continue
        assert next_after(schedule, at(start)) == moment, (expression, start)


def test_a_schedule_that_never_comes_is_none() -> None:
    assert next_after(parse("0 0 30 2 *"), at("2026-01-01T00:00:00")) is None


def test_one_missed_run_is_made_up_the_latest() -> None:
    nightly = parse("0 3 * * *")
    assert latest_due(nightly, at("2026-03-01T03:00:00"), at("2026-03-01T09:00:00")) is None
    assert latest_due(nightly, at("2026-03-01T03:00:00"), at("2026-03-02T03:00:05")) == at("2026-03-02T03:00:00")
    # away for a week: the last one is made up, not seven
    assert latest_due(nightly, at("2026-02-20T03:00:00"), at("2026-03-01T04:00:00")) == at("2026-03-01T03:00:00")


def test_out_of_range_fields_are_refused() -> None:
    for bad in ("60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "* * * * 8", "*/0 * * * *", "1 2 3"):
        with pytest.raises(ValueError):
            parse(bad)
