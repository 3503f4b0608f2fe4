"""The local engine's asynchronous invoker honours EventInvokeConfig as Lambda does: an event older than
MaximumEventAgeInSeconds is dropped, and goes to the on-failure destination only if one is configured."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from local.delivery.async_invoker import AsyncInvoker
from local.delivery.sandbox import Invocation
from local.template.template import FunctionSpec

SCALE = 0.01  # template seconds -> real seconds: 60 s of event age last 0.6 s here


class Pool:
    """A FunctionPool stand-in: answers each invocation with the next planned outcome (the last repeats)."""

    def __init__(self, *plan: str) -> None:
        self.plan = list(plan)
        self.ran: list[Any] = []
        self.attempts = 0
        self.request_ids: list[str | None] = []

    def try_invoke(self, event: Any, request_id: str | None = None) -> Invocation:
        outcome = self.plan[min(self.attempts, len(self.plan) - 1)]
        self.attempts += 1
        self.request_ids.append(request_id)
        if outcome == "throttle":
            return Invocation("Fn", "", throttled=True, error={"errorType": "TooManyRequestsException"})
        self.ran.append(event)
        if outcome == "fail":
            return Invocation("Fn", f"req-{self.attempts}", ok=False, error={"errorType": "Boom", "errorMessage": "boom"})
        return Invocation("Fn", f"req-{self.attempts}", ok=True, result={"done": True})


def spec(max_age: int, on_failure: str | None, retries: int = 1) -> FunctionSpec:
    return FunctionSpec(logical_id="Fn", name="stack-Fn", code_dir=Path("."), handler="app.lambda_handler",
                        timeout=3, memory=128, reserved_concurrency=1, environment={}, layer_dirs=[], events={},
                        max_retry_attempts=retries, max_event_age_seconds=max_age, on_failure=on_failure)


class Destination:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def __call__(self, arn: str, record: dict[str, Any]) -> None:
        with self.lock:
            self.sent.append((arn, record))


def run(pool: Pool, function: FunctionSpec, seconds: float) -> tuple[AsyncInvoker, Destination]:
    destination = Destination()
    invoker = AsyncInvoker(pool, function, SCALE, destination)
    try:
        invoker.submit({"queue": "work"}, "sns")
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and invoker.pending():
            time.sleep(0.02)
        assert invoker.pending() == 0, invoker.stats
    finally:
        invoker.stop()
    return invoker, destination


def test_a_throttled_event_older_than_the_max_age_is_dropped_without_a_destination():
    pool = Pool("throttle")
    invoker, destination = run(pool, spec(max_age=60, on_failure=None), seconds=5)
    assert pool.ran == []
    assert invoker.stats["dropped_age"] == 1 and invoker.stats["throttled"] >= 1
    assert destination.sent == []  # no destination configured: Lambda discards it


def test_a_throttled_event_older_than_the_max_age_goes_to_the_on_failure_destination_if_there_is_one():
    pool = Pool("throttle")
    invoker, destination = run(pool, spec(max_age=60, on_failure="arn:aws:sqs:us-east-1:123456789012:dlq"), seconds=5)
    assert invoker.stats["dropped_age"] == 1
    ((arn, record),) = destination.sent
    assert arn == "arn:aws:sqs:us-east-1:123456789012:dlq"
    assert record["requestContext"]["condition"] == "EventAgeExceeded"
    assert record["requestPayload"] == {"queue": "work"}


def test_the_max_age_bounds_the_retries_of_a_throttled_event():
    """Throttled retries stop at the max age: with 60 s (0.6 s here) the event is dropped within about that
    time, not after the 6 hours of the default age."""
    pool = Pool("throttle")
    started = time.monotonic()
    invoker, _ = run(pool, spec(max_age=60, on_failure=None), seconds=5)
    elapsed = time.monotonic() - started
    assert 0.6 <= elapsed < 0.6 + 1.0, elapsed
    assert invoker.stats["dropped_age"] == 1


def test_a_retry_after_a_function_error_that_would_run_past_the_max_age_is_dropped():
    # Lambda retries a failed event after about a minute (0.6 s here): past a 60 s max age, so it never runs again.
    pool = Pool("fail", "ok")
    invoker, destination = run(pool, spec(max_age=60, on_failure=None, retries=2), seconds=5)
    assert len(pool.ran) == 1
    assert invoker.stats["dropped_age"] == 1 and invoker.stats["succeeded"] == 0
    assert destination.sent == []


def test_an_event_within_its_max_age_is_delivered_after_throttles():
    pool = Pool("throttle", "throttle", "ok")
    invoker, destination = run(pool, spec(max_age=300, on_failure=None), seconds=10)
    assert len(pool.ran) == 1
    assert invoker.stats["succeeded"] == 1 and invoker.stats["dropped_age"] == 0
    assert destination.sent == []


def test_every_attempt_of_an_event_carries_the_same_request_id():
    """Lambda keeps an asynchronous event's request id across throttles and retries (CreateTasks derives its task
    ids from it, so a retry after a partial write creates only what is missing): the engine does the same."""
    pool = Pool("throttle", "fail", "ok")
    invoker, _ = run(pool, spec(max_age=3600, on_failure=None, retries=2), seconds=10)
    assert invoker.stats["succeeded"] == 1 and pool.attempts == 3
    assert len(set(pool.request_ids)) == 1 and pool.request_ids[0]
    # Another event gets another id.
    other = Pool("ok")
    run(other, spec(max_age=3600, on_failure=None), seconds=5)
    assert other.request_ids[0] != pool.request_ids[0]
