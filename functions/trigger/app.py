"""Trigger: the safety net, and a queue's scheduled wake-up at its delayed head.

Sources: the safety-net schedule (every SafetyNetScheduleRate: recover expired leases, repair delayed heads, wake a
queue with claimable work; taskqueue.wakeups.safety_net) and a queue's scheduled wake-up (EventBridge Scheduler:
``{"wakeQueue": <queue>, "reason": "delayed-head"}``, taskqueue.wakeups.delayed_wakeup), which publishes the queue's
wake-up on WorkerWakeUpTopic. Any other event is refused with an InvalidEvent that says what Trigger takes; a scheduled
event must be an EventBridge Scheduled Event as schemas/create_tasks.schema.json declares it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from taskqueue.core import metrics as handler_metrics
from taskqueue.core import schema
from taskqueue.core.correlation import Correlation, log_under
from taskqueue.core.errors import InvalidEvent, TaskQueueError
from taskqueue.services import Services
from taskqueue.wakeups.delayed_wakeup import REASON as DELAYED_HEAD
from taskqueue.wakeups.delayed_wakeup import DelayedWakeups
from taskqueue.wakeups.safety_net import run_safety_net

logger = Logger()
tracer = Tracer()
metrics = Metrics()


@functools.cache
def services() -> Services:
    return Services.from_env()


def handle_safety_net(svc: Services, own_arn: str | None = None) -> dict[str, Any]:
    """The schedule's run: see taskqueue.wakeups.safety_net. ``own_arn``: this function's, the target of the
    delayed-head schedules it sets again (its own ARN is not in its environment: a template cannot say it)."""
    return {"woken": run_safety_net(svc, scheduled_wakeups(svc, own_arn))}


def scheduled_wakeups(svc: Services, own_arn: str | None) -> DelayedWakeups | None:
    """The services' (WAKE_TARGET_ARN set), else built on this function's own ARN (once a minute: one client)."""
    if svc.wakeups is not None or not own_arn:
        return svc.wakeups
    return DelayedWakeups.from_env(svc.store, svc.clock, target_arn=own_arn)


def handle_delayed_head(event: Mapping[str, Any], svc: Services) -> dict[str, Any]:
    """A queue's scheduled wake-up at its delayed head: wake its worker, which waits for the head and claims it."""
    queue = event["wakeQueue"]
    if not isinstance(queue, str) or not queue:
        raise InvalidEvent(f"a delayed-head wake-up names its queue in wakeQueue (a string); got {queue!r:.60}")
    svc.settings.order_of(queue)
    if svc.notifier is None:
        raise TaskQueueError("WORKER_WAKE_UP_TOPIC_ARN is not set: Trigger cannot wake the queue's worker")
    svc.notifier.publish_wakeup(queue, DELAYED_HEAD)  # a refusal fails the invocation: Scheduler retries it
    handler_metrics.count("Wakeups", queue)
    return {"woken": [queue]}


def event_source(event: object) -> str:
    """"aws.events" (the safety net) or "aws.scheduler" (a delayed-head wake-up); an event that is neither raises
    InvalidEvent."""
    expected = "Trigger takes a scheduled event (the safety net's, or a queue's delayed-head wake-up)"
    if not isinstance(event, Mapping):
        raise InvalidEvent(f"{expected}; got a {type(event).__name__}, not a JSON object")
    if "wakeQueue" in event:
        if event.get("reason") != DELAYED_HEAD:
            raise InvalidEvent(f"{expected}; a wake-up with wakeQueue has reason {DELAYED_HEAD!r}, got {event.get('reason')!r:.60}")
        return "aws.scheduler"
    if schema.is_eventbridge_event(event):
        schema.check(event, schema.SCHEDULED_EVENT, "a scheduled event (the safety net)")
        return "aws.events"
    raise InvalidEvent(f"{expected}; got an event with keys {sorted(map(str, event))[:10]}")


# Trigger's metrics carry a per-queue dimension and are flushed one by one (single_metric); log_metrics adds
# only the ColdStart metric (and warns once per execution environment that it had no other metric to flush).
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    source = event_source(event)
    log_under(logger, Correlation(context.aws_request_id))
    svc = services()
    if source == "aws.scheduler":
        return handle_delayed_head(event, svc)
    return handle_safety_net(svc, getattr(context, "invoked_function_arn", None))
