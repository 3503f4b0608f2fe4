"""The producer client: enqueue tasks from any Python application, read a task's status, attempts, result, progress
and last error, wait for it to finish, cancel it, and look after the dead letters - what SQS SendMessage, BullMQ's
``queue.add`` / ``job.waitUntilFinished`` and Celery's ``delay`` / ``AsyncResult`` give their users.

    from taskqueue.client import TaskQueueClient

    queue = TaskQueueClient.connect(stack_name="taskqueue")  # or table_name="...", or nothing: the running `make up`
    task_id = queue.enqueue({"order": 42}, task_id="order-42", priority=5, run_seconds=120)
    task = queue.wait(task_id, timeout=900)                   # raises WaitTimedOut if it is not done by then
    print(task.status, task.result, task.last_error)

Enqueueing is CreateTasks' own path: the request is checked by ``model.parse_create_request`` against the published
schema (schemas/create_tasks.schema.json) with the same errors (``InvalidField`` naming the field; nothing is
written), and written by ``taskqueue.client.create.create_tasks`` with the client's ``Services``, so what CreateTasks does
when it creates tasks (a caller's ``task_id`` makes the enqueue idempotent: sending it again creates nothing new)
the client does too. It needs ``dynamodb:PutItem``/``BatchWriteItem``/``BatchGetItem`` on the queue table, reads need
``GetItem`` and ``Query``, cancel and redrive ``UpdateItem``, and a redrive's wake-up ``sns:Publish`` on TriggerTopic.

Installable on its own: ``pip install <this repository>`` (pyproject.toml) gives ``taskqueue`` and its dependencies.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.config import Config

from taskqueue.client import discovery
from taskqueue.client.create import CreateSummary, create_tasks
from taskqueue.core.clock import Clock, SystemClock
from taskqueue.core.errors import TaskQueueError, WaitTimedOut
from taskqueue.core.model import Task, parse_create_request
from taskqueue.core.settings import Settings
from taskqueue.core.states import FINISHED, TaskStatus
from taskqueue.services import Services
from taskqueue.store import TaskStore
from taskqueue.wakeups.notify import Notifier

CONFIG = Config(retries={"mode": "standard", "max_attempts": 6}, connect_timeout=5, read_timeout=30)
# How often ``wait`` reads the task, at first; the pause doubles up to WAIT_POLL_MAX_SECONDS.
WAIT_POLL_SECONDS = 0.5
WAIT_POLL_MAX_SECONDS = 5.0
# The dead-letter states: a task there runs no more until it is redriven.
DEAD_LETTER_STATES = (TaskStatus.FAILURE, TaskStatus.CANCELLED)


class TaskQueueClient:
    """A producer's handle on the queues of one stack. ``services``: the queue table, TriggerTopic and the clock
    (tests hand in fakes: a FakeClock makes ``wait`` instant)."""

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
        nothing given: found by itself, as ``taskq`` finds it). ``env``: the variables to read (default os.environ)."""
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
        notifier = Notifier(session.client("sns", endpoint_url=endpoint, config=CONFIG), settings)
        return cls(Services(settings, store, notifier, clock))

    @property
    def settings(self) -> Settings:
        return self.services.settings

    # ---- enqueue ------------------------------------------------------------------------------------------

    def create(self, request: Mapping[str, Any]) -> CreateSummary:
        """Create the tasks of a CreateTasks request, exactly as CreateTasks does (same checks, same errors)."""
        parsed = parse_create_request(dict(request), self.settings)
        # The same path as CreateTasks: the tasks, then the wake-up handshake (the queue's worker is woken at once
        # unless one watches the queue).
        return create_tasks(parsed, self.services.store, self.services.clock.now_ms(), None, self.services.waker)

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
    ) -> str:
        """One task; its id. With ``task_id`` the enqueue is idempotent: the same id again creates nothing new (a
        retry after a timeout is safe). Unset options take CreateTasks' defaults (DEFAULT_TTL_SECONDS, ...)."""
        summary = self.enqueue_many(payload, queue=queue, task_ids=[task_id] if task_id is not None else None,
                                    priority=priority, delay_seconds=delay_seconds, ttl_seconds=ttl_seconds,
                                    max_attempts=max_attempts, run_seconds=run_seconds)
        return summary.task_ids[0]

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
    ) -> CreateSummary:
        """``count`` tasks (or one per id of ``task_ids``, idempotent) with the same payload and options."""
        fields = {"queue": queue, "payload": dict(payload) if payload is not None else None, "count": count,
                  "taskIds": list(task_ids) if task_ids is not None else None, "priority": priority,
                  "delaySeconds": delay_seconds, "ttlSeconds": ttl_seconds, "maxAttempts": max_attempts,
                  "runSeconds": run_seconds}
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
        """PENDING -> CANCELLED (a running task cannot be cancelled: its runner would not know)."""
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
        """A FAILURE or CANCELLED task back to PENDING, attempts reset, a fresh ttl; its queue's worker is woken
        the way a producer wakes it (the wake-up handshake; if that fails, the safety net finds the task within a minute)."""
        task = self.services.store.redrive(task_id, ttl_seconds=ttl_seconds)
        self.services.waker.after_write(task.queue, reason="redrive")  # work made claimable: as a producer's
        return task
