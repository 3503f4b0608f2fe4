"""taskq: inspect and operate the task queues, on AWS (by stack or table name) or on the local engine.

`taskq failed-events` (taskq/failed_events.py) reads FailedEventsQueue instead of the table.

Every command takes the connection options (--stack-name or --table-name, --endpoint-url, --region) and
--json. Expected errors print one line ``taskq: error: ...`` on stderr and exit 1; usage errors exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from taskq import failed_events, output
from taskqueue.clock import SystemClock
from taskqueue.errors import ConditionFailed, ConfigError, InvalidTaskInput, InvalidTransition, TaskQueueError
from taskqueue.model import new_tasks, parse_create_request
from taskqueue.notify import Notifier
from taskqueue.settings import Settings
from taskqueue.states import TaskStatus
from taskqueue.store import TaskStore

# Stack parameters that change how the store reads the table (name in the stack -> environment variable).
_STACK_PARAMETERS = {
    "QueueShards": "QUEUE_SHARDS",
    "DefaultTtlSeconds": "DEFAULT_TTL_SECONDS",
    "RetentionSeconds": "RETENTION_SECONDS",
    "MaxAttempts": "MAX_ATTEMPTS",
    "LeaseSeconds": "LEASE_SECONDS",
}


class CliError(Exception):
    """An expected error: printed as one line, exit status 1."""


@dataclass
class Target:
    settings: Settings
    store: TaskStore
    session: Any
    endpoint_url: str | None
    clock: SystemClock
    env: dict[str, str]  # the resolved configuration (environment + stack outputs + flags)

    def client(self, service: str) -> Any:
        return self.session.client(service, endpoint_url=self.endpoint_url, config=_CONFIG)

    def notifier(self) -> Notifier | None:
        if not self.settings.trigger_topic_arn:
            return None
        return Notifier(self.client("sns"), self.settings)


_CONFIG = Config(retries={"mode": "standard", "max_attempts": 6}, connect_timeout=5, read_timeout=30)


def connect(args: argparse.Namespace) -> Target:
    """Resolve the table (and TriggerTopic) from --stack-name outputs, --table-name or the environment."""
    session = boto3.session.Session(region_name=args.region, profile_name=args.profile)
    env: dict[str, str] = dict(os.environ)
    if args.stack_name:
        env.update(_from_stack(session, args.stack_name, args.endpoint_url))
    if args.table_name:
        env["QUEUE_TABLE_NAME"] = args.table_name
    if args.trigger_topic_arn:
        env["TRIGGER_TOPIC_ARN"] = args.trigger_topic_arn
    if args.queue_orders:
        env["QUEUE_ORDERS"] = args.queue_orders
    if args.shards is not None:
        env["QUEUE_SHARDS"] = str(args.shards)
    if not env.get("QUEUE_TABLE_NAME", "").strip():
        raise CliError("no queue table: pass --stack-name NAME or --table-name NAME (or set QUEUE_TABLE_NAME)")
    settings = Settings.from_env(env)
    clock = SystemClock()
    db = session.client("dynamodb", endpoint_url=args.endpoint_url, config=_CONFIG)
    return Target(settings, TaskStore(db, settings, clock), session, args.endpoint_url, clock, env)


def _from_stack(session: Any, stack_name: str, endpoint_url: str | None) -> dict[str, str]:
    cfn = session.client("cloudformation", endpoint_url=endpoint_url, config=_CONFIG)
    try:
        stack = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
    except ClientError as exc:
        raise CliError(f"cannot read stack {stack_name!r}: {exc.response.get('Error', {}).get('Message', exc)}") from None
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    if "QueueTableName" not in outputs:
        raise CliError(f"stack {stack_name!r} has no output QueueTableName: is it this application's stack?")
    env = {"QUEUE_TABLE_NAME": outputs["QueueTableName"]}
    if outputs.get("TriggerTopicArn"):
        env["TRIGGER_TOPIC_ARN"] = outputs["TriggerTopicArn"]
    if outputs.get("AgentTableName"):
        env["AGENT_TABLE_NAME"] = outputs["AgentTableName"]
    for parameter in stack.get("Parameters", []):
        variable = _STACK_PARAMETERS.get(parameter.get("ParameterKey", ""))
        if variable and parameter.get("ParameterValue"):
            env[variable] = parameter["ParameterValue"]
    return env


# ---- commands ------------------------------------------------------------------------------------

Printer = Callable[[str], None]


def cmd_stats(t: Target, args: argparse.Namespace, say: Printer) -> int:
    stats = t.store.stats(args.queue or None, include_success=args.include_success)
    shed = None if args.no_shed else _shed_counts(t, [s.queue for s in stats], args.shed_hours)
    if args.json:
        rows = [output.stats_dict(s) | ({"shed": shed.get(s.queue)} if shed is not None else {}) for s in stats]
        say(output.dumps({"stats": rows, "shedWindowHours": None if shed is None else args.shed_hours}))
        return 0
    say(output.table(*output.stats_rows(stats, shed)))
    if shed is not None:
        known = any(v is not None for v in shed.values())
        say(f"\nSHED = tasks dropped by TTL while PENDING in the last {args.shed_hours:g} h (CloudWatch TasksShed)"
            + ("" if known else "; n/a: CloudWatch could not be read"))
    return 0


def _shed_counts(t: Target, queues: Sequence[str], hours: float) -> dict[str, float | None]:
    """Sum of the TasksShed metric per queue over the last ``hours`` (best effort: None if unreadable)."""
    from datetime import UTC, datetime, timedelta

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
    page = t.store.list_tasks(args.queue, args.state, args.limit, args.page_token)
    if args.json:
        say(output.dumps({"tasks": [output.task_dict(x) for x in page.tasks], "nextToken": page.next_token}))
        return 0
    if page.tasks:
        say(output.table(*output.task_rows(page.tasks, t.clock.now_ms())))
    else:
        say("no tasks")
    if page.next_token:
        say(f"\nmore: add --page-token {page.next_token}")
    return 0


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
        ("taskIds", args.task_id),
    ):
        if value is not None:
            body[field] = value
    if args.payload is not None:
        body["payload"] = _read_json_arg(args.payload, "--payload")
    request = parse_create_request(body, t.settings)
    tasks = new_tasks(request, t.clock.now_ms(), t.settings)
    result = t.store.put_tasks(tasks, idempotent=bool(request.task_ids))
    summary = {
        "queue": request.queue,
        "created": result.created,
        "alreadyExisted": result.already_existed,
        "taskIds": [x.task_id for x in tasks],
        "ttl": tasks[0].ttl,
    }
    if args.json:
        say(output.dumps(summary))
    else:
        say(f"created {result.created} task(s) in queue {request.queue!r}"
            + (f" ({result.already_existed} already existed)" if result.already_existed else ""))
        for task_id in summary["taskIds"]:
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
        ids = [args.task_id]
    else:
        ids = t.store.dead_letters(args.queue, TaskStatus(args.from_state), limit=args.limit)
    redriven, refused = [], []
    for task_id in ids:
        try:
            redriven.append(t.store.redrive(task_id, ttl_seconds=args.ttl_seconds))
        except (InvalidTransition, ConditionFailed) as exc:
            if args.task_id:
                raise
            refused.append({"taskId": task_id, "error": str(exc)})
    woken, wake_note = _wake([x.queue for x in redriven], t, args.no_wake)
    if args.json:
        say(output.dumps({
            "redriven": [x.task_id for x in redriven],
            "refused": refused,
            "woken": woken,
            "note": wake_note,
        }))
    else:
        if args.all and not ids:
            say(f"queue {args.queue!r} has no {args.from_state} tasks")
        for task in redriven:
            say(f"redriven {task.task_id}: now PENDING, attempts reset, ttl {output.iso(task.ttl * 1000)}")
        for item in refused:
            say(f"skipped {item['taskId']}: {item['error']}")
        if wake_note:
            say(wake_note)
    return 1 if refused else 0


def _wake(queues: Sequence[str], t: Target, disabled: bool) -> tuple[list[str], str | None]:
    """A redrive is an UpdateItem, which the stream filter ignores: wake the queues through TriggerTopic."""
    queues = list(dict.fromkeys(queues))
    if not queues:
        return [], None
    if disabled:
        return [], "not woken (--no-wake): the safety-net schedule will wake the worker"
    notifier = t.notifier()
    if notifier is None:
        return [], "TriggerTopic unknown (use --stack-name or --trigger-topic-arn): the safety-net schedule will wake the worker"
    for queue in queues:
        notifier.tail_call(queue, reason="redrive")
    return queues, f"woke {', '.join(queues)} through TriggerTopic"


def cmd_agents(t: Target, args: argparse.Namespace, say: Printer) -> int:
    from taskq import agents_view

    return agents_view.run(t, args, say)


# ---- argument parsing ----------------------------------------------------------------------------


def _read_json_arg(text: str, flag: str) -> Any:
    """A JSON value given inline or as @path."""
    try:
        raw = Path(text[1:]).read_text() if text.startswith("@") else text
        return json.loads(raw)
    except OSError as exc:
        raise CliError(f"{flag}: cannot read {text[1:]!r}: {exc.strerror}") from None
    except ValueError as exc:
        raise CliError(f"{flag} is not valid JSON: {exc}") from None


def _connection_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    group = parser.add_argument_group("connection")
    group.add_argument("--stack-name", default=default(os.environ.get("TASKQ_STACK_NAME")),
                       help="CloudFormation stack: reads its outputs QueueTableName and TriggerTopicArn, and its parameters (env TASKQ_STACK_NAME)")
    group.add_argument("--table-name", default=default(None), help="the queue table (env QUEUE_TABLE_NAME)")
    group.add_argument("--trigger-topic-arn", default=default(None), help="TriggerTopic, for wake-ups after redrive (env TRIGGER_TOPIC_ARN)")
    group.add_argument("--endpoint-url", default=default(os.environ.get("AWS_ENDPOINT_URL")),
                       help="an AWS-compatible endpoint, e.g. the local engine's (env AWS_ENDPOINT_URL)")
    group.add_argument("--region", default=default(None), help="AWS region (default: your AWS configuration)")
    group.add_argument("--profile", default=default(None), help="AWS profile name")
    group.add_argument("--queue-orders", default=default(None), help="queues and their order, e.g. work=LIFO,calls=FIFO (env QUEUE_ORDERS)")
    group.add_argument("--shards", type=output.positive_int, default=default(None), help="index shards per queue (env QUEUE_SHARDS; read from the stack)")
    parser.add_argument("--json", action="store_true", default=default(False), help="print JSON instead of a table")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="taskq",
        description="Inspect and operate the serverless task queues (DynamoDB). See docs/operations.md.",
        epilog="Example: taskq --stack-name taskqueue stats; taskq list --queue work --state FAILURE",
    )
    _connection_options(parser, suppress=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, handler: Callable[..., int], help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        _connection_options(p, suppress=True)
        p.set_defaults(handler=handler)
        return p

    p = command("stats", cmd_stats, "Counts per queue and state, waiting ages, and tasks shed (index queries, no table scan).")
    p.add_argument("--queue", action="append", help="only this queue (repeatable; default: every configured queue)")
    p.add_argument("--include-success", action="store_true", help="also count SUCCESS tasks (a filtered table scan: costly on a big table)")
    p.add_argument("--shed-hours", type=float, default=24.0, help="window for the shed count from CloudWatch (default 24)")
    p.add_argument("--no-shed", action="store_true", help="do not read CloudWatch for the shed count")

    p = command("list", cmd_list, "List tasks, newest first (PENDING: in the order the queue serves them).")
    p.add_argument("--queue", help="only this queue (default: every configured queue)")
    p.add_argument("--state", type=str.upper, choices=[s.value for s in TaskStatus],
                   help="only this state (default: PENDING, TAKEN, FAILURE, CANCELLED; SUCCESS is a table scan, ask by name)")
    p.add_argument("--limit", type=output.positive_int, default=20, help="tasks per page (default 20)")
    p.add_argument("--page-token", help="the token printed under the previous page")

    p = command("show", cmd_show, "Show one task with every attribute.")
    p.add_argument("task_id", metavar="ID")

    p = command("peek", cmd_peek, "Show the task a queue would serve next, without claiming it.")
    p.add_argument("queue_name", metavar="QUEUE")

    p = command("create", cmd_create, "Create tasks (the CreateTasks input: queue, count, priority, ttlSeconds, payload, maxAttempts, delaySeconds, taskIds).")
    p.add_argument("--input", help='the whole CreateTasks input as JSON, or @file.json (the flags below override its fields)')
    p.add_argument("--queue", help="queue name (default work)")
    p.add_argument("--count", type=output.positive_int, help="how many tasks (default 1, or the number of --task-id)")
    p.add_argument("--priority", type=int, help="0..999, higher is served first (default 0)")
    p.add_argument("--ttl-seconds", type=output.positive_int, help="time to live; past it the task is shed (default DEFAULT_TTL_SECONDS)")
    p.add_argument("--payload", help="JSON object, or @file.json")
    p.add_argument("--max-attempts", type=output.positive_int, help="attempts before FAILURE (default MAX_ATTEMPTS)")
    p.add_argument("--delay-seconds", type=int, help="not claimable before now + this")
    p.add_argument("--task-id", action="append", help="your own id (repeatable): creating the same id twice makes one task")

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
    p.add_argument("--no-wake", action="store_true", help="do not publish a wake-up on TriggerTopic")

    p = command("agents", cmd_agents, "Matching queue depths: available agents per attribute combination.")
    p.add_argument("--agent-table-name", help="the agent table (default: stack output AgentTableName, or env AGENT_TABLE_NAME)")
    p.add_argument("--want", action="append", metavar="ATTR=VALUE",
                   help="only the agent queue a caller with these preferences waits on (repeatable), e.g. --want language=fr")
    p.add_argument("--all-keys", action="store_true", help="also show combinations with no agent and no call waiting")

    # Needs no queue table: its own connection (the stack output FailedEventsQueueUrl, or --queue-url).
    failed_events.add_parser(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    def say(text: str) -> None:
        print(text, file=sys.stdout)

    try:
        target = getattr(args, "connector", connect)(args)
        return int(args.handler(target, args, say))
    except (CliError, failed_events.FailedEventsError) as exc:
        message = str(exc)
    except (InvalidTaskInput, InvalidTransition, ConditionFailed, ConfigError, TaskQueueError) as exc:
        message = str(exc)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        message = f"AWS refused {exc.operation_name}: {error.get('Code', '')}: {error.get('Message', '')}"
    except BotoCoreError as exc:
        message = f"AWS: {exc}"
    except KeyboardInterrupt:
        return 130
    print(f"taskq: error: {message}", file=sys.stderr)
    return 1


def run() -> None:
    sys.exit(main())
