"""taskq: inspect and operate the task queues, on the running local stack (found by itself), or on AWS by stack
or table name.

The commands live by group: task_commands (stats, list, show, peek, create, cancel, reprioritize, touch,
redrive), queue_commands (pause, resume, purge, retry-all), group_commands (groups, group show / set / pause /
resume: fair share's groups), workflow_commands (workflow create / show / cancel), watch_command, agents_view (agents),
failed_events_command (failed-events, which reads FailedEventsQueue instead of the table) and board (the web page,
taskq/board/). How a command finds
its stack: taskq/connection.py.

Every command takes the connection options and --json. Expected errors print one line ``taskq: error: ...`` on
stderr and exit 1; usage errors exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from taskq import (
    agents_view,
    connection,
    failed_events_command,
    group_commands,
    queue_commands,
    task_commands,
    watch_command,
    workflow_commands,
)
from taskq.board import command as board_command
from taskq.connection import CliError
from taskqueue.core.errors import TaskQueueError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="taskq",
        description="Inspect and operate the serverless task queues (DynamoDB). Without connection options, "
        "taskq works against the running local stack (`make up`). See docs/operations.md.",
        epilog="Examples: taskq stats; taskq --stack-name taskqueue list --queue work --state FAILURE",
    )
    connection.add_options(parser, suppress=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, handler: Callable[..., int], help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        connection.add_options(p, suppress=True)
        p.set_defaults(handler=handler)
        return p

    task_commands.add_parsers(command)
    queue_commands.add_parsers(command)
    group_commands.add_parsers(command)
    workflow_commands.add_parsers(command)
    watch_command.add_parser(command)
    agents_view.add_parser(command)
    # Needs no queue table: its own connection (the stack output FailedEventsQueueUrl, or --queue-url).
    failed_events_command.add_parser(command)
    board_command.add_parser(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    def say(text: str) -> None:
        print(text, file=sys.stdout, flush=True)

    try:
        target: Any = getattr(args, "connector", connection.connect)(args)
        return int(args.handler(target, args, say))
    except (CliError, TaskQueueError) as exc:
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
