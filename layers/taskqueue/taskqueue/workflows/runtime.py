"""What a runner is given of a workflow task's dependencies: ``Task.dependencies``, read for it before it runs."""

from __future__ import annotations

from taskqueue.core.model import Task
from taskqueue.store import TaskStore


def with_dependencies(store: TaskStore, task: Task) -> Task:
    """``task`` with its dependencies' statuses, results and errors (docs/workflows.md, "Results"): one read of the
    task's edges and one per 100 dependencies, strongly consistent, bounded in size; a task that waits for none as
    it is (no read)."""
    if not task.waits_for:
        return task
    return task.with_changes(dependencies=store.dependencies_of(task))
