"""Five-field cron schedules (minute hour day-of-month month day-of-week, UTC), as a CronJob reads them: numbers,
ranges, lists, steps and `*`; day of week 0-7 with 0 and 7 both Sunday; when both day fields are restricted, a day
matching either is a match. Pure functions; the syntax and ranges were checked by the contract (`trigger.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from stepscope_contract.trigger import CRON_BOUNDS

MAX_LOOKAHEAD_MINUTES = 366 * 24 * 60 * 5  # a schedule that never fires within five years (Feb 30) is "never"


@dataclass(frozen=True)
class Schedule:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # day of month is `*`
    any_weekday: bool  # day of week is `*`

    def matches(self, moment: datetime) -> bool:
        if moment.minute not in self.minutes or moment.hour not in self.hours or moment.month not in self.months:
            return False
        return self.day_matches(moment)

    def day_matches(self, moment: datetime) -> bool:
        """Whether the day fields admit `moment`'s day (the month, hour and minute aside)."""
        in_month = moment.day in self.days
        in_week = (moment.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return in_month and in_week
        return in_month or in_week


def _field(text: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValueError(f"cron step must be at least 1: {part!r}")
        if body == "*":
            first, last = low, high
        elif "-" in body:
            first, last = (int(x) for x in body.split("-", 1))
        else:
            first = int(body)
            last = high if step_text else first
        if not low <= first <= last <= high:
            raise ValueError(f"cron field {part!r} is outside {low}-{high}")
        values.update(range(first, last + 1, step))
    return frozenset(values)


def parse(expression: str) -> Schedule:
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(f"a cron schedule has five fields, not {len(fields)}: {expression!r}")
    minutes, hours, days, months, weekdays = (
        _field(f, lo, hi) for f, (lo, hi) in zip(fields, CRON_BOUNDS, strict=True)
    )
    return Schedule(
        minutes=minutes,
        hours=hours,
        days=days,
        months=months,
        weekdays=frozenset(d % 7 for d in weekdays),
        any_day=fields[2] == "*",
        any_weekday=fields[4] == "*",
    )


def next_after(schedule: Schedule, after: datetime) -> datetime | None:
    """The first scheduled minute strictly after `after` (seconds dropped), or None within the lookahead. A month,
    day or hour that cannot match is skipped whole, so a schedule that never comes costs a few thousand steps."""
    moment = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    end = moment + timedelta(minutes=MAX_LOOKAHEAD_MINUTES)
    while moment < end:
        if moment.month not in schedule.months:
            moment = (moment.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
        elif not schedule.day_matches(moment):
            moment = moment.replace(hour=0, minute=0) + timedelta(days=1)
        elif moment.hour not in schedule.hours:
            moment = moment.replace(minute=0) + timedelta(hours=1)
        elif moment.minute not in schedule.minutes:
            moment += timedelta(minutes=1)
        else:
            return moment
    return None


MAKE_UP_WINDOW = timedelta(days=1)


def latest_due(schedule: Schedule, since: datetime, now: datetime) -> datetime | None:
    """The latest scheduled time in (since, now], looking back at most a day, or None: of the runs missed while the
    operator was away, one (the latest) is made up."""
    due = None
    moment = next_after(schedule, max(since, now - MAKE_UP_WINDOW))
    while moment is not None and moment <= now:
        due = moment
        moment = next_after(schedule, moment)
    return due
