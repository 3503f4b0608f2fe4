"""Creating a workflow (CreateTasks' input with ``"workflow"``, the client's ``create_workflow``, ``taskq workflow
create``): all or nothing, idempotent by its id (docs/workflows.md, "Creation").

1. its record, CREATING (a record of that id with other content: refused; the same content: a retry, which resumes a
   creation still CREATING with the first attempt's times, or answers what exists);
2. every task that waits (WAITING, out of every index) and page, each only if absent;
3. ONE write makes the record RUNNING: from then on it is created, and its start is owed (its FANOUT mark);
4. its start: its roots (the tasks with no dependency) put PENDING, each only if absent (new tasks' INSERTs: the
   table's stream starts their worker, as for any new task), the mark off.
A crash before 3 leaves nothing a user or worker sees as created (no root exists, so nothing can run; the items wait,
invisible, for the retry or their deadline); after 3, a retry or the sweep (the safety net) finishes 4.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from taskqueue.core.model import CreateRequest
from taskqueue.core.workflow_plan import plan_workflow
from taskqueue.core.workflow_rules import WorkflowState
from taskqueue.store import TaskStore, record_of


@dataclass(frozen=True)
class WorkflowSummary:
    """What creating a workflow did: ``created`` tasks written by this call (0 when it existed), ``already_existed``
    the tasks that were there, ``ready`` the tasks made ready by it, ``state`` the workflow's (RUNNING, CANCELLED)."""

    queue: str
    workflow_id: str
    created: int
    already_existed: int
    task_ids: tuple[str, ...]
    ttl: int  # epoch s: the workflow's deadline (a task not ready by then never runs)
    ready: int
    state: str
    wakeup: str = "stream"  # as a plain creation's (taskqueue.client.create.WakeUp): the table's stream starts the worker

    def as_dict(self) -> dict[str, Any]:
        """CreateTasks' answer (and ``taskq workflow create --json``'s)."""
        return {"queue": self.queue, "workflowId": self.workflow_id, "created": self.created,
                "alreadyExisted": self.already_existed, "taskIds": list(self.task_ids), "ttl": self.ttl,
                "ready": self.ready, "state": self.state, "wakeup": str(self.wakeup)}


def create_workflow(request: CreateRequest, store: TaskStore, now_ms: int, request_id: str | None = None) -> WorkflowSummary:
    spec = request.workflow
    if spec is None:
        raise ValueError("create_workflow takes a request with a workflow")
    plan = plan_workflow(spec, now_ms, store.settings, request_id)
    existing = store.begin_workflow(plan)
    created = 0
    if existing is None or existing.state is WorkflowState.CREATING:
        if existing is not None:  # a retry of a creation that did not finish: the first attempt's times
            plan = plan_workflow(spec, existing.created_ms, store.settings, request_id)
        created = store.write_workflow(plan)
        store.commit_workflow(plan, now_ms)
    # Its start (also a retry's: one after a crash between the final write and the start finishes it now).
    record_item = store.workflow_record_item(spec.workflow_id)
    ready = store.start_workflow(record_item, plan.roots) if record_item is not None else 0
    record = record_of(record_item) if record_item is not None else None
    return WorkflowSummary(
        queue=spec.queue, workflow_id=spec.workflow_id, created=created + ready,
        already_existed=len(plan.task_ids) - created - ready, task_ids=tuple(plan.task_ids), ttl=plan.deadline,
        ready=ready, state=record.state.value if record is not None else WorkflowState.RUNNING.value,
    )
