"""Trigger: decides whether a worker should run, and wakes it through ProcessTasksTopic.

Sources: the queue table's stream (INSERTs, and TTL deletions of PENDING tasks for shed counting),
TriggerTopic (tail calls from the workers) and the safety-net schedule. At most one message per queue per
invocation.

A stream batch is processed in order. A record that can never succeed (a malformed image) is logged and
counted as MalformedRecords, and not reported as failed: retrying it would block its shard for nothing. A
record that may succeed later (SNS or DynamoDB refused a call) is reported failed, and so is every later
record of the batch, unprocessed: the stream retries from the first failure, so no record takes effect
twice. Counts of the batch (TasksShed, MalformedRecords) are emitted once, when the invocation ends.
"""

from __future__ import annotations

import functools
from collections import Counter
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
    """Wakes each queue at most once per invocation; a failed publish raises PublishError and leaves the
    queue un-woken, so its record fails and is retried."""

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


class NotProcessed(Exception):
    """An earlier record of the batch failed: this one is left, unprocessed, to the retry that starts there."""


def handle_stream(event: dict[str, Any], context: LambdaContext, svc: Services) -> dict[str, Any]:
    wakeups = Wakeups(svc, "stream")
    counts: Counter[tuple[str, str]] = Counter()  # (metric, queue) -> count, emitted when the batch is done
    first_failure: list[str] = []

    def record_handler(record: DynamoDBRecord) -> None:
        if first_failure:
            raise NotProcessed(f"not processed: record {first_failure[0]}, earlier in the batch, failed; "
                               "the stream retries from there")
        try:
            change = classify(*_read(record))
            if change.kind is ChangeKind.SHED:
                counts["TasksShed", change.queue or "unknown"] += 1
                logger.info("task shed by TTL before it was claimed", extra={"task_id": change.task_id, "queue": change.queue})
            elif change.kind in (ChangeKind.CREATED, ChangeKind.AGENT_QUEUED) and change.queue:
                wakeups.wake(change.queue)
        except InvalidTaskInput as exc:
            # It can never succeed: retrying it would only hold up its shard. Logged and counted, not failed.
            queue = _queue_of(record, svc)
            counts["MalformedRecords", queue] += 1
            logger.error(
                "stream record can never be processed: skipped",
                extra={"reason": str(exc), "event_id": record.event_id, "queue": queue,
                       "sequence_number": record.dynamodb.sequence_number if record.dynamodb else None},
            )
        except Exception:
            first_failure.append(str(record.event_id or (record.dynamodb.sequence_number if record.dynamodb else "?")))
            raise

    result = process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
    if first_failure:
        logger.warning(
            "stream batch stopped at a failed record; it and the records after it are retried",
            extra={"event_id": first_failure[0], "failed_records": len(result.get("batchItemFailures") or [])},
        )
    # Only now, with the batch's outcome decided: a batch retried after a crash or timeout counts nothing twice.
    for (metric, queue), value in sorted(counts.items()):
        _count(metric, queue, value)
    return result


def _read(record: DynamoDBRecord) -> tuple[str, Any, Any, Any]:
    """What classify needs: event name, user identity, new and old image (deserialized). A record that
    cannot be read (an unknown event name, an attribute value of no DynamoDB type, a number that is not
    one) is malformed: reading it again will not go better."""
    try:
        return (
            record.event_name.name if record.event_name else "",
            record.user_identity,
            record.dynamodb.new_image if record.dynamodb else None,
            record.dynamodb.old_image if record.dynamodb else None,
        )
    except (TypeError, ValueError, KeyError, AttributeError, ArithmeticError) as exc:
        raise InvalidTaskInput(f"record cannot be read: {type(exc).__name__}: {exc}") from None


def _queue_of(record: DynamoDBRecord, svc: Services) -> str:
    """The configured queue a record names, read from the raw images; "unknown" if it names none."""
    raw = record.raw_event.get("dynamodb") or {}
    for image in (raw.get("NewImage"), raw.get("OldImage")):
        value = (image or {}).get("queue")
        queue = value.get("S") if isinstance(value, dict) else None
        if isinstance(queue, str) and queue in svc.settings.queue_orders:
            return queue
    return "unknown"


def handle_tail_calls(event: dict[str, Any], svc: Services) -> dict[str, Any]:
    wakeups = Wakeups(svc, "tail-call")
    for record in event["Records"]:
        wakeups.wake(queue_of_wakeup({"Records": [record]}))
    return {"woken": wakeups.woken}


def handle_safety_net(svc: Services) -> dict[str, Any]:
    """Recover expired leases (a crashed worker's tasks go back to PENDING, or to FAILURE when their attempts
    are used up), then wake every queue that has claimable tasks, so no lost wake-up strands work. Looking
    for claimable tasks sheds the expired entries it meets (counted as TasksShed)."""
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
        finally:
            # Expired entries the check met were shed (PENDING -> SHED): count them here, once.
            shed = svc.store.drain_shed().get(queue, 0)
            if shed:
                _count("TasksShed", queue, shed)
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
