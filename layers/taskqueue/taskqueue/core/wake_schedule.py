"""A scheduled wake-up at the queue's delayed head (pure rules): when a worker waits for a delayed entry, and when a
stopping worker (or the safety net) must (re)set the queue's one EventBridge Scheduler schedule.

A task delayed at creation, or a retry waiting out its backoff, used to be started on time only by a worker kept
awake (billed) until it fell due; one due past the worker's budget waited for the safety net. Now a worker waits
only for an entry due within ``WAIT_HORIZON_SECONDS``; past that it stops, and a one-time schedule wakes the queue
``SCHEDULE_LEAD_SECONDS`` before the head (Trigger publishes the wake-up). The queue's record carries ``wakeAt``, the
time the schedule is set for, so a stop whose head the schedule already covers sends no Scheduler request.

The horizon, by the prices (docs/wakeups.md, "Delayed tasks and backoffs"): a worker of m GB held awake costs
m x $0.0000133334 per second (arm64). The chain a schedule starts costs C ~ $2.9 per million: one Scheduler
invocation ($1.00 per million), one Trigger invocation ($0.20 per million + ~0.1 s at 256 MB), one SNS publish
($0.50), one more worker request ($0.20) and a write ($0.625: wakeAt), and its worker still waits the lead L = 1 s. Waiting W seconds is cheaper while W < L + C / (m x 13.3 per
million): 1.9 s at 256 MB, 1.2 s at 1 GB. The horizon may not be under L + 1 s (at() has whole seconds: a woken
worker may arrive that early and must wait, not schedule again): so 2 s.
"""

from __future__ import annotations

import datetime as dt
import zlib
from enum import StrEnum

# A worker waits (polling) for a delayed entry due within this long; past it, it stops and a schedule wakes the
# queue. Must cover SCHEDULE_LEAD_SECONDS plus the at() expression's second granularity.
WAIT_HORIZON_SECONDS = 2.0
# The schedule fires this long before the head, for Scheduler -> Trigger -> SNS -> worker to arrive by the due time.
SCHEDULE_LEAD_SECONDS = 1.0


class ScheduleStep(StrEnum):
    NONE = "none"  # nothing delayed, or it is due already: no schedule (the worker claims it, or tail-calls for it)
    COVERED = "covered"  # the schedule set on the record fires at or before the head: no request
    SCHEDULE = "schedule"  # create the schedule, or move it earlier


def worth_waiting(due_in_seconds: float | None, left_seconds: float, horizon: float = WAIT_HORIZON_SECONDS) -> bool:
    """Does a worker with ``left_seconds`` of its claim budget wait for the next delayed entry (``due_in_seconds``
    from now; ``None``: none known)? Only if it falls due within the horizon (and the budget)."""
    return due_in_seconds is not None and due_in_seconds < min(left_seconds, horizon)


def wake_time_ms(head_ms: int, now_ms: int | None = None, lead_seconds: float = SCHEDULE_LEAD_SECONDS) -> int:
    """When the schedule for a head fires: the lead before it, down to the whole second (an at() expression's
    granularity), so it never fires after the head; but never sooner than the whole second a second after
    ``now_ms`` (a time already past would not fire), for a head that close."""
    at = head_ms - int(lead_seconds * 1000)
    at -= at % 1000
    if now_ms is not None:
        soonest = now_ms + 1000
        at = max(at, soonest + (-soonest % 1000))
    return at


def schedule_step(head_ms: int | None, wake_at_ms: int | None, now_ms: int) -> ScheduleStep:
    """What a worker that stops without a tail call does about the queue's schedule: ``head_ms`` is the earliest
    delayed entry it knows, ``wake_at_ms`` what the queue's record says is scheduled (``None``: nothing). A recorded
    time in the past has fired (or is firing): it covers nothing. (A head within the wait horizon is normally waited
    for, or tail-called for, and never gets here; one that does, at the horizon's edge, is scheduled too.)"""
    if head_ms is None or head_ms <= now_ms:
        return ScheduleStep.NONE
    if wake_at_ms is not None and now_ms < wake_at_ms <= wake_time_ms(head_ms, now_ms):
        return ScheduleStep.COVERED
    return ScheduleStep.SCHEDULE


def at_expression(at_ms: int) -> str:
    """The one-time schedule expression for ``at_ms`` (UTC, whole seconds): ``at(2026-11-27T11:30:05)``."""
    return "at(" + dt.datetime.fromtimestamp(at_ms // 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S") + ")"


def at_of(expression: str) -> int | None:
    """The epoch ms an ``at(...)`` expression (UTC) names; ``None`` for anything else."""
    text = expression.strip()
    if not (text.startswith("at(") and text.endswith(")")):
        return None
    try:
        when = dt.datetime.strptime(text[3:-1], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.UTC)
    except ValueError:
        return None
    return int(when.timestamp() * 1000)


def schedule_name(queue: str) -> str:
    """The queue's one schedule in the stack's schedule group: ``wake-<queue>``. Scheduler allows 64 characters of
    [0-9a-zA-Z-_.]; a queue name too long for that keeps its first 50 and a hash of the whole, so two queues never
    share a schedule. The stack's name is the group's, not the schedule's: the IAM grant is on the group
    (``schedule/<group>/*``), whatever the stack's name's length."""
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in queue)
    name = f"wake-{safe}"
    if len(name) > 64:
        name = f"wake-{safe[:50]}-{zlib.crc32(queue.encode('utf-8')):08x}"
    return name
