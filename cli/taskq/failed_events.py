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
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from taskq import output

Printer = Callable[[str], None]

_CONFIG = Config(retries={"mode": "standard", "max_attempts": 6}, connect_timeout=5, read_timeout=30)
_STREAM_INFO_KEYS = ("DDBStreamBatchInfo", "KinesisBatchInfo")


class FailedEventsError(Exception):
    """An expected error of this command (printed as one line by taskq.main, exit status 1)."""


@dataclass
class FailedEventsTarget:
    session: Any
    endpoint_url: str | None
    queue_url: str
    create_tasks_function: str | None = None  # the stack's CreateTasksFunctionName, when known

    def client(self, service: str) -> Any:
        return self.session.client(service, endpoint_url=self.endpoint_url, config=_CONFIG)


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


def connect(args: argparse.Namespace) -> FailedEventsTarget:
    """The queue from --queue-url, the stack output FailedEventsQueueUrl (--stack-name), or FAILED_EVENTS_QUEUE_URL."""
    session = boto3.session.Session(region_name=args.region, profile_name=args.profile)
    queue_url = getattr(args, "queue_url", None)
    create_tasks = None
    if args.stack_name:
        outputs = _stack_outputs(session, args.stack_name, args.endpoint_url)
        create_tasks = outputs.get("CreateTasksFunctionName")
        if not queue_url:
            queue_url = outputs.get("FailedEventsQueueUrl")
            if not queue_url:
                raise FailedEventsError(
                    f"stack {args.stack_name!r} has no output FailedEventsQueueUrl: is it this application's stack?"
                )
    queue_url = queue_url or os.environ.get("FAILED_EVENTS_QUEUE_URL", "").strip()
    if not queue_url:
        raise FailedEventsError("no failed-events queue: pass --stack-name NAME or --queue-url URL (or set FAILED_EVENTS_QUEUE_URL)")
    return FailedEventsTarget(session, args.endpoint_url, queue_url, create_tasks)


def _stack_outputs(session: Any, stack_name: str, endpoint_url: str | None) -> dict[str, str]:
    cfn = session.client("cloudformation", endpoint_url=endpoint_url, config=_CONFIG)
    try:
        stack = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
    except ClientError as exc:
        raise FailedEventsError(f"cannot read stack {stack_name!r}: {exc.response.get('Error', {}).get('Message', exc)}") from None
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


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
        f"aws dynamodbstreams get-shard-iterator --stream-arn {arn} --shard-id {shard} "
        f"--shard-iterator-type AT_SEQUENCE_NUMBER --sequence-number {start}",
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
    from taskqueue.model import derived_task_ids

    event.notes.append(f"sent with the {count} task id(s) of request {event.request_id}: only missing tasks are created")
    return {**body, "taskIds": list(derived_task_ids(count, event.request_id))}


def invoke_again(lambda_client: Any, event: FailedEvent, payload: Any) -> None:
    response = lambda_client.invoke(
        FunctionName=event.function_arn, InvocationType="Event", Payload=json.dumps(payload).encode()
    )
    if response.get("StatusCode") != 202:
        raise FailedEventsError(f"Lambda did not accept the invoke of {event.function}: status {response.get('StatusCode')}")


# ---- the command -------------------------------------------------------------------------------------------------

def run(t: FailedEventsTarget, args: argparse.Namespace, say: Printer) -> int:
    sqs = t.client("sqs")
    limit = args.max
    if args.delete:
        limit = max(limit, 1000)  # look through the queue for the one message
    messages = [parse(m) for m in receive_all(sqs, t.queue_url, limit, args.visibility_timeout, args.wait_seconds)]
    handled: set[str] = set()
    try:
        if args.delete:
            return _delete(sqs, t, messages, args, say, handled)
        if args.redrive is not None:
            return _redrive(sqs, t, messages, args, say, handled)
        _show(t, messages, args, say)
        return 0
    finally:
        _release(sqs, t.queue_url, [m for m in messages if m.message_id not in handled])


