"""`taskq stats / list / show / peek / create / cancel / reprioritize / touch / redrive`: reading the queues and
operating on one task (or a queue's dead letters)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from taskq import output
from taskq.connection import CliError, Command, Printer, Target
from taskqueue.client import TaskQueueClient
from taskqueue.core.states import TaskStatus
from taskqueue.store import LISTABLE_BY_INDEX


def cmd_stats(t: Target, args: argparse.Namespace, say: Printer) -> int:
    stats = t.store.stats(args.queue or None, include_success=args.include_success)
    queues = [s.queue for s in stats]
    shed = None if args.no_shed else shed_counts(t, queues, args.shed_hours)
    paused = paused_queues(t, queues)
    if args.json:
        rows = [
            output.stats_dict(s) | {"paused": s.queue in paused} | ({"shed": shed.get(s.queue)} if shed is not None else {})
            for s in stats
        ]
        window = None if shed is None or t.local else args.shed_hours
        say(output.dumps({"stats": rows, "shedSource": _shed_source(t, shed), "shedWindowHours": window}))
        return 0
    say(output.table(*output.stats_rows(stats, shed, paused)))
    if shed is not None:
        if t.local:
            say("\nSHED = tasks in state SHED still in the table (kept for RetentionSeconds); local stack: counted "
                "from the table, no CloudWatch")
        else:
            known = any(v is not None for v in shed.values())
            say(f"\nSHED = tasks dropped by TTL while PENDING in the last {args.shed_hours:g} h (CloudWatch TasksShed)"
                + ("" if known else "; n/a: CloudWatch could not be read"))
    if paused:
        say(f"paused: {', '.join(sorted(paused))} (workers claim nothing from them; `taskq resume QUEUE`)")
    return 0


def _shed_source(t: Target, shed: dict[str, float | None] | None) -> str | None:
    if shed is None:
        return None
    return "table" if t.local else "cloudwatch"


def paused_queues(t: Target, queues: Sequence[str]) -> set[str]:
    """The queues among ``queues`` that are paused (one GetItem each)."""
    return {queue for queue in queues if t.store.is_paused(queue)}


def shed_counts(t: Target, queues: Sequence[str], hours: float) -> dict[str, float | None]:
    """Tasks shed per queue. Locally there is no CloudWatch: the SHED tasks still in the table (a filtered
    COUNT scan). On AWS the TasksShed metric's sum over the last ``hours``, which also counts PENDING tasks
    that DynamoDB TTL deleted before any reader shed them (best effort: None if CloudWatch is unreadable)."""
    if t.local:
        return {queue: float(t.store.count(queue, TaskStatus.SHED)) for queue in queues}
    end = datetime.now(UTC)
    seconds = max(60, int(hours * 3600) // 60 * 60)
    found: dict[str, float | None] = {}
    try:
        cloudwatch = t.client("cloudwatch")
        for queue in queues:
            points = cloudwatch.get_metric_statistics(
                Namespace="TaskQueues",
                MetricName="TasksShed",
                Dimensions=[{"Name": "service", "Value": "taskqueue"}, {"Name": "queue", "Value": queue}],
                StartTime=end - timedelta(seconds=seconds),
                EndTime=end,
                Period=seconds,
                Statistics=["Sum"],
            )["Datapoints"]
            found[queue] = sum(p.get("Sum", 0.0) for p in points)
    except (ClientError, BotoCoreError):
        return {q: None for q in queues}
    return found


def cmd_list(t: Target, args: argparse.Namespace, say: Printer) -> int:
    if args.group and not args.queue:
        raise CliError("--group needs --queue QUEUE: a group's tasks are listed one queue at a time")
    page = t.store.list_tasks(args.queue, args.state, args.limit, args.page_token, group=args.group)
    if args.json:
        say(output.dumps({"tasks": [output.task_dict(x) for x in page.tasks], "nextToken": page.next_token}))
        return 0
    if page.tasks:
        say(output.table(*output.task_rows(page.tasks, t.clock.now_ms())))
    else:
        say(nothing_listed(args.queue, args.state, bool(args.page_token)))
    if page.next_token:
        say(f"\nmore: add --page-token {page.next_token}")
    return 0


def nothing_listed(queue: str | None, state: str | None, later_page: bool) -> str:
    """What an empty listing means, truly: without --state only the index-backed states were walked."""
    where = f"queue {queue!r}" if queue else "any queue"
    if later_page:
        return f"no more tasks in {where}"
    if state:
        return f"no {state} tasks in {where}"
    states = ", ".join(s.value for s in LISTABLE_BY_INDEX[:-1]) + f" or {LISTABLE_BY_INDEX[-1].value}"
    return (f"no {states} tasks in {where}; finished tasks are listed by name "
            "(--state SUCCESS or --state SHED: a table scan)")


def cmd_show(t: Target, args: argparse.Namespace, say: Printer) -> int:
    task = t.store.get(args.task_id)
    say(output.dumps(output.task_dict(task)) if args.json else output.task_detail(task))
    return 0


def cmd_peek(t: Target, args: argparse.Namespace, say: Printer) -> int:
    task = t.store.peek(args.queue_name)
    if args.json:
        say(output.dumps({"next": output.task_dict(task) if task else None}))
    elif task is None:
        say(f"queue {args.queue_name!r} has no claimable task")
    else:
        say(output.task_detail(task))
    return 0


def cmd_create(t: Target, args: argparse.Namespace, say: Printer) -> int:
    body: dict[str, Any] = _read_json_arg(args.input, "--input") if args.input else {}
    if not isinstance(body, dict):
        raise CliError("--input must be a JSON object (the CreateTasks input)")
    for field, value in (
        ("queue", args.queue),
        ("count", args.count),
        ("priority", args.priority),
        ("ttlSeconds", args.ttl_seconds),
        ("maxAttempts", args.max_attempts),
        ("delaySeconds", args.delay_seconds),
        ("runSeconds", args.run_seconds),
        ("taskIds", args.task_id),
        ("group", args.group),
    ):
        if value is not None:
            body[field] = value
    if args.payload is not None:
        body["payload"] = _read_json_arg(args.payload, "--payload")
    summary = TaskQueueClient(t.services()).create(body)  # the producer client: CreateTasks' own checks and path
    if args.json:
        say(output.dumps(summary.as_dict()))
        return 0
    say(f"created {summary.created} task(s) in queue {summary.queue!r}"
        + (f" ({summary.already_existed} already existed)" if summary.already_existed else ""))
    for task_id in summary.task_ids:
        say(f"  {task_id}")
    return 0


def _single(operation: Callable[[Target, argparse.Namespace], Any], verb: str) -> Callable[..., int]:
    def command(t: Target, args: argparse.Namespace, say: Printer) -> int:
        task = operation(t, args)
        if args.json:
            say(output.dumps(output.task_dict(task)))
        else:
            say(f"{verb} {task.task_id}: now {task.status}, priority {task.priority}")
        return 0

    return command


cmd_cancel = _single(lambda t, a: t.store.cancel(a.task_id), "cancelled")
cmd_reprioritize = _single(lambda t, a: t.store.reprioritize(a.task_id, a.priority), "reprioritized")
cmd_touch = _single(lambda t, a: t.store.touch(a.task_id), "touched")


def cmd_redrive(t: Target, args: argparse.Namespace, say: Printer) -> int:
    if bool(args.task_id) == bool(args.all):
        raise CliError("name one task (taskq redrive ID) or a whole queue (taskq redrive --all --queue Q)")
    if args.all and not args.queue:
        raise CliError("--all needs --queue QUEUE: redrive dead letters one queue at a time")
    if args.task_id:
        redriven, refused = [t.store.redrive(args.task_id, ttl_seconds=args.ttl_seconds)], []
    else:
        result = t.store.redrive_all(args.queue, TaskStatus(args.from_state), args.limit, args.ttl_seconds)
        redriven, refused = result.redriven, [{"taskId": i, "error": e} for i, e in result.refused]
    if args.json:
        say(output.dumps({"redriven": [x.task_id for x in redriven], "refused": refused}))
    else:
        if args.all and not redriven and not refused:
            say(f"queue {args.queue!r} has no {args.from_state} tasks")
        for task in redriven:
            say(f"redriven {task.task_id}: now PENDING, attempts reset, ttl {output.iso(task.ttl * 1000)}")
        for item in refused:
            say(f"skipped {item['taskId']}: {item['error']}")
    return 1 if refused else 0


def _read_json_arg(text: str, flag: str) -> Any:
    """A JSON value given inline or as @path."""
    try:
        raw = Path(text[1:]).read_text() if text.startswith("@") else text
        return json.loads(raw)
    except OSError as exc:
        raise CliError(f"{flag}: cannot read {text[1:]!r}: {exc.strerror}") from None
    except ValueError as exc:
        raise CliError(f"{flag} is not valid JSON: {exc}") from None


def add_parsers(command: Command) -> None:
    p = command("stats", cmd_stats, "Counts per queue and state, waiting ages, tasks shed, paused queues (index queries; SUCCESS, and SHED locally, by a table scan).")
    p.add_argument("--queue", action="append", help="only this queue (repeatable; default: every configured queue)")
    p.add_argument("--include-success", action="store_true", help="also count SUCCESS tasks (a filtered table scan: costly on a big table)")
    p.add_argument("--shed-hours", type=float, default=24.0, help="window for the shed count from CloudWatch (default 24; the local stack counts SHED tasks in the table)")
    p.add_argument("--no-shed", action="store_true", help="do not count shed tasks (CloudWatch on AWS, a table scan locally)")

    p = command("list", cmd_list, "List tasks, newest first (PENDING: in the order the queue serves them).")
    p.add_argument("--queue", help="only this queue (default: every configured queue)")
    p.add_argument("--state", type=str.upper, choices=[s.value for s in TaskStatus],
                   help="only this state (default: PENDING, TAKEN, FAILURE, CANCELLED; SUCCESS and SHED are a table scan, ask by name)")
    p.add_argument("--limit", type=output.positive_int, default=20, help="tasks per page (default 20)")
    p.add_argument("--page-token", help="the token printed under the previous page")
    p.add_argument("--group", help='only this group\'s waiting (PENDING) tasks, with --queue ("default": the tasks '
                   "without a group, which a PENDING listing without --group shows)")

    p = command("show", cmd_show, "Show one task with every attribute.")
    p.add_argument("task_id", metavar="ID")

    p = command("peek", cmd_peek, "Show the task a queue would serve next, without claiming it.")
    p.add_argument("queue_name", metavar="QUEUE")

    p = command("create", cmd_create, "Create tasks (the CreateTasks input: queue, count, priority, ttlSeconds, payload, maxAttempts, delaySeconds, runSeconds, taskIds, group).")
    p.add_argument("--input", help='the whole CreateTasks input as JSON, or @file.json (the flags below override its fields)')
    p.add_argument("--queue", help="queue name (default work)")
    p.add_argument("--count", type=output.positive_int, help="how many tasks (default 1, or the number of --task-id)")
    p.add_argument("--priority", type=int, help="0..999, higher is served first (default 0)")
    p.add_argument("--ttl-seconds", type=output.positive_int, help="time to live; past it the task is shed (default DEFAULT_TTL_SECONDS)")
    p.add_argument("--payload", help="JSON object, or @file.json")
    p.add_argument("--max-attempts", type=output.positive_int, help="attempts before FAILURE (default MAX_ATTEMPTS)")
    p.add_argument("--delay-seconds", type=int, help="not claimable before now + this")
    p.add_argument("--run-seconds", type=output.positive_int,
                   help="how long each task may run (default DEFAULT_RUN_SECONDS; at most ProcessTasksTimeout less 15 s)")
    p.add_argument("--task-id", action="append", help="your own id (repeatable): creating the same id twice makes one task")
    p.add_argument("--group", help="the tasks' fair-share group (a tenant, a customer; docs/fairness.md); default: none")

    p = command("cancel", cmd_cancel, "Cancel a PENDING task (it goes to CANCELLED; redrive brings it back).")
    p.add_argument("task_id", metavar="ID")

    p = command("reprioritize", cmd_reprioritize, "Give a PENDING task a new priority (0..999, higher first); it keeps its age.")
    p.add_argument("task_id", metavar="ID")
    p.add_argument("priority", metavar="P", type=int)

    p = command("touch", cmd_touch, "Re-enqueue a PENDING task as if new (front of a LIFO queue, back of a FIFO queue, within its priority).")
    p.add_argument("task_id", metavar="ID")

    p = command("redrive", cmd_redrive, "Return a FAILURE (or CANCELLED) task to PENDING with attempts reset and a fresh ttl, then wake its queue.")
    p.add_argument("task_id", metavar="ID", nargs="?", help="one task")
    p.add_argument("--all", action="store_true", help="every dead-lettered task of --queue")
    p.add_argument("--queue", help="the queue for --all")
    p.add_argument("--from-state", type=str.upper, choices=["FAILURE", "CANCELLED"], default="FAILURE",
                   help="with --all: redrive FAILURE (default) or CANCELLED tasks")
    p.add_argument("--limit", type=output.positive_int, default=1000, help="with --all: at most this many (default 1000)")
    p.add_argument("--ttl-seconds", type=output.positive_int, help="new time to live (default DEFAULT_TTL_SECONDS)")
