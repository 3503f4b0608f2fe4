"""`taskq failed-events`: list, redrive and delete what landed in FailedEventsQueue (what the messages are and
mean: taskq/failed_events.py). The queue URL comes from the stack's output FailedEventsQueueUrl (the local stack's
too), ``--queue-url`` or env FAILED_EVENTS_QUEUE_URL."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from botocore.exceptions import ClientError

from taskq import output
from taskq.connection import Printer, open_connection
from taskq.failed_events import (
    FailedEvent,
    FailedEventsError,
    FailedEventsTarget,
    invoke_again,
    parse,
    receive_all,
    redrive_payload,
    source_text,
    stream_commands,
    table_of,
)


def connect(args: argparse.Namespace) -> FailedEventsTarget:
    """The queue from --queue-url, the resolved stack's output FailedEventsQueueUrl, or FAILED_EVENTS_QUEUE_URL."""
    env_url = os.environ.get("FAILED_EVENTS_QUEUE_URL", "").strip()
    conn = open_connection(args, explicit=bool(args.queue_url or env_url))
    queue_url = args.queue_url
    create_tasks = None
    if conn.stack is not None:
        create_tasks = conn.stack.outputs.get("CreateTasksFunctionName")
        if not queue_url:
            queue_url = conn.stack.outputs.get("FailedEventsQueueUrl")
            if not queue_url:
                raise FailedEventsError(
                    f"stack {conn.stack.name!r} has no output FailedEventsQueueUrl: is it this application's stack?"
                )
    queue_url = queue_url or env_url
    if not queue_url:
        raise FailedEventsError(
            "no failed-events queue: pass --stack-name NAME or --queue-url URL (or set FAILED_EVENTS_QUEUE_URL), "
            "or start a local stack with `make up`"
        )
    return FailedEventsTarget(conn.session, conn.endpoint_url, queue_url, create_tasks)


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
        release(sqs, t.queue_url, [m for m in messages if m.message_id not in handled])


def release(sqs: Any, queue_url: str, messages: Sequence[FailedEvent]) -> None:
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
        say(f"deleted {match.message_id} ({source_text(match)}, {match.function or 'unknown function'})")
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
        say(f"  source    {source_text(m)}" + (f" ({m.condition}{attempts})" if m.condition else ""))
        if m.function:
            say(f"  function  {m.function}")
        if m.error:
            say(f"  error     {m.error}")
        if m.source == "async":
            say(f"  request   {m.request_id}")
            say(f"  event     {json.dumps(m.event, separators=(', ', ': '))[:1000]}")
        elif m.source == "stream":
            b = m.batch or {}
            table = table_of(b.get("streamArn"))
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
