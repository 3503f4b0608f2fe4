"""Tasks as typed values, the mapping to and from DynamoDB items, and the rules for new tasks.

Past 400 lines on purpose: ``Task``, its item mapping and ``TaskRequest`` name every stored attribute (a workflow's
and a trace's too) in one place, so a new attribute is added to the value, the item and the input together.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from taskqueue.core import fairness, keys, schema, trace_context, workflow_spec
from taskqueue.core.errors import InvalidField, InvalidTaskInput, ResultTooLarge
from taskqueue.core.run_time import LAMBDA_MAX_TIMEOUT_SECONDS, MIN_RUN_SECONDS, too_long_message
from taskqueue.core.settings import Settings
from taskqueue.core.states import TaskStatus
from taskqueue.core.trace_context import TraceContext
from taskqueue.core.workflow_rules import Dependency
from taskqueue.core.workflow_spec import WorkflowSpec

MAX_TASKS_PER_REQUEST = 1000
# DynamoDB refuses an item over 400 KB: a task's payload and its runner's result share that budget.
MAX_PAYLOAD_BYTES = 256 * 1024
MAX_RESULT_BYTES = 100 * 1024
_TASK_ID_MAX = 200
# Task ids derived from a CreateTasks invocation's request id (so Lambda's retry of it is idempotent).
_TASK_ID_NAMESPACE = uuid.UUID("8f9d7a64-2a0e-4f55-9a51-6b7f3c0d2e11")


@dataclass(frozen=True)
class Task:
    """One task. Times are epoch milliseconds except ``ttl`` and ``delete_at``, which are epoch seconds.

    ``ttl`` is the shed deadline: past it the task is never claimed. ``delete_at`` is when DynamoDB TTL may
    delete the item (the table's TTL attribute ``deleteAt``): the shed deadline while the task waits, past
    the lease (plus retention) while it runs, the retention once it finished. ``None`` means ``ttl``.
    """

    task_id: str
    queue: str
    status: TaskStatus
    priority: int
    created_ms: int
    updated_ms: int
    enqueued_ms: int  # the time the queue's order uses (creation, or the last touch)
    ttl: int
    attempts: int = 0
    max_attempts: int = 3
    shard: int = 0
    payload: dict[str, Any] = field(default_factory=dict)
    lease_owner: str | None = None
    lease_expires_ms: int | None = None
    not_before_ms: int | None = None
    last_error: str | None = None
    result: dict[str, Any] | None = None
    delete_at: int | None = None
    # The request that created the task (CreateTasks' Lambda request id), carried on its wake-ups as the
    # correlation id so the task can be followed across functions; None for tasks created without one.
    request_id: str | None = None
    # When its latest claim was made (epoch ms): create -> first claim is the queue's pickup time.
    claimed_ms: int | None = None
    # How long the task may run (taskqueue.core.run_time); None: its queue's DEFAULT_RUN_SECONDS.
    run_seconds: int | None = None
    # What the runner last reported of the attempt in progress (taskqueue.work.progress): a number, a short message,
    # and when (epoch ms). A new attempt starts without.
    progress: float | None = None
    progress_message: str | None = None
    progress_updated_ms: int | None = None
    # The task's group for fair share (taskqueue.core.fairness); None: the default group.
    group: str | None = None
    # A workflow's task (docs/workflows.md): how many tasks wait for it and it waits for, the dependency whose end ended
    # it unrun, and until when (epoch s) its workflow keeps what its dependents read.
    workflow_id: str | None = None
    dependents: int = 0
    waits_for: int = 0
    blocked_by: str | None = None
    workflow_keep_until: int | None = None
    dependencies: tuple[Dependency, ...] = ()  # what they came to, in its order: for the runner, never stored
    # The producer's trace context (taskqueue.core.trace_context): each attempt's span joins that trace, and the
    # runner reads it (or taskqueue.tracing.current(), the attempt's own); None: created untraced.
    trace: TraceContext | None = None

    def with_changes(self, **changes: Any) -> Task:
        return replace(self, **changes)

    def dependency(self, key: str) -> Dependency:
        """The dependency with workflow key (or task id) ``key``; KeyError if the task has none such."""
        found = [d for d in self.dependencies if key in (d.key, d.task_id)]
        if not found:
            raise KeyError(f"task {self.task_id!r} has no dependency {key!r}")
        return found[0]

    @property
    def results(self) -> dict[str, Any]:
        """Each dependency's result by its key (None for one that did not succeed, or whose result was left out)."""
        return {d.key: d.result for d in self.dependencies}


def to_item(task: Task, order: keys.Order) -> dict[str, dict[str, Any]]:
    """The DynamoDB item of a task, with the index attributes its status calls for."""
    item: dict[str, dict[str, Any]] = {
        "taskId": {"S": task.task_id},
        "queue": {"S": task.queue},
        "taskStatus": {"S": task.status.value},
        "priority": {"N": str(task.priority)},
        "taskCreated": {"N": str(task.created_ms)},
        "taskUpdated": {"N": str(task.updated_ms)},
        "enqueued": {"N": str(task.enqueued_ms)},
        "ttl": {"N": str(task.ttl)},
        "deleteAt": {"N": str(task.ttl if task.delete_at is None else task.delete_at)},
        "attempts": {"N": str(task.attempts)},
        "maxAttempts": {"N": str(task.max_attempts)},
        "shard": {"N": str(task.shard)},
        "payload": {"S": encode_json(task.payload)},
    }
    optional = {
        "leaseOwner": ("S", task.lease_owner),
        "leaseExpires": ("N", task.lease_expires_ms),
        "notBefore": ("N", task.not_before_ms),
        "lastError": ("S", task.last_error),
        "requestId": ("S", task.request_id),
        "runSeconds": ("N", task.run_seconds),
        "progress": ("N", task.progress),
        "progressMessage": ("S", task.progress_message),
        "progressUpdated": ("N", task.progress_updated_ms),
        "taskGroup": ("S", task.group),
        "workflowId": ("S", task.workflow_id),
        "wfOut": ("N", task.dependents or None),
        "wfIn": ("N", task.waits_for or None),
        "blockedBy": ("S", task.blocked_by),
        "wfKeepUntil": ("N", task.workflow_keep_until),
    }
    for name, (kind, value) in optional.items():
        if value is not None:
            item[name] = {kind: str(value)}
    if task.result is not None:
        item["result"] = {"S": encode_json(task.result)}
    if task.trace is not None:  # on the item only: no index projects it
        item |= {name: {"S": value} for name, value in task.trace.attributes().items()}
    if task.status is TaskStatus.PENDING:
        item |= ready_index_attributes(task, order)
    elif task.status not in (TaskStatus.SUCCESS, TaskStatus.SHED, TaskStatus.WAITING):  # WAITING: in no index
        item["statusKey"] = {"S": keys.status_key(task.queue, task.status.value, task.shard)}
        sort = task.lease_expires_ms if task.status is TaskStatus.TAKEN else task.updated_ms
        item["statusSort"] = {"N": str(sort)}
    return item


def ready_index_attributes(task: Task, order: keys.Order) -> dict[str, dict[str, Any]]:
    """Where a PENDING task sits in the ReadyIndex: the ready partition, or the delayed one while it has a
    not-before time (it stays there once due; readers take due entries from both)."""
    sort = keys.ready_sort(task.priority, task.enqueued_ms, task.task_id, order)
    if task.not_before_ms is None:
        ready = fairness.ready_partition(task.queue, task.shard, task.group)
        return {"readyKey": {"S": ready}, "readySort": {"S": sort}}
    delayed = fairness.delayed_partition(task.queue, task.shard, task.group)
    return {
        "readyKey": {"S": delayed},
        "readySort": {"S": keys.delayed_sort(task.not_before_ms, sort)},
    }


def encode_json(value: Any) -> str:
    """The stored form of a payload or result (compact, sorted keys)."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def check_result_size(result: Mapping[str, Any] | None) -> None:
    """Refuse a runner result that would push the item past DynamoDB's 400 KB limit."""
    if result is None:
        return
    size = len(encode_json(result).encode("utf-8"))
    if size > MAX_RESULT_BYTES:
        raise ResultTooLarge(
            f"the runner's result is {size} bytes, over the limit of {MAX_RESULT_BYTES} bytes (MAX_RESULT_BYTES; "
            "DynamoDB refuses items over 400 KB): store large results elsewhere (e.g. S3) and return a reference"
        )


def from_item(item: Mapping[str, Mapping[str, Any]]) -> Task:
    """The Task of a DynamoDB item (low-level attribute-value form, as the client and streams give it)."""
    try:

        def s(name: str) -> str | None:
            return item[name]["S"] if name in item else None

        def n(name: str) -> int | None:
            return int(item[name]["N"]) if name in item else None

        def number(name: str) -> float | None:
            return float(item[name]["N"]) if name in item else None

        payload_text = s("payload")
        result_text = s("result")
        return Task(
            task_id=item["taskId"]["S"],
            queue=item["queue"]["S"],
            status=TaskStatus(item["taskStatus"]["S"]),
            priority=int(item["priority"]["N"]),
            created_ms=int(item["taskCreated"]["N"]),
            updated_ms=int(item["taskUpdated"]["N"]),
            enqueued_ms=n("enqueued") or int(item["taskCreated"]["N"]),
            ttl=int(item["ttl"]["N"]),
            attempts=n("attempts") or 0,
            max_attempts=n("maxAttempts") or 1,
            shard=n("shard") or 0,
            payload=json.loads(payload_text) if payload_text else {},
            lease_owner=s("leaseOwner"),
            lease_expires_ms=n("leaseExpires"),
            # A TAKEN task's notBefore is its lease, marked on its ReadyIndex entry (taskqueue.core.keys): no not-before.
            not_before_ms=None if item["taskStatus"]["S"] == TaskStatus.TAKEN.value else n("notBefore"),
            last_error=s("lastError"),
            result=json.loads(result_text) if result_text else None,
            delete_at=_delete_at(n("deleteAt"), int(item["ttl"]["N"])),
            claimed_ms=n("claimedAt"),
            request_id=s("requestId"),
            run_seconds=n("runSeconds"),
            progress=number("progress"),
            progress_message=s("progressMessage"),
            progress_updated_ms=n("progressUpdated"),
            group=s("taskGroup"),
            workflow_id=s("workflowId"),
            dependents=n("wfOut") or 0,
            waits_for=n("wfIn") or 0,
            blocked_by=s("blockedBy"),
            workflow_keep_until=n("wfKeepUntil"),
            trace=stored_trace(s(trace_context.TRACEPARENT), s(trace_context.AWS_TRACE_HEADER)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidTaskInput(f"item is not a task ({type(exc).__name__}: {exc}): {dict(item)!r:.300}") from None


def _delete_at(delete_at: int | None, ttl: int) -> int | None:
    return None if delete_at == ttl else delete_at


def stored_trace(traceparent: str | None, xray: str | None) -> TraceContext | None:
    """The stored trace context; one that does not parse (written by hand) is left out: a task is never unreadable
    for its trace."""
    try:
        return trace_context.from_attributes({trace_context.TRACEPARENT: traceparent,
                                              trace_context.AWS_TRACE_HEADER: xray})
    except InvalidTaskInput:
        return None


@dataclass(frozen=True)
class CreateRequest:
    """What CreateTasks was asked to make. Field names are those of the JSON input."""

    queue: str
    count: int
    priority: int
    ttl_seconds: int
    payload: dict[str, Any]
    max_attempts: int
    delay_seconds: int = 0
    task_ids: tuple[str, ...] = ()
    run_seconds: int | None = None  # None: the queue's DEFAULT_RUN_SECONDS when the task is claimed
    group: str | None = None  # fair share's group (taskqueue.core.fairness); None: the default group
    workflow: WorkflowSpec | None = None  # a workflow of tasks (taskqueue.core.workflow_spec): count is its size
    trace: TraceContext | None = None  # given with the request; None: the caller's, captured at creation


def parse_create_event(event: object, settings: Settings) -> CreateRequest:
    """The request of one CreateTasks invocation. ``event`` is a request (a direct invoke, or the schedule's
    Input, which EventBridge delivers as it is) or a whole EventBridge Scheduled Event (a schedule without
    Input: ``detail-type`` "Scheduled Event", ``source`` "aws.events", ``detail`` {}), which asks for the default
    request ``{}``. Both shapes are declared in schemas/create_tasks.schema.json; anything else is refused."""
    schema.check_create_tasks_input(event)
    body: Mapping[str, Any] = {} if schema.is_eventbridge_event(event) else event  # type: ignore[assignment]
    return _request_of(body, settings)


def parse_create_request(body: object, settings: Settings) -> CreateRequest:
    """Validate a CreateTasks request; every field is optional (defaults documented in the README)."""
    schema.check(body, schema.REQUEST, "a CreateTasks request")
    return _request_of(body, settings)  # type: ignore[arg-type]


def _request_of(body: Mapping[str, Any], settings: Settings) -> CreateRequest:
    """The rules the schema cannot state (it has checked every field on its own): the queue is configured,
    count equals the number of taskIds, delaySeconds is less than ttlSeconds, the payload's size, printable ids,
    and runSeconds fits in what the worker's Timeout leaves (WORKER_TIMEOUT_SECONDS; taskqueue.core.run_time)."""
    if workflow_spec.is_workflow_request(body):
        return _workflow_request(body, settings)
    queue = keys.validate_queue_name(body.get("queue", "work"))
    settings.order_of(queue)
    task_ids = list(body.get("taskIds") or ())
    for index, task_id in enumerate(task_ids):
        if not valid_task_id(task_id):
            raise InvalidField(
                f"taskIds[{index}] must be 1-{_TASK_ID_MAX} printable characters without '#', got {task_id!r:.100}",
                f"taskIds[{index}]",
            )
    if len(set(task_ids)) != len(task_ids):
        raise InvalidField("taskIds has duplicates", "taskIds")
    count = _whole(body, "count", len(task_ids) or 1, 1, MAX_TASKS_PER_REQUEST)
    if task_ids and count != len(task_ids):
        raise InvalidField(f"count ({count}) must equal the number of taskIds ({len(task_ids)})", "count")
    payload = body.get("payload", {})
    if not isinstance(payload, dict):
        raise InvalidField(f"payload must be a JSON object, got {type(payload).__name__}", "payload")
    size = len(encode_json(payload).encode("utf-8"))
    if size > MAX_PAYLOAD_BYTES:
        raise InvalidField(
            f"payload is {size} bytes, over the limit of {MAX_PAYLOAD_BYTES} bytes; store it elsewhere and pass a reference",
            "payload",
        )
    ttl_seconds = _whole(body, "ttlSeconds", settings.default_ttl_seconds, 1, 10 * 365 * 86400)
    delay_seconds = _whole(body, "delaySeconds", 0, 0, 365 * 86400)
    if delay_seconds >= ttl_seconds:
        raise InvalidField(
            f"delaySeconds ({delay_seconds}) must be less than ttlSeconds ({ttl_seconds}): the task would be shed "
            "before it could ever run",
            "delaySeconds",
        )
    run_seconds = _run_seconds(body, settings)
    group = body.get("group")
    if group is not None:
        try:
            fairness.validate_group(group)
        except InvalidTaskInput as exc:
            raise InvalidField(str(exc), "group") from None
    try:
        trace = trace_context.from_attributes(body)
    except InvalidTaskInput as exc:
        field_name = trace_context.TRACEPARENT if trace_context.TRACEPARENT in str(exc) else trace_context.AWS_TRACE_HEADER
        raise InvalidField(str(exc), field_name) from None
    return CreateRequest(
        queue=queue,
        count=count,
        priority=keys.validate_priority(_whole(body, "priority", 0, keys.MIN_PRIORITY, keys.MAX_PRIORITY)),
        ttl_seconds=ttl_seconds,
        payload=payload,
        max_attempts=_whole(body, "maxAttempts", settings.max_attempts, 1, 100),
        delay_seconds=delay_seconds,
        task_ids=tuple(task_ids),
        run_seconds=run_seconds,
        group=group,
        trace=trace,
    )


def _workflow_request(body: Mapping[str, Any], settings: Settings) -> CreateRequest:
    """A workflow: the request's fields are its tasks' defaults; each task is checked as a task, then the graph."""
    # Fields a workflow refuses are left to parse_workflow, which says why.
    given = {k: v for k, v in body.items() if k != "workflow" and k not in workflow_spec.NOT_WITH_A_WORKFLOW}
    base = _request_of(given, settings)
    defaults = {"payload": base.payload, "priority": base.priority, "ttlSeconds": base.ttl_seconds,
                "maxAttempts": base.max_attempts, "runSeconds": base.run_seconds, "group": base.group}
    spec = workflow_spec.parse_workflow(body, base.queue, defaults)
    for task in spec.tasks:
        where = "workflow.onFailure" if task.on_failure else f"workflow.tasks[{task.key}]"
        try:
            _request_of({"queue": base.queue, "payload": task.payload, "runSeconds": task.run_seconds,
                         "ttlSeconds": task.ttl_seconds}, settings)
        except InvalidField as exc:
            raise InvalidField(f"{where}: {exc}", f"{where}.{exc.field}") from None
    return replace(base, count=len(spec.tasks), workflow=spec)


def _run_seconds(body: Mapping[str, Any], settings: Settings) -> int | None:
    if body.get("runSeconds") is None:
        return None
    run_seconds = _whole(body, "runSeconds", 0, MIN_RUN_SECONDS, LAMBDA_MAX_TIMEOUT_SECONDS)
    if run_seconds > settings.longest_run_seconds:
        timeout = LAMBDA_MAX_TIMEOUT_SECONDS if settings.worker_timeout_seconds is None else settings.worker_timeout_seconds
        raise InvalidField(too_long_message(run_seconds, timeout), "runSeconds")
    return run_seconds


def new_tasks(request: CreateRequest, now_ms: int, settings: Settings, request_id: str | None = None) -> list[Task]:
    """PENDING tasks for a request. ttl is epoch *seconds*: creation plus the task's time-to-live.

    Without caller-chosen ids, ids derive from ``request_id`` when given (Lambda keeps the request id when it
    retries an asynchronous invocation, so a retry names the same tasks), else they are random."""
    ids = request.task_ids or derived_task_ids(request.count, request_id)
    ttl = now_ms // 1000 + request.ttl_seconds
    not_before = now_ms + request.delay_seconds * 1000 if request.delay_seconds else None
    return [
        Task(
            task_id=task_id,
            queue=request.queue,
            status=TaskStatus.PENDING,
            priority=request.priority,
            created_ms=now_ms,
            updated_ms=now_ms,
            enqueued_ms=now_ms,
            ttl=ttl,
            max_attempts=request.max_attempts,
            shard=keys.shard_for(task_id, settings.queue_shards),
            payload=request.payload,
            not_before_ms=not_before,
            request_id=request_id,
            run_seconds=request.run_seconds,
            group=request.group,
            trace=request.trace,
        )
        for task_id in ids
    ]


def derived_task_ids(count: int, request_id: str | None) -> tuple[str, ...]:
    if request_id is None:
        return tuple(str(uuid.uuid4()) for _ in range(count))
    return tuple(str(uuid.uuid5(_TASK_ID_NAMESPACE, f"{request_id}#{n}")) for n in range(count))


def _whole(body: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    """A whole-number field. JSON Schema's "integer" takes 5.0 as 5, and so does this."""
    value = body.get(name, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidField(f"{name} must be a whole number from {low} to {high}, got {value!r}", name)
    return value


def valid_task_id(task_id: object) -> bool:
    return (
        isinstance(task_id, str)
        and 0 < len(task_id) <= _TASK_ID_MAX
        and "#" not in task_id
        and task_id.isprintable()
    )
