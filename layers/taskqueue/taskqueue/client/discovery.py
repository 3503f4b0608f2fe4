"""Finding the stack a client works against (``taskq``, ``taskqueue.client``): the running local stack (``make up``)
or a CloudFormation stack.

While ``make up`` runs, the local engine keeps ``.taskq/local-stack.json`` at the repository root (env
``TASKQ_LOCAL_STACK_FILE`` names another path). It holds the endpoint, the region, the engine's pid and the
template's outputs and parameters, so taskq needs no credentials, region or names to reach it. A file whose
pid is not running any more is stale (the engine was killed) and is ignored.

Both kinds of stack become a ``StackInfo``; ``StackInfo.env()`` turns its outputs and parameters into the
environment variables the queue core's settings read, so every command gets its names from the stack.

Which stack (``resolve_stack``), first match wins: the running local stack when asked for (``local``); a stack by
name (the local stack if it runs under that name, else CloudFormation); nothing when the caller names its target
itself (a table name, an endpoint); else the running local stack if there is one. ``session_for`` gives the boto3
session to reach it (the local engine checks no credentials: dummy ones).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STACK_FILE_ENV = "TASKQ_LOCAL_STACK_FILE"
STACK_FILE = Path(".taskq") / "local-stack.json"

# Stack outputs -> the environment variables the settings read. Both names of the workers' wake-up topic are
# accepted: stacks deployed before its rename carry ProcessTasksTopicArn.
OUTPUT_VARIABLES: dict[str, tuple[str, ...]] = {
    "QueueTableName": ("QUEUE_TABLE_NAME",),
    "AgentTableName": ("AGENT_TABLE_NAME",),
    "WorkerWakeUpTopicArn": ("WORKER_WAKE_UP_TOPIC_ARN", "PROCESS_TASKS_TOPIC_ARN"),
    "ProcessTasksTopicArn": ("WORKER_WAKE_UP_TOPIC_ARN", "PROCESS_TASKS_TOPIC_ARN"),
    "FailedEventsQueueUrl": ("FAILED_EVENTS_QUEUE_URL",),
    "QueueOrders": ("QUEUE_ORDERS",),  # not an output of today's template (its Globals fix work=LIFO,calls=FIFO)
}
# Stack parameters that change how the stores read the tables.
PARAMETER_VARIABLES: dict[str, str] = {
    "QueueShards": "QUEUE_SHARDS",
    "DefaultTtlSeconds": "DEFAULT_TTL_SECONDS",
    "RetentionSeconds": "RETENTION_SECONDS",
    "MaxAttempts": "MAX_ATTEMPTS",
    "LeaseSeconds": "LEASE_SECONDS",
    "PageSize": "PAGE_SIZE",
    "AgentOrder": "AGENT_ORDER",
    "MatchAttributes": "MATCH_ATTRIBUTES",
    # A task's run is checked against ProcessTasks' Timeout at creation (taskqueue/run_time.py).
    "ProcessTasksTimeout": "WORKER_TIMEOUT_SECONDS",
    "DefaultRunSeconds": "DEFAULT_RUN_SECONDS",
}
# The local engine accepts any signature; boto3 still needs a key pair to sign with.
LOCAL_CREDENTIALS = {"aws_access_key_id": "taskq-local", "aws_secret_access_key": "taskq-local"}


class DiscoveryError(Exception):
    """The stack could not be found or read; the message says what to do."""


@dataclass(frozen=True)
class StackInfo:
    """A stack's outputs and parameters, and how to reach it."""

    name: str
    outputs: Mapping[str, str]
    parameters: Mapping[str, str] = field(default_factory=dict)
    local: bool = False
    endpoint_url: str | None = None  # the local engine's; None on AWS
    region: str | None = None
    source: str = ""  # where it was read: the stack file's path, or "CloudFormation"

    def env(self) -> dict[str, str]:
        """The outputs and parameters as the environment variables the settings read."""
        env: dict[str, str] = {}
        for output, variables in OUTPUT_VARIABLES.items():
            value = self.outputs.get(output)
            for variable in variables:
                if value and variable not in env:
                    env[variable] = value
        for parameter, variable in PARAMETER_VARIABLES.items():
            value = self.parameters.get(parameter)
            if value not in (None, ""):
                env[variable] = str(value)
        return env


@dataclass(frozen=True)
class LocalLookup:
    """What the search for a local stack found: a live stack, a stale file, or nothing (``path`` None)."""

    path: Path | None
    stack: StackInfo | None = None
    stale_pid: int | None = None
    looked_for: str = ""  # where the file was looked for, for the message when there is none


