"""The scheduled wake-up at a queue's delayed head (taskqueue.core.wake_schedule): when a worker waits for a delayed
entry, and when a stop (re)sets the queue's one schedule."""

from __future__ import annotations

import pytest

from taskqueue.core import wake_schedule as ws
from taskqueue.core.wake_schedule import ScheduleStep

NOW = 1_795_348_800_000  # a whole second


def test_a_worker_waits_only_for_an_entry_due_within_the_horizon_and_its_budget():
    assert ws.worth_waiting(1.5, left_seconds=60)
    assert not ws.worth_waiting(ws.WAIT_HORIZON_SECONDS, left_seconds=60)
    assert not ws.worth_waiting(30, left_seconds=60)  # before: a worker stayed awake (billed) for this one
    assert not ws.worth_waiting(1.5, left_seconds=1.0)
    assert not ws.worth_waiting(None, left_seconds=60)
    assert ws.worth_waiting(30, left_seconds=60, horizon=float("inf"))  # no schedules configured: as before


def test_the_schedule_fires_the_lead_before_the_head_on_a_whole_second_never_after_it():
    head = NOW + 300_000 + 700
    at = ws.wake_time_ms(head)
    assert at % 1000 == 0 and head - 2000 < at <= head - int(ws.SCHEDULE_LEAD_SECONDS * 1000)
    assert ws.at_expression(at) == "at(2026-11-22T12:04:59)"
    assert ws.at_of(ws.at_expression(at)) == at
    assert ws.at_of("rate(1 minute)") is None and ws.at_of("at(nonsense)") is None
    # A head too close for the lead: the next whole second at least a second from now, never a time already past.
    assert ws.wake_time_ms(NOW + 1_500, now_ms=NOW + 300) == NOW + 2_000
    assert ws.wake_time_ms(NOW + 300_000, now_ms=NOW) == NOW + 299_000
    # The horizon covers the lead and the second's rounding: a woken worker arrives early and waits, not stops again.
    assert ws.SCHEDULE_LEAD_SECONDS + 1 <= ws.WAIT_HORIZON_SECONDS


@pytest.mark.parametrize(("head", "wake_at", "step"), [
    (None, None, ScheduleStep.NONE),  # nothing delayed
    (NOW, None, ScheduleStep.NONE),  # due: the worker claims it (or tail-calls for it)
    # At the horizon's edge (the worker neither waited nor tail-called): scheduled, never in the past.
    (NOW + 1_000, None, ScheduleStep.SCHEDULE),
    (NOW + 1_000, NOW + 1_000, ScheduleStep.COVERED),
    (NOW + 300_000, None, ScheduleStep.SCHEDULE),  # nothing scheduled
    (NOW + 300_000, ws.wake_time_ms(NOW + 300_000), ScheduleStep.COVERED),  # scheduled at this head: no request
    (NOW + 300_000, NOW + 100_000, ScheduleStep.COVERED),  # an earlier one fires first: its worker reschedules
    (NOW + 100_000, ws.wake_time_ms(NOW + 300_000), ScheduleStep.SCHEDULE),  # an earlier head: move it earlier
    (NOW + 300_000, NOW - 1, ScheduleStep.SCHEDULE),  # the recorded one has fired: it covers nothing
    (NOW + 300_000, NOW, ScheduleStep.SCHEDULE),
])
def test_when_a_stop_sets_the_schedule(head, wake_at, step):
    assert ws.schedule_step(head, wake_at, NOW) is step


def test_a_retry_at_the_horizons_edge_is_never_left_to_the_safety_net():
    # The worker does not wait for (nor tail-call for) a head at the horizon: its stop schedules it.
    due_in = ws.WAIT_HORIZON_SECONDS
    assert not ws.worth_waiting(due_in, left_seconds=60)
    assert ws.schedule_step(NOW + int(due_in * 1000) - 50, None, NOW) is ScheduleStep.SCHEDULE  # a moment later


def test_the_schedule_is_named_from_the_queue_within_schedulers_limits_whatever_the_stacks_name():
    """Before: ``<stack>-wake-<queue>`` cut to 64 characters, which for a stack name of 59 or more fell outside the
    IAM grant's pattern (every delayed wake-up refused). The stack's own schedule group now holds the name."""
    assert ws.schedule_name("work") == "wake-work"
    assert ws.schedule_name("a queue/x") == "wake-a-queue-x"
    long = ws.schedule_name("q" * 64)
    assert len(long) <= 64 and long.startswith("wake-" + "q" * 50) and long != ws.schedule_name("q" * 63 + "r")
