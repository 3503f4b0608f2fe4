"""EventBridge scheduled rules (``AWS::Events::Rule`` with a ScheduleExpression): ``rate()`` and ``cron()``;
each firing is an asynchronous invocation with the target's ``Input`` if it has one, else a Scheduled Event."""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import time
import uuid
from typing import Any

from local.delivery.async_invoker import AsyncInvoker
from local.template.cron import Cron
from local.template.template import ACCOUNT, REGION

_RATE = re.compile(r"^rate\(\s*(\d+)\s+(second|seconds|minute|minutes|hour|hours|day|days)\s*\)$")
_UNIT = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}


def rate_seconds(expression: str) -> float:
    """rate(5 minutes) -> 300. Raises ValueError for anything else (cron() has its own reader, ``Cron``)."""
    match = _RATE.match(expression.strip())
    if not match:
        raise ValueError(f"schedule {expression!r}: not rate(N unit)")
    return int(match.group(1)) * _UNIT[match.group(2).rstrip("s")]


class Schedule:
    """One scheduled rule. ``rate()``: every period, scaled by the time scale. ``cron()``: at its UTC firing
    times on a clock that runs 1/time_scale as fast as the wall clock from the engine's start."""

    def __init__(self, name: str, function: str, props: dict[str, Any], time_scale: float, invoker: AsyncInvoker) -> None:
        self.name = name
        self.function = function
        self.expression = str(props["Schedule"])
        self.scale = time_scale
        self.cron = Cron.parse(self.expression) if self.expression.strip().startswith("cron(") else None
        self.period = rate_seconds(self.expression) * time_scale if self.cron is None else 0.0
        state = props.get("State")
        enabled = props.get("Enabled", True)
        self.enabled = (str(state).upper() != "DISABLED") if state is not None else enabled not in (False, "false")
        self.input = props.get("Input")
        self.invoker = invoker
        self.fired = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"schedule-{name}", daemon=True)

    def start(self) -> None:
        if self.enabled:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    @property
    def started(self) -> bool:
        return self._thread.is_alive() or self._stop.is_set()

    def event(self) -> Any:
        if self.input is not None:
            return json.loads(self.input) if isinstance(self.input, str) else self.input
        return {
            "version": "0", "id": str(uuid.uuid4()), "detail-type": "Scheduled Event", "source": "aws.events",
            "account": ACCOUNT, "time": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "region": REGION,
            "resources": [f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{self.name}"], "detail": {},
        }

    def _loop(self) -> None:
        if self.cron is None:
            next_at = time.monotonic() + self.period
            while not self._stop.wait(max(0.0, next_at - time.monotonic())):
                self._fire()
                next_at += self.period
            return
        origin_wall, origin = dt.datetime.now(dt.UTC), time.monotonic()

        def virtual_now() -> dt.datetime:
            return origin_wall + dt.timedelta(seconds=(time.monotonic() - origin) / self.scale)

        due = self.cron.next_after(virtual_now())
        while not self._stop.wait(max(0.0, (due - virtual_now()).total_seconds() * self.scale)):
            if virtual_now() >= due:
                self._fire()
                due = self.cron.next_after(due)

    def _fire(self) -> None:
        self.fired += 1
        self.invoker.submit(self.event(), "schedule")