def stack_file_path(cwd: Path | None = None, env: Mapping[str, str] | None = None) -> Path | None:
    """``TASKQ_LOCAL_STACK_FILE`` if set, else the first ``.taskq/local-stack.json`` in ``cwd`` or a parent."""
    env = os.environ if env is None else env
    override = env.get(STACK_FILE_ENV, "").strip()
    if override:
        return Path(override)
    here = (cwd or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / STACK_FILE
        if candidate.is_file():
            return candidate
    return None


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs on this machine (signal 0 checks without signalling)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def find_local(
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    is_alive: Callable[[int], bool] = pid_alive,
) -> LocalLookup:
    """The local stack file, read, and whether its engine is still running."""
    path = stack_file_path(cwd, env)
    if path is None:
        where = f"no {STACK_FILE} in {(cwd or Path.cwd()).resolve()} or its parents, and {STACK_FILE_ENV} is not set"
        return LocalLookup(path=None, looked_for=where)
    if not path.is_file():
        return LocalLookup(path=None, looked_for=f"{STACK_FILE_ENV} names {path}, which does not exist")
    stack, pid = read_stack_file(path)
    if not is_alive(pid):
        return LocalLookup(path=path, stale_pid=pid)
    return LocalLookup(path=path, stack=stack)


def read_stack_file(path: Path) -> tuple[StackInfo, int]:
    """The stack a local stack file describes, and the pid of the engine that wrote it."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise DiscoveryError(f"cannot read the local stack file {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise DiscoveryError(
            f"the local stack file {path} is not valid JSON ({exc}): restart the local stack (`make up`) or delete the file"
        ) from None
    problem = _stack_file_problem(data)
    if problem:
        raise DiscoveryError(f"the local stack file {path} {problem}: restart the local stack (`make up`) or delete the file")
    stack = StackInfo(
        name=data["stack_name"],
        outputs={k: str(v) for k, v in data["outputs"].items()},
        parameters={k: str(v) for k, v in (data.get("parameters") or {}).items()},
        local=True,
        endpoint_url=data["endpoint_url"],
        region=data.get("region") or "us-east-1",
        source=str(path),
    )
    return stack, data["pid"]


def _stack_file_problem(data: Any) -> str | None:
    if not isinstance(data, dict):
        return "is not a JSON object"
    for key, kind in (("stack_name", str), ("endpoint_url", str), ("pid", int), ("outputs", dict)):
        value = data.get(key)
        if not isinstance(value, kind) or isinstance(value, bool) or (kind is str and not value.strip()):
            return f"has no valid {key!r}"
    if "QueueTableName" not in data["outputs"]:
        return "has no output QueueTableName"
    if data.get("parameters") is not None and not isinstance(data["parameters"], dict):
        return "has 'parameters' that are not an object"
    return None


def from_cloudformation(cfn: Any, stack_name: str) -> StackInfo:
    """A deployed stack's outputs and parameters (CloudFormation DescribeStacks)."""
    from botocore.exceptions import ClientError

    try:
        stack = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
    except ClientError as exc:
        message = exc.response.get("Error", {}).get("Message", str(exc))
        raise DiscoveryError(f"cannot read stack {stack_name!r}: {message}") from None
    return StackInfo(
        name=stack_name,
        outputs={o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])},
        parameters={
            p["ParameterKey"]: p["ParameterValue"] for p in stack.get("Parameters", []) if p.get("ParameterValue")
        },
        source="CloudFormation",
    )


def no_local_stack_message(lookup: LocalLookup) -> str:
    """Why --local found nothing to work against, and what to run."""
    if lookup.stale_pid is not None:
        return (
            f"the local stack recorded in {lookup.path} is not running (pid {lookup.stale_pid} has exited): "
            "start it with `make up` (or `python -m local up`)"
        )
    return f"no local stack is running ({lookup.looked_for}): start one with `make up` (or `python -m local up`)"


def stale_notice(lookup: LocalLookup) -> str:
    return f"taskq: note: ignoring {lookup.path}: the local stack it describes is not running (pid {lookup.stale_pid})"


def resolve_stack(
    *,
    local: bool,
    stack_name: str | None,
    explicit: bool,
    cloudformation: Callable[[], Any],
    env: Mapping[str, str] | None = None,
    notice: Callable[[str], None] | None = None,
) -> StackInfo | None:
    """The stack to work against (see the module's docstring); ``None``: the caller's own names, nothing discovered.
    ``explicit``: the caller named its target (a table, an endpoint). ``cloudformation``: makes the client that reads
    a deployed stack, called only when one is looked up."""
    lookup = find_local(env=env)
    if local:
        if lookup.stack is None:
            raise DiscoveryError(no_local_stack_message(lookup))
        return lookup.stack
    if stack_name:
        if lookup.stack is not None and lookup.stack.name == stack_name:
            return lookup.stack
        return from_cloudformation(cloudformation(), stack_name)
    if explicit:
        return None
    if lookup.stack is not None:
        return lookup.stack
    if lookup.stale_pid is not None and notice is not None:
        notice(stale_notice(lookup))
    return None


def session_for(stack: StackInfo | None, region: str | None = None, profile: str | None = None) -> Any:
    """A boto3 session that reaches ``stack``: the local engine's region with dummy credentials, else your AWS
    configuration (``region``, ``profile``)."""
    import boto3

    if stack is not None and stack.local:
        return boto3.session.Session(region_name=stack.region, **LOCAL_CREDENTIALS)
    return boto3.session.Session(region_name=region, profile_name=profile)


def endpoint_for(stack: StackInfo | None, endpoint_url: str | None) -> str | None:
    """Where the clients send requests: the local engine's endpoint, or ``endpoint_url`` (None: AWS's)."""
    return stack.endpoint_url if stack is not None and stack.local else endpoint_url


def no_table_message() -> str:
    return ("no queue table: pass a stack name or a table name (or set QUEUE_TABLE_NAME), or start a local stack with "
            "`make up`")
