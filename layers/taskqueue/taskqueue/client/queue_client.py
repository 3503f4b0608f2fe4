"""The producer client: enqueue tasks from any Python application, read a task's status, attempts, result, progress
and last error, wait for it to finish, cancel it, and look after the dead letters - what SQS SendMessage, BullMQ's
``queue.add`` / ``job.waitUntilFinished`` and Celery's ``delay`` / ``AsyncResult`` give their users.

    from taskqueue.client import TaskQueueClient

    queue = TaskQueueClient.connect(stack_name="taskqueue")  # or table_name="...", or nothing: the running `make up`
    task_id = queue.enqueue({"order": 42}, task_id="order-42", priority=5, run_seconds=120)
    queue.enqueue({"order": 43}, group="customer-17")         # fair share between customers (client/groups.py)
    task = queue.wait(task_id, timeout=900)                   # raises WaitTimedOut if it is not done by then
    print(task.status, task.result, task.last_error)

Enqueueing is CreateTasks' own path: the request is checked by ``model.parse_create_request`` against the published
schema (schemas/create_tasks.schema.json) with the same errors (``InvalidField`` naming the field; nothing is
written), and written by ``taskqueue.client.create.create_tasks`` with the client's ``Services``, so what CreateTasks does
when it creates tasks (a caller's ``task_id`` makes the enqueue idempotent: sending it again creates nothing new)
the client does too. A producer writes its tasks and nothing else: the table's stream starts the queue's worker
(docs/wakeups.md). ``enqueue`` returns an ``Enqueued``, the task id (a ``str``, so ``task_id = queue.enqueue(...)``
works) that also says whether it was ``created`` (False: a task with this id existed already).

Permissions (the stack's output ``ProducerPolicyArn`` is a managed policy with exactly the first line: attach it to
your application's role):

- enqueue: ``dynamodb:BatchWriteItem`` (tasks with generated ids) and ``dynamodb:PutItem`` (a caller's ``task_id``,
  conditional) on the queue table; ``dynamodb:UpdateItem`` on the queues' control items (``taskId`` ``queue#<name>``:
  a delayed task's announcement of the queue's delayed head);
- reads (``get``, ``wait``, ``dead_letters``): ``dynamodb:GetItem``, ``BatchGetItem`` and ``Query`` (the StatusIndex);
  ``cancel`` and ``redrive``: ``GetItem`` and ``UpdateItem`` on the task (a redriven task's write starts the worker).

Installable on its own: ``pip install <this repository>`` (pyproject.toml) gives ``taskqueue`` and its dependencies.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from botocore.config import Config

from taskqueue.client import discovery
from taskqueue.client.create import CreateSummary, WakeUp, create_tasks
from taskqueue.client.groups import GroupControls
from taskqueue.client.workflows import WorkflowControls
from taskqueue.core.clock import Clock, SystemClock
from taskqueue.core.errors import TaskQueueError, WaitTimedOut
from taskqueue.core.model import Task, parse_create_request
from taskqueue.core.settings import Settings
from taskqueue.core.states import FINISHED, TaskStatus
from taskqueue.core.trace_context import context_of
from taskqueue.services import Services, calls_of
from taskqueue.store import TaskStore

CONFIG = Config(retries={"mode": "standard", "max_attempts": 6}, connect_timeout=5, read_timeout=30)
# How often ``wait`` reads the task, at first; the pause doubles up to WAIT_POLL_MAX_SECONDS.
WAIT_POLL_SECONDS = 0.5
WAIT_POLL_MAX_SECONDS = 5.0
# The dead-letter states: a task there runs no more until it is redriven.
DEAD_LETTER_STATES = (TaskStatus.FAILURE, TaskStatus.CANCELLED)

__all__ = ["Enqueued", "TaskQueueClient", "WakeUp"]

logger = logging.getLogger("taskqueue.client")


class Enqueued(str):
    """An enqueued task's id (a ``str``: pass it to ``get``, ``wait``, ``cancel``, store it, compare it) that also says
    what happened: ``created`` (False: a task with this id existed already, nothing was written), ``queue``, and
    ``wakeup`` (``WakeUp.STREAM``: the table's stream starts the queue's worker)."""

    queue: str
    created: bool
    wakeup: WakeUp

    def __new__(cls, task_id: str, *, queue: str, created: bool, wakeup: WakeUp) -> Enqueued:
        made = super().__new__(cls, task_id)
        made.queue, made.created, made.wakeup = queue, created, wakeup
        return made

    @property
    def task_id(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"Enqueued({str(self)!r}, queue={self.queue!r}, created={self.created}, wakeup={self.wakeup!r})"


class TaskQueueClient(GroupControls, WorkflowControls):
    """A producer's handle on the queues of one stack (a group's limits and pause: ``taskqueue.client.groups``;
    workflows: ``taskqueue.client.workflows``).
    ``services``: the queue table and the clock (tests hand in fakes: a FakeClock makes ``wait`` instant)."""

    def __init__(self, services: Services) -> None:
        self.services = services

    @classmethod
    def connect(
        cls,
        *,
        stack_name: str | None = None,
        table_name: str | None = None,
        local: bool = False,
        region: str | None = None,
        profile: str | None = None,
        endpoint_url: str | None = None,
        env: Mapping[str, str] | None = None,
        clock: Clock | None = None,
    ) -> TaskQueueClient:
        """The queues of a deployed stack (``stack_name``: names and limits from its outputs and parameters), of a
        table (``table_name``, with the rest from QUEUE_* variables), or of the running local stack (``local``, or
        nothing given: found by itself, as ``taskq`` finds it). ``env``: the variables to read (default os.environ).
        The credentials need the permissions in this module's docstring (the stack's ``ProducerPolicyArn`` output)."""
        import os

        environ = os.environ if env is None else env
        endpoint_url = endpoint_url or environ.get("AWS_ENDPOINT_URL") or None
        explicit = bool(table_name or endpoint_url or environ.get("QUEUE_TABLE_NAME", "").strip())

        def cloudformation() -> Any:
            session = discovery.session_for(None, region, profile)
            return session.client("cloudformation", endpoint_url=endpoint_url, config=CONFIG)

        stack = discovery.resolve_stack(local=local, stack_name=stack_name, explicit=explicit,
                                        cloudformation=cloudformation, env=environ)
        variables = dict(environ) | (stack.env() if stack is not None else {})
        if table_name:
            variables["QUEUE_TABLE_NAME"] = table_name
        if not variables.get("QUEUE_TABLE_NAME", "").strip():
            raise discovery.DiscoveryError(discovery.no_table_message())
        settings = Settings.from_env(variables)
        session = discovery.session_for(stack, region, profile)
        endpoint = discovery.endpoint_for(stack, endpoint_url)
        clock = clock or SystemClock()
        store = TaskStore(session.client("dynamodb", endpoint_url=endpoint, config=CONFIG), settings, clock)
        return cls(Services(settings, store, None, clock, *calls_of(variables)))

    @property
    def settings(self) -> Settings:
        return self.services.settings

    # ---- enqueue ------------------------------------------------------------------------------------------

    def create(self, request: Mapping[str, Any]) -> CreateSummary:
        """Create the tasks of a CreateTasks request, exactly as CreateTasks does (same checks, same errors)."""
        parsed = parse_create_request(dict(request), self.settings)
        self.services.check_request(parsed)
        return create_tasks(parsed, self.services.store, self.services.clock.now_ms())

    def enqueue(
        self,
        payload: Mapping[str, Any] | None = None,
        *,
        queue: str = "work",
        task_id: str | None = None,
        priority: int | None = None,
        delay_seconds: int | None = None,
        ttl_seconds: int | None = None,
        max_attempts: int | None = None,
        run_seconds: int | None = None,
        group: str | None = None,
        trace: object = None,
    ) -> Enqueued:
        """One task; its id, as an ``Enqueued`` (a ``str``). With ``task_id`` the enqueue is idempotent: the same id
        again creates nothing new (a retry after a timeout is safe). Unset options take CreateTasks' defaults
        (DEFAULT_TTL_SECONDS, ...). ``group``: the task's fair-share group (a tenant, a customer:
        ``taskqueue.client.groups``); None: the default group. ``trace``: the producer's trace context (a
        ``traceparent`` or X-Ray header, a mapping of headers, a ``taskqueue.tracing.TraceContext``); None: the
        active OpenTelemetry span's or X-Ray segment's, if any (docs/tracing.md: each attempt's span joins it)."""
        summary = self.enqueue_many(payload, queue=queue, task_ids=[task_id] if task_id is not None else None,
                                    priority=priority, delay_seconds=delay_seconds, ttl_seconds=ttl_seconds,
                                    max_attempts=max_attempts, run_seconds=run_seconds, group=group, trace=trace)
        return Enqueued(summary.task_ids[0], queue=summary.queue, created=summary.created == 1, wakeup=summary.wakeup)

    def enqueue_many(
        self,
        payload: Mapping[str, Any] | None = None,
        *,
        count: int | None = None,
        task_ids: list[str] | None = None,
        queue: str = "work",
        priority: int | None = None,
        delay_seconds: int | None = None,
        ttl_seconds: int | None = None,
        max_attempts: int | None = None,
        run_seconds: int | None = None,
        group: str | None = None,
        trace: object = None,
    ) -> CreateSummary:
        """``count`` tasks (or one per id of ``task_ids``, idempotent) with the same payload and options (``trace``
        as for ``enqueue``)."""
        fields = {"queue": queue, "payload": dict(payload) if payload is not None else None, "count": count,
                  "taskIds": list(task_ids) if task_ids is not None else None, "priority": priority,
                  "delaySeconds": delay_seconds, "ttlSeconds": ttl_seconds, "maxAttempts": max_attempts,
                  "runSeconds": run_seconds, "group": group}
        context = context_of(trace)
        if context is not None:
            fields |= context.attributes()
        return self.create({name: value for name, value in fields.items() if value is not None})

    # ---- read, wait, cancel ----------------------------------------------------------------------------------

    def get(self, task_id: str) -> Task:
        """The task as it is now (strongly consistent): ``status``, ``attempts``/``max_attempts``, ``result``,
        ``last_error``, ``progress``/``progress_message``, ``run_seconds``... Raises TaskNotFound."""
        return self.services.store.get(task_id)

    def wait(self, task_id: str, timeout: float, poll_seconds: float = WAIT_POLL_SECONDS) -> Task:
        """Wait until the task is finished (SUCCESS, FAILURE, CANCELLED or SHED) and return it; raise
        ``WaitTimedOut`` (with the task as last read) if it is not within ``timeout`` seconds. Reads every
        ``poll_seconds`` at first, then less often (up to WAIT_POLL_MAX_SECONDS)."""
        if timeout < 0 or poll_seconds <= 0:
            raise ValueError(f"timeout must be at least 0 and poll_seconds positive, got {timeout!r}, {poll_seconds!r}")
        clock = self.services.clock
        deadline = clock.monotonic() + timeout
        pause = poll_seconds
        while True:
            task = self.get(task_id)
            if task.status in FINISHED:
                return task
            left = deadline - clock.monotonic()
            if left <= 0:
                raise WaitTimedOut(
                    f"task {task_id} is still {task.status} after {timeout:g} s (attempt {task.attempts} of "
                    f"{task.max_attempts}): wait again, or cancel it while it is PENDING", task)
            clock.sleep(min(pause, left))
            pause = min(pause * 2, WAIT_POLL_MAX_SECONDS)

    def cancel(self, task_id: str) -> Task:
        """PENDING (or WAITING: a workflow's) -> CANCELLED (a running task cannot be cancelled: its runner would not
        know). What waits for a workflow's task follows its policies (docs/workflows.md)."""
        return self.services.store.cancel(task_id)

    # ---- dead letters ----------------------------------------------------------------------------------------

    def dead_letters(self, queue: str = "work", state: TaskStatus | str = TaskStatus.FAILURE,
                     limit: int = 100) -> list[Task]:
        """The queue's tasks in a dead-letter state (FAILURE, or CANCELLED), most recent first."""
        status = TaskStatus(state)
        if status not in DEAD_LETTER_STATES:
            raise TaskQueueError(f"{status} is not a dead-letter state: ask for FAILURE or CANCELLED")
        return self.services.store.list_tasks(queue, status.value, limit, None).tasks

    def redrive(self, task_id: str, ttl_seconds: int | None = None) -> Task:
        """A FAILURE or CANCELLED task back to PENDING, attempts reset, a fresh ttl (its write starts the worker)."""
        return self.services.store.redrive(task_id, ttl_seconds=ttl_seconds)
