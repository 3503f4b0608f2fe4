"""Creating the tasks of one CreateTasks request, and the summary it answers with.

One place for both callers: the CreateTasks handler (its request id names the tasks, so Lambda's retry of an
asynchronous invocation is idempotent) and ``taskq create``. After the write, the producer's side of the wake-up
handshake (``taskqueue.wakeups.producer``): the queue's worker is woken at once unless one watches the queue.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from taskqueue.core.correlation import Correlation
from taskqueue.core.model import CreateRequest, new_tasks
from taskqueue.observe import tracing
from taskqueue.store import TaskStore
from taskqueue.wakeups.producer import STREAM, ProducerHandshake, WakeUp

# The answer's ``wakeup`` when no handshake was asked for (no handshake given).
NOT_ASKED = "not-asked"


@dataclass(frozen=True)
class CreateSummary:
    """What a request created: ``created`` new tasks, ``already_existed`` ids that were there already, and ``wakeup``
    what the wake-up handshake did (a ``WakeUp``: a ``str`` such as ``woken``; when ``failed``, ``wakeup.cause`` and
    ``wakeup.problem`` say why, and the answer carries them as ``wakeupCause`` and ``wakeupProblem``)."""

    queue: str
    created: int
    already_existed: int
    task_ids: tuple[str, ...]
    ttl: int  # epoch seconds: the shed deadline every task of the request shares
    wakeup: str = NOT_ASKED  # what the wake-up handshake did (taskqueue.wakeups.producer)

    def as_dict(self) -> dict[str, Any]:
        """The answer CreateTasks returns (and ``taskq create --json`` prints)."""
        return {
            "queue": self.queue,
            "created": self.created,
            "alreadyExisted": self.already_existed,
            "taskIds": list(self.task_ids),
            "ttl": self.ttl,
            "wakeup": str(self.wakeup),
        } | self._wakeup_failure()

    def _wakeup_failure(self) -> dict[str, str]:
        cause, problem = getattr(self.wakeup, "cause", None), getattr(self.wakeup, "problem", None)
        return ({"wakeupCause": cause} if cause else {}) | ({"wakeupProblem": problem} if problem else {})


def create_tasks(
    request: CreateRequest,
    store: TaskStore,
    now_ms: int,
    request_id: str | None = None,
    handshake: ProducerHandshake | None = None,
) -> CreateSummary:
    """Write a request's PENDING tasks. Caller-chosen ids (``taskIds``) are written only if absent; ids derived
    from ``request_id`` skip those a previous attempt of the same request wrote; random ids are simply written.
    Then, with a ``handshake``, wake the queue's worker unless one watches it (also when nothing new was written: a
    retried request may be retried because its wake-up was lost); not for ready tasks of a stream-started queue, whose
    stream record is their wake-up (``stream``: taskqueue.work.stream_start). A request without a trace context takes
    the caller's (``taskqueue.observe.tracing.capture``: an active span or segment, Lambda's trace header)."""
    if request.trace is None:
        request = replace(request, trace=tracing.capture())
    tasks = new_tasks(request, now_ms, store.settings, request_id)
    if request.task_ids:
        result = store.put_tasks(tasks, idempotent=True)
    elif request_id is not None:
        result = store.put_tasks_once(tasks)
    else:
        result = store.put_tasks(tasks)
    wakeup = WakeUp(NOT_ASKED)
    if handshake is not None and store.settings.stream_started(request.queue) and not request.delay_seconds:
        wakeup = WakeUp(STREAM)  # the table's stream hands the new tasks to the queue's worker (a stream start)
    elif handshake is not None:
        wakeup = handshake.after_write(request.queue, Correlation(request_id, tasks[0].task_id))
    return CreateSummary(
        queue=request.queue,
        created=result.created,
        already_existed=result.already_existed,
        task_ids=tuple(t.task_id for t in tasks),
        ttl=tasks[0].ttl,
        wakeup=wakeup,
    )
