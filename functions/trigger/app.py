"""Trigger: decides whether a worker should run, and wakes it through ProcessTasksTopic.

Sources: the queue table's stream (INSERTs, and TTL deletions of PENDING tasks for shed counting),
TriggerTopic (tail calls from the workers) and the safety-net schedule. At most one message per queue per
invocation.

A stream batch is processed in order. A record that can never succeed (a malformed image) is logged and
counted as MalformedRecords, and not reported as failed: retrying it would block its shard for nothing. A
record that may succeed later (SNS or DynamoDB refused a call) is reported failed, and so is every later
record of the batch, unprocessed: the stream retries from the first failure, so no record takes effect
twice. Counts of the batch (TasksShed, MalformedRecords) are emitted once, when the invocation ends. A record
that is not a DynamoDB stream record at all (not an object, no sequence number, another eventSource) is
malformed too: without a sequence number it could not even be named as failed.

An SNS notification is checked whole (every record names a configured queue) before any queue is woken; a
scheduled event must be an EventBridge Scheduled Event as schemas/create_tasks.schema.json declares it; any
other event is refused with an InvalidTaskInput that says what Trigger takes.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from taskqueue import schema
from taskqueue.errors import InvalidTaskInput, TaskQueueError
from taskqueue.notify import wakeup_queues
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


_NOT_A_RECORD = "notARecord"


class NotProcessed(Exception):
    """An earlier record of the batch failed: this one is left, unprocessed, to the retry that starts there."""


def handle_stream(event: Mapping[str, Any], context: LambdaContext, svc: Services) -> dict[str, Any]:
    wakeups = Wakeups(svc, "stream")
    counts: Counter[tuple[str, str]] = Counter()  # (metric, queue) -> count, emitted when the batch is done
    first_failure: list[str] = []

    def malformed(reason: str, event_id: object, queue: str, sequence: str | None) -> None:
        counts["MalformedRecords", queue] += 1
        logger.error(
            "stream record can never be processed: skipped",
            extra={"reason": reason, "event_id": event_id, "queue": queue, "sequence_number": sequence},
        )

    def record_handler(record: DynamoDBRecord) -> None:
        sequence = _sequence_number(record.raw_event)
        if sequence is None:
            # Not a stream record Lambda would send: it cannot be named in batchItemFailures, so it is never failed;
            # after an earlier failure it is left to the retry, which counts it.
            if not first_failure:
                raw = record.raw_event
                reason = (f"not a stream record (an object): {raw[_NOT_A_RECORD]!r:.100}" if _NOT_A_RECORD in raw
                          else "not a DynamoDB stream record: it has no dynamodb.SequenceNumber")
                malformed(reason, raw.get("eventID"), _queue_of(raw, svc), None)
            return
        if first_failure:
            raise NotProcessed(f"not processed: record {first_failure[0]}, earlier in the batch, failed; "
                               "the stream retries from there")
        try:
            source = record.raw_event.get("eventSource")
            if source != "aws:dynamodb":
                raise InvalidTaskInput(f"not a DynamoDB stream record: eventSource is {source!r:.60}, not 'aws:dynamodb'")
            change = classify(*_read(record))
            if change.kind is ChangeKind.SHED:
                counts["TasksShed", change.queue or "unknown"] += 1
                logger.info("task shed by TTL before it was claimed", extra={"task_id": change.task_id, "queue": change.queue})
            elif change.kind in (ChangeKind.CREATED, ChangeKind.AGENT_QUEUED) and change.queue:
                wakeups.wake(change.queue)
        except InvalidTaskInput as exc:
            # It can never succeed: retrying it would only hold up its shard. Logged and counted, not failed.
            malformed(str(exc), record.raw_event.get("eventID"), _queue_of(record.raw_event, svc), sequence)
        except Exception:
            first_failure.append(str(record.raw_event.get("eventID") or sequence))
            raise

    # In batch order; a record that is not even an object is wrapped, to be counted as malformed in its place.
    batch = {"Records": [dict(r) if isinstance(r, Mapping) else {_NOT_A_RECORD: r} for r in event["Records"]]}
    result = process_partial_response(event=batch, record_handler=record_handler, processor=processor, context=context)
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
    cannot be read (an unknown event name, an attribute value of no DynamoDB type or with none, a number that
    is not one) is malformed: reading it again will not go better."""
    identity = record.raw_event.get("userIdentity")
    if identity is not None and not isinstance(identity, Mapping):
        raise InvalidTaskInput(f"record cannot be read: userIdentity is not an object: {identity!r:.100}")
    try:
        return (
            record.event_name.name if record.event_name else "",
            identity,
            record.dynamodb.new_image if record.dynamodb else None,
            record.dynamodb.old_image if record.dynamodb else None,
        )
    except Exception as exc:  # noqa: BLE001 - reading is pure (no I/O): whatever fails here fails on every retry
        # e.g. an attribute value of no type ({} raises IndexError in the deserializer), a number that is not one
        raise InvalidTaskInput(f"record cannot be read: {type(exc).__name__}: {exc}") from None


