"""EventBridge Scheduler one-time schedules (``at(...)``), which moto stores but never fires: fire each due one.

The functions create them at run time (a queue's wake-up at its delayed head, ``taskqueue.wakeups.delayed_wakeup``).
A poller lists the schedules of the emulator; one whose ``at()`` time (UTC, on the functions' clock: the engine's
``now``, which runs 1/time_scale as fast as the wall clock with ``scale_clocks``) has come is fired: an asynchronous
invocation of its target function with the target's ``Input``; then, with ActionAfterCompletion DELETE, it is
deleted (else it is kept, and not fired again). A disabled schedule, or one whose target is no function of the
stack, is not fired. Flexible time windows are taken as OFF (the stack sets none).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from local.delivery.change_feed import ChangeFeed, wait_for_change
from local.emulator.changes import SCHEDULES

log = logging.getLogger(__name__)

POLL_SECONDS = 0.1  # wall seconds between looks (half of it at a time scale under 1)


def at_seconds(expression: str) -> float | None:
    """The epoch seconds of ``at(yyyy-mm-ddThh:mm:ss)`` (UTC); ``None`` for any other expression."""
    text = expression.strip()
    if not (text.startswith("at(") and text.endswith(")")):
        return None
    try:
        return dt.datetime.strptime(text[3:-1], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.UTC).timestamp()
    except ValueError:
        return None


class OneTimeSchedules:
    """Fires the emulator's due one-time schedules. ``submit(function_arn, event)``: an asynchronous invocation (the
    engine's invoker of the function the ARN names; ``False`` if it names none); ``now``: the functions' clock."""

    def __init__(self, scheduler: Any, submit: Callable[[str, Any], bool], now: Callable[[], float],
                 time_scale: float = 1.0, changes: ChangeFeed | None = None) -> None:
        self._scheduler = scheduler
        self._submit = submit
        self._now = now
        self._poll = POLL_SECONDS * min(1.0, max(time_scale, 0.5))
        self._time_scale = time_scale
        # With the emulator's change feed, the poller waits for a schedule written or the earliest one due
        # (next_due, on the functions' clock) instead of asking every poll.
        self._changes = changes
        self.next_due: float | None = None
        self._done: set[tuple[str, str, str]] = set()  # (group, name, expression) fired and kept (ActionAfterCompletion NONE)
        self.fired: list[dict[str, Any]] = []  # {"name", "at", "fired_at", "target"} on the functions' clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="one-time-schedules", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            seen = self._changes.seen(SCHEDULES) if self._changes else 0
            deadline: float | None = time.monotonic()  # a failed look: look again at the next tick
            try:
                self.fire_due()
                # The functions' clock runs 1/time_scale as fast as the wall clock at most: never later than due.
                deadline = (None if self.next_due is None else
                            time.monotonic() + max(0.0, self.next_due - self._now()) * min(1.0, self._time_scale))
            except Exception:  # noqa: BLE001 - the emulator stopping, a schedule deleted meanwhile: look again
                log.debug("one-time schedules: look failed", exc_info=True)
            wait_for_change(self._changes, SCHEDULES, seen, self._stop, self._poll, started, deadline)

    def fire_due(self) -> int:
        """Fire every due one-time schedule now; how many were fired."""
        fired = 0
        next_due: float | None = None
        for summary in self._list():
            if summary.get("State", "ENABLED") != "ENABLED":
                continue
            group, name = summary.get("GroupName") or "default", summary["Name"]
            schedule = self._scheduler.get_schedule(Name=name, GroupName=group)
            expression = str(schedule.get("ScheduleExpression", ""))
            at = at_seconds(expression)
            if at is None or (group, name, expression) in self._done:
                continue
            if self._now() < at:
                next_due = at if next_due is None else min(next_due, at)
                continue
            target = schedule.get("Target") or {}
            raw = target.get("Input")
            event = json.loads(raw) if isinstance(raw, str) and raw else {}
            if not self._submit(str(target.get("Arn", "")), event):
                log.warning("one-time schedule %s: target %s is no function of the stack", name, target.get("Arn"))
            else:
                fired += 1
                self.fired.append({"name": name, "at": at, "fired_at": self._now(), "target": target.get("Arn")})
            if schedule.get("ActionAfterCompletion") == "DELETE":
                self._scheduler.delete_schedule(Name=name, GroupName=group)
            else:
                self._done.add((group, name, expression))
        self.next_due = next_due
        return fired

    def _list(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = self._scheduler.list_schedules(**({"NextToken": token} if token else {}))
            found += page.get("Schedules", [])
            token = page.get("NextToken")
            if not token:
                return found


