"""The local engine's EventBridge cron(): the next firing time of AWS's six-field expressions, in UTC, and a
scheduled rule that fires on one."""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

import pytest

from local.delivery.schedules import Schedule
from local.template.cron import Cron, CronError


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("cron(0 12 * * ? *)", "2026-11-22T13:00", "2026-11-23T12:00"),  # daily at noon, today's has passed
        ("cron(0 12 * * ? *)", "2026-11-22T11:59:30", "2026-11-22T12:00"),
        ("cron(0/15 * * * ? *)", "2026-11-22T10:07", "2026-11-22T10:15"),  # every quarter hour
        ("cron(0/15 * * * ? *)", "2026-11-22T10:45", "2026-11-22T11:00"),  # strictly after
        ("cron(15 10 ? * MON-FRI *)", "2026-12-25T11:00", "2026-12-28T10:15"),  # Friday after 10:15 -> Monday
        ("cron(0 8 ? * 1 *)", "2026-11-23T00:00", "2026-11-29T08:00"),  # 1 is Sunday
        ("cron(0 18 L * ? *)", "2026-02-10T00:00", "2026-02-28T18:00"),  # last day of the month
        ("cron(0 18 L * ? *)", "2028-02-10T00:00", "2028-02-29T18:00"),  # leap year
        ("cron(0 9 ? * 2#1 *)", "2026-12-01T00:00", "2026-12-07T09:00"),  # first Monday
        ("cron(0 9 ? * 6L *)", "2026-12-01T00:00", "2026-12-25T09:00"),  # last Friday
        ("cron(30 6 1,15 JAN,JUL ? 2027)", "2026-11-22T00:00", "2027-01-01T06:30"),  # lists, names, a year
        ("cron(0 0 29 2 ? *)", "2026-03-01T00:00", "2028-02-29T00:00"),  # 29 February: the next leap year
    ],
)
def test_next_firing(expression: str, after: str, expected: str) -> None:
    assert Cron.parse(expression).next_after(at(after)) == at(expected)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("cron(0 12 * * * *)", "exactly one of day-of-month and day-of-week"),
        ("cron(0 12 ? * ? *)", "exactly one of day-of-month and day-of-week"),
        ("cron(0 12 * * ?)", "6 fields"),
        ("cron(60 12 * * ? *)", "minutes"),
        ("cron(0 12 15W * ? *)", "'W'"),
        ("cron(0 12 ? * FUNDAY *)", "day-of-week"),
        ("rate(5 minutes)", "is not cron"),
    ],
)
def test_an_expression_the_engine_cannot_read_is_refused_with_the_reason(expression: str, message: str) -> None:
    with pytest.raises(CronError, match=message):
        Cron.parse(expression)


class Invoker:
    def __init__(self) -> None:
        self.events: list[Any] = []
        self.lock = threading.Lock()

    def submit(self, event: Any, source: str) -> None:
        with self.lock:
            self.events.append((event, source))


def test_a_cron_rule_fires_with_its_input_on_the_scaled_clock() -> None:
    # Every minute of a clock 1,000 times faster than the wall clock: about every 0.06 s.
    invoker = Invoker()
    rule = Schedule("Every", "Fn", {"Schedule": "cron(* * * * ? *)", "Input": '{"queue": "work"}'}, 0.001, invoker)  # type: ignore[arg-type]
    rule.start()
    try:
        deadline = time.monotonic() + 5
        while len(invoker.events) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        rule.stop()
    assert len(invoker.events) >= 3
    assert invoker.events[0] == ({"queue": "work"}, "schedule")


def test_a_disabled_cron_rule_never_fires() -> None:
    invoker = Invoker()
    rule = Schedule("Off", "Fn", {"Schedule": "cron(* * * * ? *)", "State": "DISABLED"}, 0.001, invoker)  # type: ignore[arg-type]
    rule.start()
    assert not rule.started  # no timer thread at all
    rule.stop()
    assert invoker.events == [] and rule.fired == 0
