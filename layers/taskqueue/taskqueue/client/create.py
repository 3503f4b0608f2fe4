"""Creating the tasks of one CreateTasks request, and the summary it answers with.

One place for every producer: the CreateTasks handler (its request id names the tasks, so Lambda's retry of an
asynchronous invocation is idempotent), the client (``TaskQueueClient``) and ``taskq create``. A producer writes its
tasks and nothing else: the table's stream starts the queue's worker for them (docs/wakeups.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from taskqueue.core.model import CreateRequest, new_tasks
from taskqueue.observe import tracing
from taskqueue.store import TaskStore
from taskqueue.workflows.create import create_workflow


class WakeUp(StrEnum):
    """How the queue's worker learns of new tasks (an enqueue's ``wakeup``): always the table's stream, which starts
    it for every write that makes work claimable. No producer publishes anything, so nothing can fail here."""

    STREAM = "stream"

    @property
    def failed(self) -> bool:
        return False


@dataclass(frozen=True)
class CreateSummary:
    """What a request created: ``created`` new tasks, ``already_existed`` ids that were there already."""

    queue: str
    created: int
    already_existed: int
    task_ids: tuple[str, ...]
    ttl: int  # epoch seconds: the shed deadline every task of the request shares
    wakeup: WakeUp = WakeUp.STREAM

    def as_dict(self) -> dict[str, Any]:
        """The answer CreateTasks returns (and ``taskq create --json`` prints)."""
        return {
            "queue": self.queue,
            "created": self.created,
            "alreadyExisted": self.already_existed,
            "taskIds": list(self.task_ids),
            "ttl": self.ttl,
            "wakeup": str(self.wakeup),
        }


def create_tasks(request: CreateRequest, store: TaskStore, now_ms: int, request_id: str | None = None) -> CreateSummary:
    """Write a request's PENDING tasks. Caller-chosen ids (``taskIds``) are written only if absent; ids derived
    from ``request_id`` skip those a previous attempt of the same request wrote; random ids are simply written. A
    request without a trace context takes the caller's (``taskqueue.observe.tracing.capture``: an active span or
    segment, Lambda's trace header). A request with a workflow creates it whole (taskqueue.workflows.create)."""
    if request.trace is None:
        request = replace(request, trace=tracing.capture())
    if request.workflow is not None:  # tasks that wait for other tasks
        return create_workflow(request, store, now_ms, request_id)  # type: ignore[return-value]
    tasks = new_tasks(request, now_ms, store.settings, request_id)
    if request.task_ids:
        result = store.put_tasks(tasks, idempotent=True)
    elif request_id is not None:
        result = store.put_tasks_once(tasks)
    else:
        result = store.put_tasks(tasks)
    return CreateSummary(
        queue=request.queue,
        created=result.created,
        already_existed=result.already_existed,
        task_ids=tuple(t.task_id for t in tasks),
        ttl=tasks[0].ttl,
    )
