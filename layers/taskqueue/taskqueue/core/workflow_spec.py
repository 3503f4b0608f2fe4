"""A workflow as CreateTasks' input gives it (``"workflow": {...}``), checked whole before anything is written: keys
unique, every dependency names a task of the workflow, no cycle, within the limits, one queue (not the matching one).

Pure: the request in, a ``WorkflowSpec`` out (its tasks in an order where each comes after its dependencies), or an
``InvalidField`` that names the field and says what to change. The schema (schemas/create_tasks.schema.json) has
checked each field's shape; this module checks what a schema cannot state: references, cycles, sizes, defaults.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from taskqueue.core import fairness, keys
from taskqueue.core.errors import InvalidField, InvalidTaskInput
from taskqueue.core.workflow_rules import Policy, task_id_of

# A workflow holds at most this many tasks (its on-failure task included) and this many dependency edges; a task at
# most MAX_DEPENDENCIES dependencies (the on-failure task: every other task). The counters that count a dependent's
# dependencies hold FAN_IN slots a node: two levels count up to 10,000 (taskqueue.core.workflow_rules.counter_path).
MAX_WORKFLOW_TASKS = 20_000
MAX_WORKFLOW_EDGES = 100_000
MAX_DEPENDENCIES = 10_000
# The payloads of one workflow together (compact JSON): what one creation may write.
MAX_WORKFLOW_PAYLOAD_BYTES = 16 * 1024 * 1024
DEFAULT_DEADLINE_SECONDS = 86_400
MAX_DEADLINE_SECONDS = 365 * 86_400
# The request fields a workflow's tasks take as their defaults, and those a workflow refuses.
TASK_DEFAULTS = ("payload", "priority", "ttlSeconds", "maxAttempts", "runSeconds", "group")
NOT_WITH_A_WORKFLOW = {
    "count": "a workflow's tasks are those it lists",
    "taskIds": "a workflow's task ids are '<workflow id>/<key>'",
    "delaySeconds": "a workflow's task waits for its dependencies instead",
}


@dataclass(frozen=True)
class Edge:
    """``dependency`` (a key) must end before the task that names it may run; ``policy`` says what its failure does."""

    dependency: str
    policy: Policy = Policy.FAIL


@dataclass(frozen=True)
class WorkflowTask:
    key: str
    payload: dict[str, Any]
    priority: int
    ttl_seconds: int  # counted from when it becomes ready (PENDING), like a new task's from its creation
    max_attempts: int
    run_seconds: int | None
    group: str | None
    depends_on: tuple[Edge, ...] = ()
    on_failure: bool = False  # the workflow's on-failure task: depends on every other task, runs if one failed


@dataclass(frozen=True)
class WorkflowSpec:
    workflow_id: str
    queue: str
    deadline_seconds: int
    tasks: tuple[WorkflowTask, ...]  # each after its dependencies; the on-failure task, if any, last
    fingerprint: str  # the request's content: the same id with other content is refused

    def task_id(self, key: str) -> str:
        return task_id_of(self.workflow_id, key)

    @property
    def edges(self) -> int:
        return sum(len(t.depends_on) for t in self.tasks)


def is_workflow_request(body: Mapping[str, Any]) -> bool:
    return "workflow" in body


def parse_workflow(body: Mapping[str, Any], queue: str, defaults: Mapping[str, Any]) -> WorkflowSpec:
    """The workflow of a CreateTasks request whose fields the schema has checked. ``defaults``: the request's own
    values of TASK_DEFAULTS (resolved: the queue's defaults filled in), which each task may override."""
    for name, why in NOT_WITH_A_WORKFLOW.items():
        if name in body:
            raise InvalidField(f"{name} cannot be given with a workflow: {why}", name)
    workflow: Mapping[str, Any] = body["workflow"]
    workflow_id = workflow["id"]
    deadline = workflow.get("deadlineSeconds", DEFAULT_DEADLINE_SECONDS)
    listed = list(workflow["tasks"])
    on_failure = workflow.get("onFailure")
    if len(listed) + (on_failure is not None) > MAX_WORKFLOW_TASKS:
        raise InvalidField(
            f"the workflow has {len(listed) + (on_failure is not None)} tasks, over the limit of {MAX_WORKFLOW_TASKS} "
            "(its on-failure task included): split it into workflows of at most that many", "workflow.tasks")
    tasks = [_task(raw, f"workflow.tasks[{i}]", queue, defaults) for i, raw in enumerate(listed)]
    if on_failure is not None:
        if "dependsOn" in on_failure:
            raise InvalidField("the on-failure task depends on every task of the workflow: leave out its dependsOn",
                               "workflow.onFailure.dependsOn")
        tasks.append(_task(on_failure, "workflow.onFailure", queue, defaults, on_failure=True))
    _check_keys(tasks)
    _check_sizes(tasks)
    ordered = topological_order(tasks)
    return WorkflowSpec(workflow_id, queue, deadline, tuple(ordered), fingerprint(body))


def _task(raw: Mapping[str, Any], where: str, queue: str, defaults: Mapping[str, Any], *, on_failure: bool = False) -> WorkflowTask:
    if raw.get("queue", queue) != queue:
        raise InvalidField(
            f"{where} is on queue {raw['queue']!r}, but the workflow is on queue {queue!r}: every task of a workflow is "
            "on the workflow's queue (a dependency on another queue is not supported); leave out its queue",
            f"{where}.queue")
    values = {name: raw.get(name, defaults.get(name)) for name in TASK_DEFAULTS}
    group = values["group"]
    if group is not None:
        try:
            fairness.validate_group(group)
        except InvalidTaskInput as exc:
            raise InvalidField(str(exc), f"{where}.group") from None
    edges = tuple(_edge(entry, f"{where}.dependsOn[{i}]") for i, entry in enumerate(raw.get("dependsOn", ())))
    return WorkflowTask(
        key=raw["key"], payload=dict(values["payload"] or {}), priority=keys.validate_priority(values["priority"]),
        ttl_seconds=values["ttlSeconds"], max_attempts=values["maxAttempts"], run_seconds=values["runSeconds"],
        group=group, depends_on=edges, on_failure=on_failure,
    )


def _edge(entry: str | Mapping[str, Any], where: str) -> Edge:
    if isinstance(entry, str):
        return Edge(entry)
    return Edge(entry["key"], Policy(entry.get("policy", Policy.FAIL.value)))


def _check_keys(tasks: Sequence[WorkflowTask]) -> None:
    seen: dict[str, int] = {}
    for index, task in enumerate(tasks):
        if task.key in seen:
            raise InvalidField(f"two tasks of the workflow have the key {task.key!r}: keys name tasks, so each must be "
                               "unique", _where(tasks, index) + ".key")
        seen[task.key] = index
    edges = 0
    for index, task in enumerate(tasks):
        named: set[str] = set()
        for position, edge in enumerate(task.depends_on):
            field = f"{_where(tasks, index)}.dependsOn[{position}]"
            if edge.dependency == task.key:
                raise InvalidField(f"task {task.key!r} depends on itself: that is a cycle", field)
            if edge.dependency not in seen:
                raise InvalidField(
                    f"task {task.key!r} depends on {edge.dependency!r}, which is no task of this workflow (its keys: "
                    f"{_some(seen)}); a dependency must be a task of the same workflow", field)
            if edge.dependency in named:
                raise InvalidField(f"task {task.key!r} names {edge.dependency!r} twice in dependsOn", field)
            if tasks[seen[edge.dependency]].on_failure:
                raise InvalidField(f"task {task.key!r} depends on the on-failure task {edge.dependency!r}, which runs "
                                   "after every other task has ended: nothing may depend on it", field)
            named.add(edge.dependency)
        if len(task.depends_on) > MAX_DEPENDENCIES:
            raise InvalidField(f"task {task.key!r} has {len(task.depends_on)} dependencies, over the limit of "
                               f"{MAX_DEPENDENCIES}", f"{_where(tasks, index)}.dependsOn")
        edges += len(task.depends_on)
    if edges > MAX_WORKFLOW_EDGES:
        raise InvalidField(f"the workflow has {edges} dependencies, over the limit of {MAX_WORKFLOW_EDGES}",
                           "workflow.tasks")


def _check_sizes(tasks: Sequence[WorkflowTask]) -> None:
    total = sum(len(json.dumps(t.payload, separators=(",", ":"), sort_keys=True, default=str)) for t in tasks)
    if total > MAX_WORKFLOW_PAYLOAD_BYTES:
        raise InvalidField(f"the workflow's payloads are {total} bytes together, over the limit of "
                           f"{MAX_WORKFLOW_PAYLOAD_BYTES}: pass references (e.g. S3 keys) instead", "workflow.tasks")


def topological_order(tasks: Sequence[WorkflowTask]) -> list[WorkflowTask]:
    """The tasks with each after its dependencies, otherwise in the order given (Kahn's algorithm, stable); the
    on-failure task (which depends on every other) last. A cycle is refused, naming it."""
    by_key = {t.key: t for t in tasks}
    waiting = {t.key: len(t.depends_on) for t in tasks}
    dependents: dict[str, list[str]] = {t.key: [] for t in tasks}
    for task in tasks:
        for edge in task.depends_on:
            dependents[edge.dependency].append(task.key)
    position = {t.key: i for i, t in enumerate(tasks)}
    ready = [(position[k], k) for k, n in waiting.items() if n == 0 and not by_key[k].on_failure]
    heapq.heapify(ready)
    ordered: list[WorkflowTask] = []
    while ready:
        _, key = heapq.heappop(ready)
        ordered.append(by_key[key])
        for dependent in dependents[key]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                heapq.heappush(ready, (position[dependent], dependent))
    placed = {t.key for t in ordered}
    left = [t for t in tasks if t.key not in placed and not t.on_failure]
    if left:
        cycle = find_cycle(left)
        raise InvalidField(
            f"the workflow's dependencies form a cycle: {' -> '.join(repr(k) for k in cycle)}; a task cannot wait for "
            "itself, even through others", "workflow.tasks")
    return ordered + [t for t in tasks if t.on_failure]


def find_cycle(tasks: Sequence[WorkflowTask]) -> list[str]:
    """One cycle among ``tasks`` (each of which is on a cycle or waits for one), as keys, its first repeated last."""
    among = {t.key: t for t in tasks}
    # Walk from any task to one of its dependencies that is also left, until a key repeats: it then closes a cycle.
    path: list[str] = []
    seen: dict[str, int] = {}
    key = tasks[0].key
    while key not in seen:
        seen[key] = len(path)
        path.append(key)
        key = next(e.dependency for e in among[key].depends_on if e.dependency in among)
    cycle = path[seen[key]:] + [key]
    return list(reversed(cycle))  # dependency order: a -> b means b waits for a


def fingerprint(body: Mapping[str, Any]) -> str:
    """What makes two requests for the same workflow id the same request: their content, canonical JSON."""
    text = json.dumps(body, separators=(",", ":"), sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _where(tasks: Sequence[WorkflowTask], index: int) -> str:
    return "workflow.onFailure" if tasks[index].on_failure else f"workflow.tasks[{index}]"


def _some(keys_: Mapping[str, int]) -> str:
    names = list(keys_)
    return ", ".join(repr(k) for k in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
