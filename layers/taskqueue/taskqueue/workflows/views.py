"""What an operator and an application see of a workflow (``taskq workflow show``, the board's workflow page, the
client's ``workflow``), and a workflow's cancel."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from taskqueue.core.errors import TaskNotFound
from taskqueue.core.states import TaskStatus
from taskqueue.core.workflow_rules import WorkflowState
from taskqueue.store import TaskStore, WorkflowRecord, WorkflowTaskView

# What a workflow as a whole is, from its tasks: RUNNING while one waits, is pending or runs.
SUCCEEDED, FAILED, RUNNING, CANCELLED = "SUCCEEDED", "FAILED", "RUNNING", "CANCELLED"
_LIVE = frozenset({TaskStatus.WAITING, TaskStatus.PENDING, TaskStatus.TAKEN})


@dataclass(frozen=True)
class WorkflowView:
    record: WorkflowRecord
    tasks: list[WorkflowTaskView]  # each after its dependencies (at most the limit asked for)

    @property
    def counts(self) -> dict[str, int]:
        return dict(Counter(view.task.status.value for view in self.tasks))

    @property
    def state(self) -> str:
        """RUNNING (a task waits, is pending or runs), SUCCEEDED (every task did), FAILED (every task ended, and one
        did not succeed), or CANCELLED (the workflow was cancelled)."""
        if self.record.state is WorkflowState.CANCELLED:
            return CANCELLED
        statuses = [view.task.status for view in self.tasks]
        if any(s in _LIVE for s in statuses):
            return RUNNING
        return SUCCEEDED if all(s is TaskStatus.SUCCESS for s in statuses) else FAILED


def show(store: TaskStore, workflow_id: str, limit: int | None = None) -> WorkflowView:
    """The workflow and its tasks as they are now; ``TaskNotFound`` if there is none (or its creation did not
    finish). Reads: its record, its member pages, one BatchGetItem per 100 tasks (and the edge pages of a task with
    long edge lists)."""
    record = store.workflow_record(workflow_id)
    if record is None:
        raise TaskNotFound(f"no workflow {workflow_id!r} (never created, or removed by TTL after its deadline)")
    if record.state is WorkflowState.CREATING:
        raise TaskNotFound(f"workflow {workflow_id!r} is not created: its creation did not finish (send the same "
                           "request again to finish it); nothing of it runs")
    return WorkflowView(record, store.workflow_tasks(record, limit))


def cancel(store: TaskStore, workflow_id: str) -> list[str]:
    """Cancel the workflow: each of its tasks still waiting or pending (its on-failure task too); the ids cancelled.
    A running task runs on; what waits for it is cancelled already."""
    return store.cancel_workflow(workflow_id)
