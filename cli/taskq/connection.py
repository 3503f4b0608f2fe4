"""How a taskq command reaches its stack: the connection options, the stack they resolve to, and the clients.

Resolution, first match wins:

1. ``--local``: the running local stack (``make up``); an error that says to run it when there is none.
2. ``--stack-name NAME``: the local stack if it is the one running under that name, else CloudFormation
   DescribeStacks (outputs and parameters).
3. Any other explicit target (``--table-name``, ``--queue-url``, ``--endpoint-url``, or the environment variables
   QUEUE_TABLE_NAME / FAILED_EVENTS_QUEUE_URL / AWS_ENDPOINT_URL): exactly what was given, nothing discovered.
4. Nothing given: the running local stack if there is one (a stale stack file is ignored with a notice).

Locally the clients use the stack file's endpoint and region and dummy credentials: the engine checks none.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

from taskq import output
from taskqueue.client import discovery
from taskqueue.client.discovery import DiscoveryError, StackInfo
from taskqueue.core.clock import SystemClock
from taskqueue.core.settings import Settings
from taskqueue.services import Services, calls_of
from taskqueue.store import TaskStore

CONFIG = Config(retries={"mode": "standard", "max_attempts": 6}, connect_timeout=5, read_timeout=30)

Printer = Callable[[str], None]
# How a command group registers a subcommand: command(name, handler, help) -> its parser (see taskq.main).
Command = Callable[[str, Callable[..., int], str], argparse.ArgumentParser]


class CliError(Exception):
    """An expected error: printed as one line ``taskq: error: ...``, exit status 1."""


@dataclass
class Connection:
    """A boto3 session and endpoint, the stack resolved (None when names were given by hand), and the
    configuration as environment variables (the process environment, then the stack's, then the flags)."""

    session: Any
    endpoint_url: str | None
    stack: StackInfo | None
    env: dict[str, str]

    @property
    def local(self) -> bool:
        return self.stack is not None and self.stack.local

    def client(self, service: str) -> Any:
        return self.session.client(service, endpoint_url=self.endpoint_url, config=CONFIG)


def open_connection(
    args: argparse.Namespace,
    *,
    explicit: bool,
    environ: Mapping[str, str] | None = None,
    notice: Printer | None = None,
) -> Connection:
    """Resolve the stack (see the module's docstring). ``explicit``: the command was given a target of its own
    (a table name, a queue URL), so a running local stack is not used unless ``--local`` asks for it."""
    environ = os.environ if environ is None else environ
    notice = notice or (lambda text: print(text, file=sys.stderr))
    endpoint = args.endpoint_url or None
    explicit = explicit or bool(args.table_name or endpoint or environ.get("AWS_ENDPOINT_URL", "").strip())

    def cloudformation() -> Any:
        session = boto3.session.Session(region_name=args.region, profile_name=args.profile)
        return session.client("cloudformation", endpoint_url=endpoint, config=CONFIG)

    try:
        stack = discovery.resolve_stack(local=getattr(args, "local", False), stack_name=args.stack_name,
                                        explicit=explicit, cloudformation=cloudformation, env=environ, notice=notice)
    except DiscoveryError as exc:
        raise CliError(str(exc)) from None
    env = dict(environ)
    if stack is not None:
        env.update(stack.env())
    return Connection(discovery.session_for(stack, args.region, args.profile), discovery.endpoint_for(stack, endpoint),
                      stack, env)


def add_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """The connection options, on the top-level parser and again on each command (so they may come after it)."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    group = parser.add_argument_group("connection (default: the running local stack, found by itself)")
    group.add_argument("--local", action="store_true", default=default(False),
                       help="the running local stack (`make up`); found through .taskq/local-stack.json "
                            f"(env {discovery.STACK_FILE_ENV}); no credentials or region needed")
    group.add_argument("--stack-name", default=default(os.environ.get("TASKQ_STACK_NAME")),
                       help="CloudFormation stack: every name (tables, topics, queue URL) from its outputs, shards and "
                            "limits from its parameters (env TASKQ_STACK_NAME)")
    group.add_argument("--table-name", default=default(None), help="the queue table, without a stack (env QUEUE_TABLE_NAME)")
    group.add_argument("--endpoint-url", default=default(None),
                       help="an AWS-compatible endpoint (env AWS_ENDPOINT_URL); not needed for the local stack")
    group.add_argument("--region", default=default(None), help="AWS region (default: your AWS configuration)")
    group.add_argument("--profile", default=default(None), help="AWS profile name")
    group.add_argument("--queue-orders", default=default(None), help="queues and their order, e.g. work=LIFO,calls=FIFO (env QUEUE_ORDERS)")
    group.add_argument("--shards", type=output.positive_int, default=default(None), help="index shards per queue (env QUEUE_SHARDS; read from the stack)")
    parser.add_argument("--json", action="store_true", default=default(False), help="print JSON instead of a table")


@dataclass
class Target:
    """A connection to the queue table: its settings (from the stack, the environment and the flags) and store."""

    connection: Connection
    settings: Settings
    store: TaskStore
    clock: SystemClock

    @property
    def env(self) -> dict[str, str]:
        return self.connection.env

    @property
    def local(self) -> bool:
        return self.connection.local

    def client(self, service: str) -> Any:
        return self.connection.client(service)

    def services(self) -> Services:
        """The queue core's services on this connection (what the producer client, taskqueue.client, holds)."""
        return Services(self.settings, self.store, None, self.clock, *calls_of(self.env))


def connect(args: argparse.Namespace) -> Target:
    """The queue table of the resolved stack, with --table-name and the flags over it."""
    conn = open_connection(args, explicit=bool(os.environ.get("QUEUE_TABLE_NAME", "").strip()))
    env = conn.env
    if args.table_name:
        env["QUEUE_TABLE_NAME"] = args.table_name
    if args.queue_orders:
        env["QUEUE_ORDERS"] = args.queue_orders
    if args.shards is not None:
        env["QUEUE_SHARDS"] = str(args.shards)
    if conn.stack is not None and "QueueTableName" not in conn.stack.outputs:
        raise CliError(f"stack {conn.stack.name!r} has no output QueueTableName: is it this application's stack?")
    if not env.get("QUEUE_TABLE_NAME", "").strip():
        raise CliError(discovery.no_table_message().replace("a stack name or a table name", "--stack-name NAME or --table-name NAME"))
    settings = Settings.from_env(env)
    clock = SystemClock()
    store = TaskStore(conn.client("dynamodb"), settings, clock)
    return Target(conn, settings, store, clock)
