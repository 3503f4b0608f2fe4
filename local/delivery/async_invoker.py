"""Lambda's queue of asynchronous invocations for one function (SNS, EventBridge, ``Invoke`` with
InvocationType=Event): throttle backoff, retries after errors, the maximum event age, and the on-failure
destination."""

from __future__ import annotations

import heapq
import itertools
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from local.delivery.destinations import now_iso
from local.delivery.sandbox import FunctionPool, Invocation
from local.template.template import ACCOUNT, REGION, FunctionSpec

Invoked = Callable[[str, str, Any, Invocation], None]  # (function, source, event, invocation)


@dataclass(order=True)
class _AsyncEvent:
    due: float
    seq: int
    payload: Any = field(compare=False)
    source: str = field(compare=False)
    received: float = field(compare=False)
    attempts: int = field(default=0, compare=False)  # invocations that ran and failed
    throttles: int = field(default=0, compare=False)
    # One request id for every attempt of the event, as Lambda keeps it across its retries.
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()), compare=False)


class AsyncInvoker:
    """Lambda's internal queue for one function's asynchronous invocations (SNS, EventBridge).

    A throttled event (the function is at its reserved concurrency) waits and is retried with backoff
    until it is older than MaximumEventAgeInSeconds (scaled), then dropped: counted as ``dropped_age``, and
    sent to the on-failure destination only if one is configured. A failed invocation is retried
    MaximumRetryAttempts times (Lambda waits ~1 and ~2 minutes: scaled by the time scale) unless the event
    is older than the max age by then (dropped as above), then sent to the on-failure destination, if any.
    """

    def __init__(self, pool: FunctionPool, spec: FunctionSpec, time_scale: float,
                 send_failure: Callable[[str, dict[str, Any]], None], on_invoked: Invoked | None = None) -> None:
        self.pool = pool
        self.spec = spec
        self.scale = time_scale
        self.send_failure = send_failure
        self.on_invoked = on_invoked
        self._heap: list[_AsyncEvent] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._running = 0
        self._stop = False
        self.stats = {"received": 0, "invoked": 0, "throttled": 0, "retried": 0, "dropped_age": 0,
                      "failed": 0, "succeeded": 0}
        self._thread = threading.Thread(target=self._loop, name=f"async-{spec.logical_id}", daemon=True)
        self._thread.start()

    @property
    def max_age(self) -> float:
        return self.spec.max_event_age_seconds * self.scale

    def submit(self, payload: Any, source: str) -> None:
        now = time.monotonic()
        with self._cond:
            self.stats["received"] += 1
            heapq.heappush(self._heap, _AsyncEvent(now, next(self._seq), payload, source, now))
            self._cond.notify()

    def pending(self) -> int:
        with self._cond:
            return len(self._heap) + self._running

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._stop and (not self._heap or self._heap[0].due > time.monotonic()):
                    self._cond.wait(None if not self._heap else max(0.0, self._heap[0].due - time.monotonic()))
                if self._stop:
                    return
                event = heapq.heappop(self._heap)
                self._running += 1
            threading.Thread(target=self._attempt, args=(event,), daemon=True).start()
            # Give the attempt a moment to take its slot, so a burst is not all started at once.
            time.sleep(0.005)

    def _requeue(self, event: _AsyncEvent, delay: float) -> None:
        with self._cond:
            event.due = time.monotonic() + delay
            event.seq = next(self._seq)
            heapq.heappush(self._heap, event)
            self._running -= 1
            self._cond.notify()

    def _done(self) -> None:
        with self._cond:
            self._running -= 1

    def _attempt(self, event: _AsyncEvent) -> None:
        age = time.monotonic() - event.received
        if age > self.max_age:
            self.stats["dropped_age"] += 1
            self._failure(event, "EventAgeExceeded", None)
            self._done()
            return
        inv = self.pool.try_invoke(event.payload, request_id=event.request_id)
        if inv.throttled:
            self.stats["throttled"] += 1
            event.throttles += 1
            # Lambda backs off from ~1 s up to 5 minutes between throttled retries; scaled, with a floor.
            delay = max(0.2, min(2 ** min(event.throttles - 1, 10), 300) * self.scale)
            self._requeue(event, min(delay, max(0.2, self.max_age - age)))
            return
        self.stats["invoked"] += 1
        if self.on_invoked:
            self.on_invoked(self.spec.logical_id, event.source, event.payload, inv)
        if inv.ok:
            self.stats["succeeded"] += 1
            self._done()
            return
        event.attempts += 1
        if event.attempts <= self.spec.max_retry_attempts:
            self.stats["retried"] += 1
            self._requeue(event, max(0.2, 60.0 * event.attempts * self.scale))
            return
        self.stats["failed"] += 1
        self._failure(event, "RetriesExhausted", inv)
        self._done()

    def _failure(self, event: _AsyncEvent, condition: str, inv: Invocation | None) -> None:
        if not self.spec.on_failure:
            return
        record = {
            "version": "1.0",
            "timestamp": now_iso(),
            "requestContext": {
                "requestId": inv.request_id if inv else str(uuid.uuid4()),
                "functionArn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.spec.name}:$LATEST",
                "condition": condition,
                "approximateInvokeCount": event.attempts,
            },
            "requestPayload": event.payload,
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST",
                                "functionError": "Unhandled" if inv else None},
            "responsePayload": inv.error if inv else None,
        }
        self.send_failure(self.spec.on_failure, record)

