"""Helpers of the workflow tests: create a workflow through CreateTasks' path, run what is claimable with outcomes
chosen per key, and read every task's state."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from taskqueue.client.create import create_tasks
from taskqueue.core.model import Task, parse_create_request
from taskqueue.core.states import TaskStatus
from taskqueue.core.workflow_rules import key_of
from taskqueue.store import TaskStore


def workflow_body(workflow_id: str, tasks: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    on_failure = extra.pop("onFailure", None)
    workflow: dict[str, Any] = {"id": workflow_id, "tasks": tasks}
    if on_failure is not None:
        workflow["onFailure"] = on_failure
    if "deadlineSeconds" in extra:
        workflow["deadlineSeconds"] = extra.pop("deadlineSeconds")
    return {"workflow": workflow, **extra}


def diamond(workflow_id: str = "wf-diamond", policy: str = "fail", **extra: Any) -> dict[str, Any]:
    """a -> b, a -> c, b -> d, c -> d (d's edge from c carries ``policy``)."""
    return workflow_body(workflow_id, [
        {"key": "a"}, {"key": "b", "dependsOn": ["a"]}, {"key": "c", "dependsOn": ["a"]},
        {"key": "d", "dependsOn": ["b", {"key": "c", "policy": policy}]},
    ], **extra)


def create(store: TaskStore, clock: Any, body: Mapping[str, Any], request_id: str | None = None) -> Any:
    return create_tasks(parse_create_request(dict(body), store.settings), store, clock.now_ms(), request_id)


def states(store: TaskStore, workflow_id: str) -> dict[str, str]:
    """Each task's key -> its state now."""
    record = store.workflow_record(workflow_id)
    assert record is not None
    return {key_of(view.task.task_id): view.task.status.value for view in store.workflow_tasks(record)}


Outcome = Callable[[Task], Any]  # returns a result (SUCCESS) or raises (FAILURE through fail())


def run_claimable(store: TaskStore, queue: str = "work", *, fail: frozenset[str] = frozenset(),
                  seen: list[Task] | None = None, rounds: int = 100, owner: str = "w") -> list[str]:
    """Claim and finish every claimable task until none is left: the keys in ``fail`` FAILURE, the others SUCCESS
    with result {"key": key}. Each task is given its dependencies as a runner would be (``seen``). The keys run,
    in order."""
    from taskqueue.workflows.runtime import with_dependencies

    ran: list[str] = []
    for _ in range(rounds):
        candidates = store.candidates(queue, 50)
        if not candidates:
            return ran
        for candidate in candidates:
            task = store.claim(candidate, owner)
            if task is None:
                continue
            given = with_dependencies(store, task)
            if seen is not None:
                seen.append(given)
            key = key_of(task.task_id)
            ran.append(key)
            if key in fail:
                assert store.fail(task, owner, f"{key} broke")
            else:
                assert store.complete(task, owner, {"key": key})
    raise AssertionError("tasks were still claimable after many rounds")


def status_of(store: TaskStore, task_id: str) -> TaskStatus:
    return store.get(task_id).status
