"""`taskq failed-events`: what landed in FailedEventsQueue, and what to do with it.

Two kinds of message arrive there (Lambda writes both; see docs/operations.md):

- an **asynchronous invocation** of CreateTasks (the schedule's) that failed after Lambda's retries, or grew older
  than MaximumEventAgeInSeconds: the record carries the original event (``requestPayload``), the request id and the
  error. ``--redrive`` invokes the function again with that event (asynchronously, as the schedule does) and deletes
  the message once Lambda accepted the invoke; a new failure lands in the queue again as a new message. A CreateTasks
  event is sent with the task ids its failed invocation derived from its request id, so the redrive creates only
  the tasks that invocation did not write (never a duplicate, never a reset of a task a worker took).
- a **stream batch** Trigger could not process after its retries: the record names the stream, shard and
  sequence-number range, not the records (``DDBStreamBatchInfo``). It cannot be re-invoked; what it meant is
  wake-ups (the safety net has re-woken every queue with claimable work since) and TTL deletions of PENDING tasks
  (missing from TasksShed). Read the records while the stream keeps them (24 hours) with the commands printed, then
  ``--delete`` the message.

Reading does not delete: messages are received with a short visibility timeout and made visible again at once
(ChangeMessageVisibility 0) unless they were redriven or deleted.

This module reads and interprets the messages (and builds a redrive's event); the command itself, its options and
its connection are in taskq/failed_events_command.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from taskq import output
from taskq.connection import CONFIG, CliError

_STREAM_INFO_KEYS = ("DDBStreamBatchInfo", "KinesisBatchInfo")


class FailedEventsError(CliError):
    """An expected error of this command (printed as one line by taskq.main, exit status 1)."""


@dataclass
class FailedEventsTarget:
    session: Any
    endpoint_url: str | None
    queue_url: str
    create_tasks_function: str | None = None  # the stack's CreateTasksFunctionName, when known

    def client(self, service: str) -> Any:
        return self.session.client(service, endpoint_url=self.endpoint_url, config=CONFIG)


@dataclass
class FailedEvent:
    """One message of FailedEventsQueue, read."""

    message_id: str
    receipt_handle: str
    sent_ms: int | None
    receive_count: int | None
    source: str  # "async" (an asynchronous invocation), "stream" (a stream batch), "unknown"
    function_arn: str | None = None
    condition: str | None = None
    attempts: int | None = None
    request_id: str | None = None
    error: str | None = None
    event: Any = None  # the original event (async)
    batch: dict[str, Any] | None = None  # DDBStreamBatchInfo (stream)
    raw: Any = None  # the body, when it is not a Lambda failure record
    notes: list[str] = field(default_factory=list)

    @property
    def function(self) -> str | None:
        """The function's name (an ARN's 7th field; a qualifier such as $LATEST left out)."""
        if not self.function_arn:
            return None
        parts = self.function_arn.split(":")
        return parts[6] if len(parts) > 6 else self.function_arn

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.message_id,
            "sent": output.iso(self.sent_ms),
            "receiveCount": self.receive_count,
            "source": self.source,
            "function": self.function,
            "functionArn": self.function_arn,
            "condition": self.condition,
            "attempts": self.attempts,
            "requestId": self.request_id,
            "error": self.error,
        }
        if self.source == "async":
            data["event"] = self.event
        elif self.source == "stream":
            data["batch"] = self.batch
            data["readRecords"] = stream_commands(self.batch or {})
        else:
            data["body"] = self.raw
        return data


# ---- reading -------------------------------------------------------------------------------------------------

def receive_all(sqs: Any, queue_url: str, limit: int, visibility: int, wait_seconds: int) -> list[dict[str, Any]]:
    """Up to ``limit`` messages, each once (by id, with its latest receipt handle), hidden for ``visibility`` s."""
    found: dict[str, dict[str, Any]] = {}
    while len(found) < limit:
        batch = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=min(10, limit - len(found)),
            VisibilityTimeout=visibility,
            WaitTimeSeconds=wait_seconds,
            AttributeNames=["All"],
        ).get("Messages", [])
        fresh = [m for m in batch if m["MessageId"] not in found]
        for message in batch:
            found[message["MessageId"]] = message
        if not fresh:  # empty, or only messages seen already (their visibility ran out while we read): done
            break
    return list(found.values())


def parse(message: dict[str, Any]) -> FailedEvent:
    attributes = message.get("Attributes") or {}
    event = FailedEvent(
        message_id=message["MessageId"],
        receipt_handle=message["ReceiptHandle"],
        sent_ms=_int(attributes.get("SentTimestamp")),
        receive_count=_int(attributes.get("ApproximateReceiveCount")),
        source="unknown",
    )
    try:
        body = json.loads(message.get("Body") or "")
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("requestContext"), dict):
        event.raw = message.get("Body")
        event.notes.append("not a Lambda failure record: look at the body, then --delete it")
        return event
    context = body["requestContext"]
    event.function_arn = context.get("functionArn")
    event.condition = context.get("condition")
    event.attempts = _int(context.get("approximateInvokeCount"))
    event.request_id = context.get("requestId")
    response = body.get("responseContext") or {}
    info_key = next((k for k in _STREAM_INFO_KEYS if k in body), None)
    if info_key:
        event.source = "stream"
        event.batch = dict(body[info_key])
        event.error = response.get("functionError") or event.condition
    else:
        event.source = "async"
        event.event = body.get("requestPayload")
        event.error = _async_error(response, body.get("responsePayload"), event.condition)
    return event


def _async_error(response: dict[str, Any], payload: Any, condition: str | None) -> str | None:
    if isinstance(payload, str):
        try:
            payload = json.loads(payload)
        except ValueError:
            pass
    parts = []
    if response.get("functionError"):
        parts.append(str(response["functionError"]))
    if isinstance(payload, dict) and (payload.get("errorType") or payload.get("errorMessage")):
        parts.append(": ".join(str(payload[k]) for k in ("errorType", "errorMessage") if payload.get(k)))
    elif payload not in (None, "", {}):
        parts.append(str(payload)[:500])
    if not parts and condition == "EventAgeExceeded":
        return "EventAgeExceeded: never run within MaximumEventAgeInSeconds (throttled or the function was failing)"
    return ": ".join(parts) or condition


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def stream_commands(batch: dict[str, Any]) -> list[str]:
    """AWS CLI commands that read a failed batch's records while the stream keeps them (24 hours)."""
    arn, shard, start = batch.get("streamArn"), batch.get("shardId"), batch.get("startSequenceNumber")
    if not (arn and shard and start):
        return []
    return [
        (f"aws dynamodbstreams get-shard-iterator --stream-arn {arn} --shard-id {shard} "
         f"--shard-iterator-type AT_SEQUENCE_NUMBER --sequence-number {start}"),
        f"aws dynamodbstreams get-records --shard-iterator ITERATOR   # up to sequence number {batch.get('endSequenceNumber')}",
    ]


