"""Task states and the transitions the lifecycle allows.

    PENDING --claim--> TAKEN --complete--> SUCCESS
       ^                 |  \\--fail-----> FAILURE (dead letter)
       +--release/retry--+  (lease expired, transient error; keeps its place)
    PENDING --cancel--> CANCELLED;  FAILURE/CANCELLED --redrive--> PENDING
    PENDING/TAKEN --hang up--> CANCELLED (a call whose caller hung up, even while a matcher holds it: every later
                               write of that matcher names TAKEN and its lease, and loses)
    PENDING past its ttl --shed--> SHED (by a reader that meets it; DynamoDB TTL may delete it first)
    TAKEN --renew--> TAKEN (the lease owner extends its lease: heartbeat)
    PENDING --match--> SUCCESS (a call: the Matcher's match transaction takes it straight from waiting to served,
                               together with its agent, so no matcher ever holds a call; taskqueue.store.matches)

A workflow's task that waits for other tasks (docs/workflows.md) is WAITING: out of every index, so no look, claim,
peek or lease recovery meets it, until its dependencies end:

    WAITING --ready--> PENDING (its last dependency ended: one conditional write gives it its ReadyIndex entry)
    WAITING --blocked--> FAILURE / CANCELLED (a dependency failed / was cancelled or shed, and its policy says fail)
    WAITING --cancel--> CANCELLED;  WAITING --deadline--> SHED (its workflow's deadline passed before it was ready)
    WAITING --skip--> SUCCESS (a workflow's on-failure task when no task of the workflow failed: nothing to do)
    FAILURE / CANCELLED --restore--> WAITING (a task blocked by a dependency that an operator redrove waits again)
"""

from __future__ import annotations

from enum import StrEnum

from taskqueue.core.errors import InvalidTransition


class TaskStatus(StrEnum):
    PENDING = "PENDING"
    TAKEN = "TAKEN"
    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"
    CANCELLED = "CANCELLED"
    SHED = "SHED"  # passed its ttl unserved (load shedding): final, never claimed
    WAITING = "WAITING"  # a workflow's task waiting for its dependencies: in no index, never claimed


# PENDING -> PENDING is a change that keeps the task waiting (reprioritize, touch); TAKEN -> TAKEN renews a lease.
ALLOWED_TRANSITIONS: dict[TaskStatus, frozenset[TaskStatus]] = {
    TaskStatus.PENDING: frozenset(
        {TaskStatus.TAKEN, TaskStatus.CANCELLED, TaskStatus.PENDING, TaskStatus.SHED, TaskStatus.SUCCESS}
    ),
    TaskStatus.TAKEN: frozenset(
        {TaskStatus.SUCCESS, TaskStatus.FAILURE, TaskStatus.PENDING, TaskStatus.TAKEN, TaskStatus.CANCELLED}
    ),
    TaskStatus.SUCCESS: frozenset(),
    TaskStatus.FAILURE: frozenset({TaskStatus.PENDING, TaskStatus.WAITING}),
    TaskStatus.CANCELLED: frozenset({TaskStatus.PENDING, TaskStatus.WAITING}),
    TaskStatus.SHED: frozenset(),
    TaskStatus.WAITING: frozenset(
        {TaskStatus.PENDING, TaskStatus.FAILURE, TaskStatus.CANCELLED, TaskStatus.SHED, TaskStatus.SUCCESS}
    ),
}

FINISHED: frozenset[TaskStatus] = frozenset(
    {TaskStatus.SUCCESS, TaskStatus.FAILURE, TaskStatus.CANCELLED, TaskStatus.SHED}
)


def check_transition(source: TaskStatus | str, target: TaskStatus | str) -> None:
    """Refuse a transition the lifecycle does not allow, before any write is attempted."""
    src, dst = TaskStatus(source), TaskStatus(target)
    if dst not in ALLOWED_TRANSITIONS[src]:
        allowed = ", ".join(sorted(ALLOWED_TRANSITIONS[src])) or "none (it is final)"
        raise InvalidTransition(f"a task cannot go from {src} to {dst}; from {src} it may go to: {allowed}")
