"""Trigger: decides whether a worker should run, and wakes it through ProcessTasksTopic.

Sources: the queue table's stream (INSERTs, and TTL deletions for shed counting), TriggerTopic (tail
calls from the workers) and the safety-net schedule. At most one message per queue per invocation.
"""

from __future__ import annotations

import functools
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from taskqueue.errors import InvalidTaskInput, TaskQueueError
from taskqueue.notify import queue_of_wakeup
from taskqueue.services import Services
from taskqueue.stream import ChangeKind, classify

logger = Logger()
tracer = Tracer()
metrics = Metrics()
# Report every failed record, even when all failed, so the stream retries from the first one.
processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)


@functools.cache
def services() -> Services:
    return Services.from_env()


class Wakeups:
    """Wakes each queue at most once per invocation; a failed publish is retried by the next record."""

    def __init__(self, svc: Services, reason: str) -> None:
        self._svc = svc
        self._reason = reason
        self.woken: list[str] = []

    def wake(self, queue: str) -> None:
        if queue in self.woken:
            return
        self._svc.notifier.wake_worker(queue, self._reason)
        self.woken.append(queue)
        _count("Wakeups", queue)
        logger.info("worker woken", extra={"queue": queue, "reason": self._reason})


def handle_stream(event: dict[str, Any], context: LambdaContext, svc: Services) -> dict[str, Any]:
    wakeups = Wakeups(svc, "stream")

    def record_handler(record: DynamoDBRecord) -> None:
        change = classify(
            record.event_name.name if record.event_name else "",
            record.user_identity,
            record.dynamodb.new_image if record.dynamodb else None,
            record.dynamodb.old_image if record.dynamodb else None,
        )
        if change.kind is ChangeKind.SHED:
            _count("TasksShed", change.queue)
            logger.info("task shed by TTL before it was claimed", extra={"task_id": change.task_id, "queue": change.queue})
        elif change.kind in (ChangeKind.CREATED, ChangeKind.AGENT_QUEUED) and change.queue:
            wakeups.wake(change.queue)

    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)


def handle_tail_calls(event: dict[str, Any], svc: Services) -> dict[str, Any]:
    wakeups = Wakeups(svc, "tail-call")
    for record in event["Records"]:
        wakeups.wake(queue_of_wakeup({"Records": [record]}))
    return {"woken": wakeups.woken}


def handle_safety_net(svc: Services) -> dict[str, Any]:
    """Recover expired leases (a crashed worker's tasks go back to PENDING, or to FAILURE when their attempts
    are used up), then wake every queue that has claimable tasks, so no lost wake-up strands work."""
    wakeups = Wakeups(svc, "safety-net")
    errors: list[str] = []
    for queue in svc.settings.queue_orders:
        try:
            recovered = svc.store.recover_expired_leases(queue)
            for status, metric in (("PENDING", "LeasesRecovered"), ("FAILURE", "TasksFailed")):
                if recovered[status]:
                    _count(metric, queue, recovered[status])
                    logger.warning("expired leases recovered", extra={"queue": queue, "new_status": status, "count": recovered[status]})
            if svc.store.has_claimable(queue):
                wakeups.wake(queue)
        except TaskQueueError as exc:
            errors.append(f"{queue}: {exc}")
    if errors:
        raise TaskQueueError("safety net could not wake every queue: " + "; ".join(errors))
    return {"woken": wakeups.woken}


def _count(name: str, queue: str | None, value: int = 1) -> None:
    with single_metric(name=name, unit=MetricUnit.Count, value=value, namespace=metrics.namespace) as metric:
        metric.add_dimension(name="queue", value=queue or "unknown")


def event_source(event: dict[str, Any]) -> str:
    records = event.get("Records") or []
    if records:
        return str(records[0].get("eventSource") or records[0].get("EventSource") or "")
    if event.get("detail-type") == "Scheduled Event":
        return "aws.events"
    return ""


# Trigger's metrics carry a per-queue dimension and are flushed one by one (single_metric).
@tracer.capture_lambda_handler
@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    svc = services()
    source = event_source(event)
    if source == "aws:dynamodb":
        return handle_stream(event, context, svc)
    if source == "aws:sns":
        return handle_tail_calls(event, svc)
    if source == "aws.events":
        return handle_safety_net(svc)
    raise InvalidTaskInput(
        "Trigger takes a DynamoDB stream batch, an SNS notification or a scheduled event; "
        f"got an event with keys {sorted(event)[:10]}"
    )
