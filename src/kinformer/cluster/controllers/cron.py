"""Cron schedules as the CronJob controller parses them (robfig/cron v3 ``ParseStandard``).

A schedule is five fields (minute, hour, day of month, month, day of week) or a descriptor (``@yearly``,
``@annually``, ``@monthly``, ``@weekly``, ``@daily``, ``@midnight``, ``@hourly``, ``@every <duration>``),
optionally prefixed by ``CRON_TZ=<zone>`` or ``TZ=<zone>``. A field is a comma-separated list of ``*``, ``?``,
``a``, ``a-b``, each optionally ``/step`` (``a/step`` means ``a-max/step``); months and weekdays also take
their three-letter English names, case-insensitively. Weekdays run 0 (Sunday) to 6.

Day rule (cron's): when the day-of-month or the day-of-week field is a bare ``*`` or ``?`` a day must match
both fields; otherwise it matches when either does.

Invariants: :meth:`Schedule.next` returns the first matching time strictly after its argument, at second
zero of a minute, in the schedule's zone (returned as an aware UTC datetime), or None when nothing matches
within five years (e.g. ``0 0 30 2 *``). Bad input raises :class:`CronError` with cron's own wording.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["CronError", "Schedule", "load_zone", "parse_schedule"]

_MONTHS = {name: i + 1 for i, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}
_DAYS = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_DESCRIPTORS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
                "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
                "@hourly": "0 * * * *"}
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_SEARCH_YEARS = 5


class CronError(ValueError):
    """A schedule that does not parse (the message is the one cron gives)."""


@dataclass(frozen=True)
class _Field:
    low: int
    high: int
    names: dict[str, int] | None = None


_MINUTE, _HOUR = _Field(0, 59), _Field(0, 23)
_DOM, _MONTH, _DOW = _Field(1, 31), _Field(1, 12, _MONTHS), _Field(0, 6, _DAYS)


def load_zone(name: str) -> tzinfo:
    """The IANA zone ``name`` ("" and "UTC" are UTC; "Local" is refused: the cluster has no local zone)."""
    if name in ("", "UTC"):
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise CronError(f"unknown time zone {name}") from err


def _number(text: str, field: _Field) -> int:
    if field.names and text.lower() in field.names:
        return field.names[text.lower()]
    if not text.isdigit():
        raise CronError(f"failed to parse int from {text}: strconv.Atoi: parsing {text!r}: invalid syntax")
    return int(text)


def _parse_range(expr: str, field: _Field) -> tuple[set[int], bool]:
    """The values of one ``range[/step]`` expression, and whether it is a bare star (cron's star bit)."""
    range_part, _, step_part = expr.partition("/")
    star = range_part in ("*", "?")
    if star:
        low, high = field.low, field.high
    else:
        first, dash, last = range_part.partition("-")
        low = _number(first, field)
        high = _number(last, field) if dash else low
        if step_part and not dash:
            high = field.high
    step = 1
    if step_part:
        step = _number(step_part, _Field(0, 0))
        if step == 0:
            raise CronError(f"step of range should be a positive number: {expr}")
        star = star and step == 1
    if low < field.low:
        raise CronError(f"beginning of range ({low}) below minimum ({field.low}): {expr}")
    if high > field.high:
        raise CronError(f"end of range ({high}) above maximum ({field.high}): {expr}")
    if low > high:
        raise CronError(f"beginning of range ({low}) beyond end of range ({high}): {expr}")
    return set(range(low, high + 1, step)), star


def _parse_field(text: str, field: _Field) -> tuple[frozenset[int], bool]:
    values: set[int] = set()
    star = False
    for expr in text.split(","):
        got, is_star = _parse_range(expr, field)
        values |= got
        star = star or is_star
    return frozenset(values), star


def _parse_duration(text: str) -> float:
    """A Go duration ("1h30m", "90s"), as ``@every`` takes it."""
    if not text or _DURATION_PART.sub("", text) != "":
        raise CronError(f"failed to parse duration @every {text}: time: invalid duration {text!r}")
    return sum(float(num) * _DURATION_UNITS[unit] for num, unit in _DURATION_PART.findall(text))


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule; ``every`` is set (seconds) for ``@every``, the fields otherwise."""

    zone: tzinfo
    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    days: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    weekdays: frozenset[int] = frozenset()
    days_star: bool = False
    weekdays_star: bool = False
    every: float | None = None

    def next(self, after: datetime) -> datetime | None:
        """The first activation strictly after ``after`` (an aware datetime), in UTC; None if none within
        five years."""
        if self.every is not None:
            return (after.replace(microsecond=0) + timedelta(seconds=self.every)).astimezone(UTC)
        local = after.astimezone(self.zone).replace(second=0, microsecond=0, tzinfo=None) + timedelta(minutes=1)
        limit = local.year + _SEARCH_YEARS
        while local.year <= limit:
            found = self._first_match(local, limit)
            if found is None:
                return None
            aware = found.replace(tzinfo=self.zone).astimezone(UTC)
            if aware > after:
                return aware
            local = found + timedelta(minutes=1)  # a wall time that the zone repeats or skips
        return None

    def _first_match(self, t: datetime, limit: int) -> datetime | None:
        """The first local (naive) time at or after ``t`` matching every field."""
        while t.year <= limit:
            if t.month not in self.months:
                t = datetime(t.year + (t.month == 12), t.month % 12 + 1, 1)
            elif not self._day_matches(t):
                t = datetime(t.year, t.month, t.day) + timedelta(days=1)
            elif t.hour not in self.hours:
                t = datetime(t.year, t.month, t.day, t.hour) + timedelta(hours=1)
            elif t.minute not in self.minutes:
                t = t + timedelta(minutes=1)
            else:
                return t
        return None

    def _day_matches(self, t: datetime) -> bool:
        dom = t.day in self.days
        dow = (t.isoweekday() % 7) in self.weekdays
        if self.days_star or self.weekdays_star:
            return dom and dow
        return dom or dow


def parse_schedule(spec: str, zone: str = "") -> Schedule:
    """Parse ``spec`` (with an optional ``CRON_TZ=``/``TZ=`` prefix, which wins over ``zone``)."""
    text = spec.strip()
    if text.startswith(("CRON_TZ=", "TZ=")):
        prefix, _, text = text.partition(" ")
        zone = prefix.partition("=")[2]
        text = text.strip()
    tz = load_zone(zone)
    if not text:
        raise CronError("empty spec string")
    if text.startswith("@every "):
        seconds = _parse_duration(text[len("@every "):].strip())
        return Schedule(tz, every=max(1.0, float(math.floor(seconds))))
    if text.startswith("@"):
        if text not in _DESCRIPTORS:
            raise CronError(f"unrecognized descriptor: {text}")
        text = _DESCRIPTORS[text]
    fields = text.split()
    if len(fields) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(fields)}: {text}")
    minutes, _ = _parse_field(fields[0], _MINUTE)
    hours, _ = _parse_field(fields[1], _HOUR)
    days, days_star = _parse_field(fields[2], _DOM)
    months, _ = _parse_field(fields[3], _MONTH)
    weekdays, weekdays_star = _parse_field(fields[4], _DOW)
    return Schedule(tz, minutes, hours, days, months, weekdays, days_star, weekdays_star)