def _release(sqs: Any, queue_url: str, messages: Sequence[FailedEvent]) -> None:
    """Make the messages read but not handled visible again at once (best effort: else after the timeout)."""
    for start in range(0, len(messages), 10):
        entries = [
            {"Id": str(n), "ReceiptHandle": m.receipt_handle, "VisibilityTimeout": 0}
            for n, m in enumerate(messages[start : start + 10])
        ]
        try:
            sqs.change_message_visibility_batch(QueueUrl=queue_url, Entries=entries)
        except ClientError:
            return


def _delete(sqs: Any, t: FailedEventsTarget, messages: list[FailedEvent], args: argparse.Namespace, say: Printer, handled: set[str]) -> int:
    match = next((m for m in messages if m.message_id == args.delete), None)
    if match is None:
        raise FailedEventsError(
            f"no message {args.delete!r} in {t.queue_url}: deleted already, or held by another reader (try again after "
            "its visibility timeout); `taskq failed-events` lists the ids"
        )
    sqs.delete_message(QueueUrl=t.queue_url, ReceiptHandle=match.receipt_handle)
    handled.add(match.message_id)
    if args.json:
        say(output.dumps({"queueUrl": t.queue_url, "deleted": [match.message_id]}))
    else:
        say(f"deleted {match.message_id} ({_source_text(match)}, {match.function or 'unknown function'})")
    return 0


def _redrive(sqs: Any, t: FailedEventsTarget, messages: list[FailedEvent], args: argparse.Namespace, say: Printer, handled: set[str]) -> int:
    wanted = list(dict.fromkeys(args.redrive))
    by_id = {m.message_id: m for m in messages}
    missing = [i for i in wanted if i not in by_id]
    if missing:
        raise FailedEventsError(f"no message {', '.join(map(repr, missing))} in {t.queue_url}; `taskq failed-events` lists the ids")
    chosen = [by_id[i] for i in wanted] if wanted else messages
    lambda_client = t.client("lambda")
    redriven: list[dict[str, Any]] = []
    kept: list[dict[str, Any]] = []
    status = 0
    for event in chosen:
        if event.source != "async" or not event.function_arn:
            reason = (
                "a stream batch cannot be invoked again: read its records with the commands shown, then --delete it"
                if event.source == "stream" else "not a Lambda failure record: look at it, then --delete it"
            )
            kept.append({"id": event.message_id, "source": event.source, "reason": reason})
            if wanted:
                status = 1  # asked by id for something that cannot be redriven
            continue
        payload = redrive_payload(event, t)
        try:
            invoke_again(lambda_client, event, payload)
        except (ClientError, FailedEventsError) as exc:
            detail = exc.response.get("Error", {}).get("Message", str(exc)) if isinstance(exc, ClientError) else str(exc)
            kept.append({"id": event.message_id, "source": event.source, "reason": f"invoke failed, message kept: {detail}"})
            status = 1
            continue
        sqs.delete_message(QueueUrl=t.queue_url, ReceiptHandle=event.receipt_handle)
        handled.add(event.message_id)
        redriven.append({"id": event.message_id, "function": event.function, "event": payload, "notes": event.notes})
    if args.json:
        say(output.dumps({"queueUrl": t.queue_url, "redriven": redriven, "kept": kept}))
        return status
    if not chosen:
        say(f"FailedEventsQueue is empty ({t.queue_url})")
    for item in redriven:
        say(f"redriven {item['id']}: {item['function']} invoked again (asynchronously); message deleted")
        for note in item["notes"]:
            say(f"  {note}")
    for item in kept:
        say(f"kept {item['id']} ({item['source']}): {item['reason']}")
    return status


def _source_text(event: FailedEvent) -> str:
    if event.source == "async":
        return "asynchronous invocation"
    if event.source == "stream":
        return "stream batch"
    return "unknown message"


