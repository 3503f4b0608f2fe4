"""The rules of workflows (pure): what a dependency's end does to the task that waits for it (the policies), where a
dependent's dependencies are counted (the counter tree), the keys of a workflow's items, and how edge lists are
stored (on the task while small, else in pages).

Counting (docs/workflows.md, "Fan-in"). A dependent with N > 1 dependencies is counted on small counter items of its
own, never on its task item (a write is billed by the size of the item it writes: a task carries its payload, a
counter item under 1 KB), in a tree of FAN_IN slots a node. Dependency i takes slot i % FAN_IN of leaf i // FAN_IN;
the write that fills a leaf takes the leaf's slot in the level above, up to the root. Each write is one UpdateItem
that adds the slot to the node's set of done slots and lowers its count, on the condition that the slot is not in the
set yet: done again after a crash or a retry, it changes nothing and its refusal returns the node as it is, so the
step goes on from there. The write that empties the root readies the dependent. A dependent with one dependency has no
counter: that dependency's end readies it with the one conditional write that makes it PENDING.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from taskqueue.core import keys
from taskqueue.core.states import TaskStatus

# Slots of one counter node: its set of done slots stays under 1 KB (a number of 2 digits is 2 bytes), so a count is
# one write unit; two levels count 10,000 dependencies.
FAN_IN = 100
# An edge list (a task's dependencies, or its dependents) is stored on the task item while its JSON is at most this
# many bytes, else in pages of EDGE_PAGE entries (items of their own), so that no task item grows with its degree.
INLINE_EDGE_BYTES = 1024
EDGE_PAGE = 1000
# Task ids of a workflow in its member pages, per page (ids are at most 165 characters: a page stays under 200 KB).
MEMBER_PAGE = 1000
# The StatusIndex partition where a task (or a workflow's start) sits while the effect of its end on its dependents
# (its fan-out) is owed: "<queue>#FANOUT#<shard>". A sweep finishes those left behind by a crash.
FAN_OUT = "FANOUT"
ENDINGS: frozenset[TaskStatus] = frozenset({TaskStatus.SUCCESS, TaskStatus.FAILURE, TaskStatus.CANCELLED, TaskStatus.SHED})


class Policy(StrEnum):
    """What a dependency's failure does to the task that waits for it."""

    FAIL = "fail"  # the default: the dependent ends too (FAILURE, or CANCELLED for a cancelled or shed dependency)
    IGNORE_FAILURE = "ignore-failure"  # the dependent runs anyway; the failure is in its ``dependencies``
    IGNORE_CANCELLED = "ignore-cancelled"  # runs anyway if the dependency was cancelled or shed; fails if it failed
    ON_FAILURE = "on-failure"  # the edge from every task to the workflow's on-failure task (not an input value)


class WorkflowState(StrEnum):
    CREATING = "CREATING"  # its items are being written; nothing of it runs, nothing of it is shown as created
    RUNNING = "RUNNING"  # created (the one write that made it visible); its tasks run as their dependencies end
    CANCELLED = "CANCELLED"  # cancelled whole: its waiting and pending tasks were cancelled


@dataclass(frozen=True)
class EdgeEffect:
    """What one dependency's end does to one dependent: ``counts`` (its slot is counted) or, when the policy says so,
    ``blocks`` the dependent, which then ends in ``blocked_status``; ``failed``: the dependency did not succeed (the
    on-failure task runs only if one did not)."""

    counts: bool
    failed: bool
    blocked_status: TaskStatus | None = None


def edge_effect(outcome: TaskStatus, policy: Policy) -> EdgeEffect:
    if outcome not in ENDINGS:
        raise ValueError(f"{outcome} is not an end: only SUCCESS, FAILURE, CANCELLED or SHED affect dependents")
    if outcome is TaskStatus.SUCCESS:
        return EdgeEffect(counts=True, failed=False)
    if policy in (Policy.IGNORE_FAILURE, Policy.ON_FAILURE):
        return EdgeEffect(counts=True, failed=True)
    if policy is Policy.IGNORE_CANCELLED and outcome is not TaskStatus.FAILURE:
        return EdgeEffect(counts=True, failed=True)
    blocked = TaskStatus.FAILURE if outcome is TaskStatus.FAILURE else TaskStatus.CANCELLED
    return EdgeEffect(counts=False, failed=True, blocked_status=blocked)


_ENDED_AS = {
    TaskStatus.FAILURE: "failed", TaskStatus.CANCELLED: "was cancelled", TaskStatus.SHED: "was shed (its ttl passed unserved)",
}


def blocked_reason(dependency_id: str, outcome: TaskStatus, error: str | None) -> str:
    """The ``lastError`` of a task that ends without running because a dependency ended so (policy ``fail``)."""
    because = f": {error}" if error else ""
    return (f"not run: its dependency {dependency_id!r} {_ENDED_AS[outcome]}{because} (policy fail; redrive "
            f"{dependency_id!r} and this task waits for it again)")[:1000]