def _sequence_number(raw: Mapping[str, Any]) -> str | None:
    """The record's sequence number (what batchItemFailures names it by), or None if it has none."""
    ddb = raw.get("dynamodb")
    sequence = ddb.get("SequenceNumber") if isinstance(ddb, Mapping) else None
    return sequence if isinstance(sequence, str) and sequence else None


def _queue_of(raw: Mapping[str, Any], svc: Services) -> str:
    """The configured queue a record names, read from the raw images; "unknown" if it names none."""
    ddb = raw.get("dynamodb")
    if not isinstance(ddb, Mapping):
        return "unknown"
    for image in (ddb.get("NewImage"), ddb.get("OldImage")):
        value = image.get("queue") if isinstance(image, Mapping) else None
        queue = value.get("S") if isinstance(value, Mapping) else None
        if isinstance(queue, str) and queue in svc.settings.queue_orders:
            return queue
    return "unknown"


def handle_tail_calls(event: Mapping[str, Any], svc: Services) -> dict[str, Any]:
    """Every record is checked (an SNS record naming a configured queue) before any queue is woken."""
    queues = wakeup_queues(event)
    for queue in queues:
        svc.settings.order_of(queue)
    wakeups = Wakeups(svc, "tail-call")
    # Every queue is tried; if any wake-up could not be published (after the Notifier's own retries), the
    # invocation fails, so Lambda's asynchronous retry (EventInvokeConfig MaximumRetryAttempts) delivers the
    # notification again: a lost tail call would otherwise strand the queue until the next safety-net run.
    failed: list[str] = []
    for queue in queues:
        try:
            wakeups.wake(queue)
        except TaskQueueError as exc:
            failed.append(f"{queue}: {exc}")
            logger.warning("wake-up not published; the invocation fails so Lambda retries it",
                           extra={"queue": queue, "error": str(exc)})
    if failed:
        raise TaskQueueError(
            f"could not wake {len(failed)} of {len(queues)} queue(s) (woken: {wakeups.woken}); "
            "failing so Lambda retries the notification: " + "; ".join(failed)
        )
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


def event_source(event: object) -> str:
    """"aws:dynamodb", "aws:sns" or "aws.events"; an event that is none of them raises InvalidTaskInput."""
    expected = "Trigger takes a DynamoDB stream batch, an SNS notification or a scheduled event"
    if not isinstance(event, Mapping):
        raise InvalidTaskInput(f"{expected}; got a {type(event).__name__}, not a JSON object")
    if "Records" in event:
        records = event["Records"]
        if not isinstance(records, list) or not records:
            raise InvalidTaskInput(f"{expected}; its Records must be a non-empty list, got {records!r:.100}")
        sources = {
            str(record.get("eventSource") or record.get("EventSource") or "")
            for record in records
            if isinstance(record, Mapping)
        }
        # A stream batch is processed record by record (a bad record is skipped); a notification is checked whole.
        for source in ("aws:dynamodb", "aws:sns"):
            if source in sources:
                return source
        raise InvalidTaskInput(f"{expected}; got Records from {sorted(sources) or 'no source'}")
    if schema.is_eventbridge_event(event):
        schema.check(event, schema.SCHEDULED_EVENT, "a scheduled event (the safety net)")
        return "aws.events"
    raise InvalidTaskInput(f"{expected}; got an event with keys {sorted(map(str, event))[:10]}")


# Trigger's metrics carry a per-queue dimension and are flushed one by one (single_metric).
@tracer.capture_lambda_handler
@logger.inject_lambda_context
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    source = event_source(event)
    svc = services()
    if source == "aws:dynamodb":
        return handle_stream(event, context, svc)
    if source == "aws:sns":
        return handle_tail_calls(event, svc)
    return handle_safety_net(svc)