def _show(t: FailedEventsTarget, messages: list[FailedEvent], args: argparse.Namespace, say: Printer) -> None:
    if args.json:
        say(output.dumps({"queueUrl": t.queue_url, "messages": [m.as_dict() for m in messages]}))
        return
    if not messages:
        say(f"FailedEventsQueue is empty ({t.queue_url})")
        return
    more = " (the first --max; there may be more)" if len(messages) >= args.max else ""
    say(f"{len(messages)} message(s) in FailedEventsQueue{more}:")
    for m in messages:
        say("")
        say(f"{m.message_id}  sent {m.sent_ms and output.iso(m.sent_ms) or '?'}  received {m.receive_count or '?'}x")
        attempts = f" after {m.attempts} attempt(s)" if m.attempts else ""
        say(f"  source    {_source_text(m)}" + (f" ({m.condition}{attempts})" if m.condition else ""))
        if m.function:
            say(f"  function  {m.function}")
        if m.error:
            say(f"  error     {m.error}")
        if m.source == "async":
            say(f"  request   {m.request_id}")
            say(f"  event     {json.dumps(m.event, separators=(', ', ': '))[:1000]}")
        elif m.source == "stream":
            b = m.batch or {}
            table = _table_of(b.get("streamArn"))
            say(f"  batch     {b.get('batchSize', '?')} record(s) of {table or b.get('streamArn')}, shard {b.get('shardId')}, "
                f"sequence {b.get('startSequenceNumber')} .. {b.get('endSequenceNumber')}")
            say(f"  arrived   {b.get('approximateArrivalOfFirstRecord')} .. {b.get('approximateArrivalOfLastRecord')}")
            for command in stream_commands(b):
                say(f"  read      {command}")
        else:
            say(f"  body      {str(m.raw)[:1000]}")
        for note in m.notes:
            say(f"  note      {note}")
    say("")
    if any(m.source == "async" for m in messages):
        say("Asynchronous invocations: fix the cause, then `taskq failed-events --redrive [ID ...]` invokes the function "
            "again with the original event and deletes the message.")
    if any(m.source == "stream" for m in messages):
        say("Stream batches cannot be invoked again: they were wake-ups (the safety net has re-woken every queue with "
            "claimable work since) and TTL deletions of PENDING tasks (missing from TasksShed). Read the records within "
            "24 hours if you need them, fix the cause (Trigger's logs), then `taskq failed-events --delete ID`.")


def _table_of(stream_arn: str | None) -> str | None:
    if not stream_arn or ":table/" not in stream_arn:
        return None
    return "table " + stream_arn.split(":table/", 1)[1].split("/stream/", 1)[0]


def add_parser(command: Callable[..., argparse.ArgumentParser]) -> None:
    """The subcommand, registered through taskq.main's ``command`` helper."""
    p = command(
        "failed-events", run,
        "List what landed in FailedEventsQueue (failed stream batches of Trigger, failed asynchronous invocations of "
        "CreateTasks) without deleting it; --redrive invokes asynchronous failures again, --delete removes one message.",
    )
    p.set_defaults(connector=connect)
    p.add_argument("--queue-url", help="the queue (default: stack output FailedEventsQueueUrl, or env FAILED_EVENTS_QUEUE_URL)")
    p.add_argument("--max", type=output.positive_int, default=100, help="read at most this many messages (default 100)")
    p.add_argument("--visibility-timeout", type=_seconds(0, 43200), default=30,
                   help="seconds the messages read stay hidden from other readers while this runs (default 30; "
                        "those not redriven or deleted are made visible again at the end)")
    p.add_argument("--wait-seconds", type=_seconds(0, 20), default=1, help="long-poll wait of each receive (default 1)")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--redrive", nargs="*", metavar="ID",
                        help="invoke the function again with the original event for these asynchronous-invocation "
                             "failures (all of them without ids), and delete each message Lambda accepted")
    action.add_argument("--delete", metavar="ID", help="delete one message you have handled")


def _seconds(low: int, high: int) -> Callable[[str], int]:
    def parse_seconds(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} must be from {low} to {high}")
        return value

    return parse_seconds