# ---- redrive ---------------------------------------------------------------------------------------------------

def is_create_tasks(function: str | None, known: str | None) -> bool:
    if not function:
        return False
    return function == known if known else "CreateTasks" in function


def redrive_payload(event: FailedEvent, target: FailedEventsTarget) -> Any:
    """The event to invoke the function with again. For CreateTasks, the create request with the task ids the
    failed invocation derived from its request id (``taskIds``): the redrive writes each id only if it is missing."""
    payload = event.event
    if not is_create_tasks(event.function, target.create_tasks_function) or not event.request_id:
        return payload
    if not isinstance(payload, dict):
        return payload
    body = (payload.get("detail") or {}) if "detail-type" in payload else payload
    count = body.get("count", 1) if isinstance(body, dict) else None
    if not isinstance(body, dict) or "taskIds" in body or isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 1000:
        return payload  # already idempotent (caller ids), or not a valid request: sent as it was
    from taskqueue.core.model import derived_task_ids

    event.notes.append(f"sent with the {count} task id(s) of request {event.request_id}: only missing tasks are created")
    return {**body, "taskIds": list(derived_task_ids(count, event.request_id))}


def invoke_again(lambda_client: Any, event: FailedEvent, payload: Any) -> None:
    response = lambda_client.invoke(
        FunctionName=event.function_arn, InvocationType="Event", Payload=json.dumps(payload).encode()
    )
    if response.get("StatusCode") != 202:
        raise FailedEventsError(f"Lambda did not accept the invoke of {event.function}: status {response.get('StatusCode')}")


def source_text(event: FailedEvent) -> str:
    if event.source == "async":
        return "asynchronous invocation"
    if event.source == "stream":
        return "stream batch"
    return "unknown message"


def table_of(stream_arn: str | None) -> str | None:
    if not stream_arn or ":table/" not in stream_arn:
        return None
    return "table " + stream_arn.split(":table/", 1)[1].split("/stream/", 1)[0]
