"""The client's workflows (docs/workflows.md): tasks that wait for other tasks, created in one call, all or nothing.
Joined into ``TaskQueueClient``; ``taskq workflow`` and the board use the same functions.

    queue.create_workflow({"id": "gallery-42", "tasks": [
        {"key": "resize-1", "payload": {"image": "1.png"}},
        {"key": "resize-2", "payload": {"image": "2.png"}},
        {"key": "gallery", "dependsOn": ["resize-1", {"key": "resize-2", "policy": "ignore-failure"}]},
    ], "onFailure": {"key": "alert"}})
    view = queue.wait_workflow("gallery-42", timeout=600)   # SUCCEEDED, FAILED or CANCELLED
    queue.cancel_workflow("gallery-42")                     # what waits or is pending is cancelled

A runner of ``gallery`` reads ``task.dependencies`` (each one's ``status``, ``result``, ``error``) or ``task.results``.

Permissions: those of ``enqueue`` (the stack's ProducerPolicy: PutItem, UpdateItem, GetItem and BatchGetItem on the
queue table); a workflow is written with conditional PutItems and made visible with one UpdateItem.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from taskqueue.core.errors import WaitTimedOut
from taskqueue.services import Services
from taskqueue.workflows import views
from taskqueue.workflows.create import WorkflowSummary
from taskqueue.workflows.views import WorkflowView


class WorkflowControls:
    """What ``TaskQueueClient`` offers for workflows (it sets ``services`` and has ``create``)."""

    services: Services
    create: Callable[..., Any]  # TaskQueueClient.create: CreateTasks' own path

    def create_workflow(
        self, workflow: Mapping[str, Any], *, queue: str = "work", payload: Mapping[str, Any] | None = None,
        priority: int | None = None, ttl_seconds: int | None = None, max_attempts: int | None = None,
        run_seconds: int | None = None, group: str | None = None,
    ) -> WorkflowSummary:
        """Create ``workflow`` (``{"id", "tasks", "onFailure", "deadlineSeconds"}``, as CreateTasks' input has it) on
        ``queue``; the other arguments are its tasks' defaults. Sending it again creates nothing new; the same id with
        other content raises ``InvalidField``. Bad input (a cycle, a missing dependency, over the limits) raises
        ``InvalidField`` and writes nothing. Its tasks with no dependency start as new tasks do (the table's stream
        starts the queue's worker); each other task, when its last dependency ends."""
        fields = {"queue": queue, "payload": dict(payload) if payload is not None else None, "priority": priority,
                  "ttlSeconds": ttl_seconds, "maxAttempts": max_attempts, "runSeconds": run_seconds, "group": group}
        request = {name: value for name, value in fields.items() if value is not None} | {"workflow": dict(workflow)}
        summary: WorkflowSummary = self.create(request)
        return summary

    def workflow(self, workflow_id: str, limit: int | None = None) -> WorkflowView:
        """The workflow and its tasks now: ``view.state`` (RUNNING, SUCCEEDED, FAILED, CANCELLED), ``view.counts``,
        and each task with what it waits for. Raises ``TaskNotFound``."""
        return views.show(self.services.store, workflow_id, limit)

    def cancel_workflow(self, workflow_id: str) -> list[str]:
        """Cancel every task of the workflow that waits or is pending (its on-failure task too); the ids cancelled."""
        return views.cancel(self.services.store, workflow_id)

    def wait_workflow(self, workflow_id: str, timeout: float, poll_seconds: float = 1.0) -> WorkflowView:
        """Wait until no task of the workflow waits, is pending or runs; ``WaitTimedOut`` if it takes longer than
        ``timeout`` seconds (reads the whole workflow every ``poll_seconds``: for small workflows and tests)."""
        clock = self.services.clock
        deadline = clock.monotonic() + timeout
        while True:
            view = self.workflow(workflow_id)
            if view.state != views.RUNNING:
                return view
            if clock.monotonic() >= deadline:
                raise WaitTimedOut(f"workflow {workflow_id} is still running after {timeout:g} s: {view.counts}", None)
            clock.sleep(poll_seconds)
