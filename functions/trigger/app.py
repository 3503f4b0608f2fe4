"""Trigger: decides whether a worker should run, and wakes it through WorkerWakeUpTopic.

Sources: the queue table's stream (INSERTs, and TTL deletions of PENDING tasks for shed counting),
TriggerTopic (tail calls from the workers), the safety-net schedule, and a queue's scheduled wake-up at its delayed
head (EventBridge Scheduler: ``{"wakeQueue": <queue>, "reason": "delayed-head"}``, taskqueue.wakeups.delayed_wakeup),
which wakes the queue as a backstop (only if no worker watches it and no wake-up is in flight). At most one message per queue per
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
other event is refused with an InvalidEvent that says what Trigger takes.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from taskqueue.core import metrics as handler_metrics
from taskqueue.core import schema
from taskqueue.core.correlation import Correlation, log_under, of_event
from taskqueue.core.errors import InvalidEvent, InvalidInput
from taskqueue.core.stream import ChangeKind, classify
from taskqueue.services import Services
from taskqueue.wakeups.backstop import Backstop, relay
from taskqueue.wakeups.delayed_wakeup import REASON as DELAYED_HEAD
from taskqueue.wakeups.delayed_wakeup import DelayedWakeups
from taskqueue.wakeups.safety_net import run_safety_net
from taskqueue.workflows.ttl import after_stream_record

logger = Logger()
tracer = Tracer()
metrics = Metrics()
# Report every failed record, even when all failed, so the stream retries from the first one.
processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)


@functools.cache
def services() -> Services:
    return Services.from_env()


_NOT_A_RECORD = "notARecord"


class NotProcessed(Exception):
    """An earlier record of the batch failed: this one is left, unprocessed, to the retry that starts there."""


def handle_stream(event: Mapping[str, Any], context: LambdaContext, svc: Services) -> dict[str, Any]:
    # The stream is the backstop of the producers' own wake-ups: it wakes only a queue nobody watches.
    wakeups = Backstop(svc.notifier, "stream", svc.handshake, outwait_lapse=True)
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
                raise InvalidEvent(f"not a DynamoDB stream record: eventSource is {source!r:.60}, not 'aws:dynamodb'")
            change = classify(*_read(record))
            after_stream_record(svc.store, record.raw_event)  # a PENDING workflow task deleted by TTL: its dependents
            if change.kind is ChangeKind.SHED:
                counts["TasksShed", change.queue or "unknown"] += 1
                logger.info("task shed by TTL before it was claimed", extra={"task_id": change.task_id, "queue": change.queue})
            elif change.kind is ChangeKind.CREATED and change.queue:
                # The wake-up carries the task that caused it and its creating request (taskqueue.core.correlation).
                wakeups.wake(change.queue, Correlation(change.request_id, change.task_id))
            elif change.kind is ChangeKind.AGENT_QUEUED and change.queue:
                wakeups.wake(change.queue)
        except InvalidInput as exc:  # InvalidEvent, or a record naming no configured queue
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
        handler_metrics.count(metric, queue, value)
    return result


def _read(record: DynamoDBRecord) -> tuple[str, Any, Any, Any]:
    """What classify needs: event name, user identity, new and old image (deserialized). A record that
    cannot be read (an unknown event name, an attribute value of no DynamoDB type or with none, a number that
    is not one) is malformed: reading it again will not go better."""
    identity = record.raw_event.get("userIdentity")
    if identity is not None and not isinstance(identity, Mapping):
        raise InvalidEvent(f"record cannot be read: userIdentity is not an object: {identity!r:.100}")
    try:
        return (
            record.event_name.name if record.event_name else "",
            identity,
            record.dynamodb.new_image if record.dynamodb else None,
            record.dynamodb.old_image if record.dynamodb else None,
        )
    except Exception as exc:  # noqa: BLE001 - reading is pure (no I/O): whatever fails here fails on every retry
        # e.g. an attribute value of no type ({} raises IndexError in the deserializer), a number that is not one
        raise InvalidEvent(f"record cannot be read: {type(exc).__name__}: {exc}") from None


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
    """A worker's tail call (or a redrive's wake-up), relayed to the queues' workers: see taskqueue.wakeups.backstop."""
    return {"woken": relay(event, svc.notifier, svc.settings)}


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
    """A queue's scheduled wake-up at its delayed head: wake it as a backstop (a watching worker, or a wake-up in
    flight, will see the task fall due)."""
    queue = event["wakeQueue"]
    if not isinstance(queue, str) or not queue:
        raise InvalidEvent(f"a delayed-head wake-up names its queue in wakeQueue (a string); got {queue!r:.60}")
    svc.settings.order_of(queue)
    wakeups = Backstop(svc.notifier, DELAYED_HEAD, svc.handshake)
    wakeups.wake(queue)
    return {"woken": wakeups.woken}


def event_source(event: object) -> str:
    """"aws:dynamodb", "aws:sns", "aws.events" or "aws.scheduler" (a delayed-head wake-up); an event that is none
    of them raises InvalidEvent."""
    expected = ("Trigger takes a DynamoDB stream batch, an SNS notification or a scheduled event (the safety net's, "
                "or a queue's delayed-head wake-up)")
    if not isinstance(event, Mapping):
        raise InvalidEvent(f"{expected}; got a {type(event).__name__}, not a JSON object")
    if "wakeQueue" in event:
        if event.get("reason") != DELAYED_HEAD:
            raise InvalidEvent(f"{expected}; a wake-up with wakeQueue has reason {DELAYED_HEAD!r}, got {event.get('reason')!r:.60}")
        return "aws.scheduler"
    if "Records" in event:
        records = event["Records"]
        if not isinstance(records, list) or not records:
            raise InvalidEvent(f"{expected}; its Records must be a non-empty list, got {records!r:.100}")
        sources = {
            str(record.get("eventSource") or record.get("EventSource") or "")
            for record in records
            if isinstance(record, Mapping)
        }
        # A stream batch is processed record by record (a bad record is skipped); a notification is checked whole.
        for source in ("aws:dynamodb", "aws:sns"):
            if source in sources:
                return source
        raise InvalidEvent(f"{expected}; got Records from {sorted(sources) or 'no source'}")
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
    # A relayed tail call keeps its chain's ids; a stream batch or the schedule starts chains of their own.
    log_under(logger, of_event(event, context.aws_request_id) if source == "aws:sns" else Correlation(context.aws_request_id))
    svc = services()
    if source == "aws:dynamodb":
        return handle_stream(event, context, svc)
    if source == "aws:sns":
        return handle_tail_calls(event, svc)
    if source == "aws.scheduler":
        return handle_delayed_head(event, svc)
    return handle_safety_net(svc, getattr(context, "invoked_function_arn", None))