DEADLINE_REASON = "not run: its workflow's deadline passed before its dependencies ended"
SKIPPED_RESULT = {"skipped": "no task of the workflow failed: the on-failure task had nothing to do"}
CANCELLED_WITH_WORKFLOW = "cancelled with its workflow"


@dataclass(frozen=True)
class CounterStep:
    """One write of a count: the node (``level.index``), the slot in it, and how many slots the node has."""

    node: str
    slot: int
    size: int


def counter_path(slot: int, total: int, fan_in: int = FAN_IN) -> list[CounterStep]:
    """The counter writes of dependency ``slot`` of a dependent with ``total`` dependencies, leaf first, root last;
    empty when ``total`` is 1 (no counter: the dependency's end readies the dependent)."""
    if not 0 <= slot < total:
        raise ValueError(f"slot {slot} is not one of {total} dependencies")
    steps: list[CounterStep] = []
    level, size, index = 0, total, slot
    while size > 1:
        node = index // fan_in
        steps.append(CounterStep(f"{level}.{node}", index % fan_in, min(fan_in, size - node * fan_in)))
        index, size, level = node, math.ceil(size / fan_in), level + 1
    return steps


@dataclass(frozen=True)
class Dependency:
    """A finished dependency as its dependent's runner sees it: ``status`` (None: its item is gone, deleted by TTL),
    its ``result`` (SUCCESS) or ``error`` (a policy let the dependent run after it failed, was cancelled or shed).
    ``result_omitted``: the results handed to one runner are bounded (taskqueue.core.workflow_rules); this one's was
    left out, read it with ``TaskQueueClient.get`` if you need it."""

    task_id: str
    key: str
    status: TaskStatus | None
    policy: str = "fail"
    result: dict[str, Any] | None = None
    error: str | None = None
    result_omitted: bool = False

    @property
    def succeeded(self) -> bool:
        return self.status is TaskStatus.SUCCESS


# ---- keys: a workflow's items other than its tasks (each holds a '#', which no task id may) -----------------------


def task_id_of(workflow_id: str, key: str) -> str:
    return f"{workflow_id}/{key}"


def key_of(task_id: str) -> str:
    """A workflow task's key (its id after the workflow id); the id itself for any other task."""
    return task_id.split("/", 1)[1] if "/" in task_id else task_id


def record_key(workflow_id: str) -> str:
    return f"wf#{workflow_id}"


def workflow_of_record(record_id: str) -> str:
    return record_id.removeprefix("wf#")


def is_record_key(item_id: str) -> bool:
    return item_id.startswith("wf#") and item_id.count("#") == 1


def member_page_key(workflow_id: str, page: int) -> str:
    return f"wf#members#{page}#{workflow_id}"


def root_page_key(workflow_id: str, page: int) -> str:
    return f"wf#roots#{page}#{workflow_id}"


def in_page_key(task_id: str, page: int) -> str:
    return f"wf#in#{page}#{task_id}"


def out_page_key(task_id: str, page: int) -> str:
    return f"wf#out#{page}#{task_id}"


def counter_key(task_id: str, node: str) -> str:
    return f"wf#count#{node}#{task_id}"


def fan_out_key(queue: str, shard: int) -> str:
    return keys.status_key(queue, FAN_OUT, shard)


# ---- edge lists --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InEdge:
    """A dependency of a task, as the task keeps it."""

    dependency: str  # task id
    policy: Policy


@dataclass(frozen=True)
class OutEdge:
    """A dependent of a task, as the task keeps it: what its end must write, with no read of the dependent."""

    dependent: str  # task id
    slot: int  # this task's place among the dependent's dependencies
    total: int  # how many dependencies the dependent has
    policy: Policy


def encode_edges(edges: Sequence[InEdge] | Sequence[OutEdge]) -> str:
    rows: list[list[Any]] = [
        [e.dependency, e.policy.value] if isinstance(e, InEdge) else [e.dependent, e.slot, e.total, e.policy.value]
        for e in edges
    ]
    return json.dumps(rows, separators=(",", ":"))


def decode_in_edges(text: str) -> list[InEdge]:
    return [InEdge(row[0], Policy(row[1])) for row in json.loads(text)]


def decode_out_edges(text: str) -> list[OutEdge]:
    return [OutEdge(row[0], int(row[1]), int(row[2]), Policy(row[3])) for row in json.loads(text)]


def edge_pages(edges: Sequence[InEdge] | Sequence[OutEdge]) -> tuple[str | None, list[str]]:
    """(the list as stored on the task, or None) and (its pages, when it is too long for the task)."""
    if not edges:
        return None, []
    inline = encode_edges(edges)
    if len(inline.encode("utf-8")) <= INLINE_EDGE_BYTES:
        return inline, []
    return None, [encode_edges(edges[i : i + EDGE_PAGE]) for i in range(0, len(edges), EDGE_PAGE)]


def pages_of(ids: Iterable[str], size: int = MEMBER_PAGE) -> list[list[str]]:
    listed = list(ids)
    return [listed[i : i + size] for i in range(0, len(listed), size)] or [[]]
