"""The cron parser behind the CronJob controller, against robfig/cron v3's ParseStandard rules."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kinformer.cluster.controllers.cron import CronError, parse_schedule


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def nexts(spec: str, start: str, count: int = 3, zone: str = "") -> list[str]:
    schedule, t, out = parse_schedule(spec, zone), at(start), []
    for _ in range(count):
        found = schedule.next(t)
        assert found is not None
        out.append(found.isoformat())
        t = found
    return out


def test_every_minute_fires_at_second_zero_strictly_after() -> None:
    assert nexts("* * * * *", "2024-01-01T10:00:00+00:00") == [
        "2024-01-01T10:01:00+00:00", "2024-01-01T10:02:00+00:00", "2024-01-01T10:03:00+00:00"]
    assert nexts("* * * * ?", "2024-01-01T10:00:30+00:00", 1) == ["2024-01-01T10:01:00+00:00"]


def test_ranges_steps_and_lists() -> None:
    assert nexts("*/15 * * * *", "2024-01-01T10:01:00+00:00") == [
        "2024-01-01T10:15:00+00:00", "2024-01-01T10:30:00+00:00", "2024-01-01T10:45:00+00:00"]
    assert nexts("5,10-12 3 * * *", "2024-01-01T00:00:00+00:00", 5) == [
        "2024-01-01T03:05:00+00:00", "2024-01-01T03:10:00+00:00", "2024-01-01T03:11:00+00:00",
        "2024-01-01T03:12:00+00:00", "2024-01-02T03:05:00+00:00"]
    assert nexts("30 6-16/4 * * *", "2024-01-01T00:00:00+00:00", 4) == [
        "2024-01-01T06:30:00+00:00", "2024-01-01T10:30:00+00:00", "2024-01-01T14:30:00+00:00",
        "2024-01-02T06:30:00+00:00"]
    assert nexts("0 20/2 * * *", "2024-01-01T00:00:00+00:00", 3) == [  # a/step means a-max/step
        "2024-01-01T20:00:00+00:00", "2024-01-01T22:00:00+00:00", "2024-01-02T20:00:00+00:00"]


def test_month_and_weekday_names_case_insensitive() -> None:
    assert nexts("0 0 1 feb,Apr *", "2024-01-01T00:00:00+00:00", 2) == [
        "2024-02-01T00:00:00+00:00", "2024-04-01T00:00:00+00:00"]
    assert nexts("0 9 * * MON-fri", "2024-01-05T10:00:00+00:00", 2) == [  # Friday after 9: next is Monday
        "2024-01-08T09:00:00+00:00", "2024-01-09T09:00:00+00:00"]


def test_day_of_month_or_day_of_week_when_both_are_restricted() -> None:
    # 2024-01-01 is a Monday: the 13th or any Friday
    assert nexts("0 0 13 * 5", "2024-01-01T00:00:00+00:00", 4) == [
        "2024-01-05T00:00:00+00:00", "2024-01-12T00:00:00+00:00", "2024-01-13T00:00:00+00:00",
        "2024-01-19T00:00:00+00:00"]
    # a star in either field makes it AND: every 13th of the month
    assert nexts("0 0 13 * *", "2024-01-01T00:00:00+00:00", 2) == [
        "2024-01-13T00:00:00+00:00", "2024-02-13T00:00:00+00:00"]
    # */1 keeps the star; */2 does not (robfig's star bit)
    assert nexts("0 0 13 * */1", "2024-01-01T00:00:00+00:00", 1) == ["2024-01-13T00:00:00+00:00"]
    assert nexts("0 0 13 * */2", "2024-01-01T00:00:00+00:00", 1) == ["2024-01-02T00:00:00+00:00"]


def test_descriptors() -> None:
    start = "2024-05-15T10:30:00+00:00"
    assert nexts("@hourly", start, 1) == ["2024-05-15T11:00:00+00:00"]
    assert nexts("@daily", start, 1) == nexts("@midnight", start, 1) == ["2024-05-16T00:00:00+00:00"]
    assert nexts("@weekly", start, 1) == ["2024-05-19T00:00:00+00:00"]  # Sunday
    assert nexts("@monthly", start, 1) == ["2024-06-01T00:00:00+00:00"]
    assert nexts("@yearly", start, 1) == nexts("@annually", start, 1) == ["2025-01-01T00:00:00+00:00"]
    assert nexts("@every 1h30m", start, 2) == ["2024-05-15T12:00:00+00:00", "2024-05-15T13:30:00+00:00"]


def test_time_zones_from_the_field_or_a_cron_tz_prefix() -> None:
    # 09:00 in New York is 14:00 UTC in winter and 13:00 UTC in summer
    assert nexts("0 9 * * *", "2024-03-09T00:00:00+00:00", 2, zone="America/New_York") == [
        "2024-03-09T14:00:00+00:00", "2024-03-10T13:00:00+00:00"]
    assert nexts("CRON_TZ=Asia/Tokyo 0 9 * * *", "2024-01-01T00:00:00+00:00", 1) == ["2024-01-02T00:00:00+00:00"]
    assert nexts("TZ=UTC 0 9 * * *", "2024-01-01T00:00:00+00:00", 1) == ["2024-01-01T09:00:00+00:00"]


def test_a_time_the_zone_skips_fires_once_after_the_gap() -> None:
    # 02:30 does not exist in New York on 2024-03-10; the schedule still fires that day, and never twice
    fired = nexts("30 2 * * *", "2024-03-09T12:00:00+00:00", 3, zone="America/New_York")
    assert len(set(fired)) == 3 and fired[1].startswith("2024-03-11")


def test_a_schedule_that_never_fires_has_no_next_time() -> None:
    assert parse_schedule("0 0 30 2 *").next(at("2024-01-01T00:00:00+00:00")) is None


@pytest.mark.parametrize(("spec", "message"), [
    ("* * * *", "expected exactly 5 fields, found 4: * * * *"),
    ("60 * * * *", r"end of range \(60\) above maximum \(59\): 60"),
    ("* * 0 * *", r"beginning of range \(0\) below minimum \(1\): 0"),
    ("* * * * 7", r"end of range \(7\) above maximum \(6\): 7"),
    ("5-1 * * * *", r"beginning of range \(5\) beyond end of range \(1\): 5-1"),
    ("*/0 * * * *", "step of range should be a positive number: \\*/0"),
    ("x * * * *", "failed to parse int from x"),
    ("@fortnightly", "unrecognized descriptor: @fortnightly"),
    ("@every 5 minutes", "failed to parse duration"),
    ("", "empty spec string"),
])
def test_bad_schedules_are_refused_with_crons_message(spec: str, message: str) -> None:
    with pytest.raises(CronError, match=message):
        parse_schedule(spec)


def test_unknown_time_zone_is_refused() -> None:
    with pytest.raises(CronError, match="unknown time zone Mars/Olympus"):
        parse_schedule("* * * * *", "Mars/Olympus")
