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


# PENDING -> PENDING is a change that keeps the task waiting (reprioritize, touch); TAKEN -> TAKEN renews a lease.
ALLOWED_TRANSITIONS: dict[TaskStatus, frozenset[TaskStatus]] = {
    TaskStatus.PENDING: frozenset(
        {TaskStatus.TAKEN, TaskStatus.CANCELLED, TaskStatus.PENDING, TaskStatus.SHED, TaskStatus.SUCCESS}
    ),
    TaskStatus.TAKEN: frozenset(
        {TaskStatus.SUCCESS, TaskStatus.FAILURE, TaskStatus.PENDING, TaskStatus.TAKEN, TaskStatus.CANCELLED}
    ),
    TaskStatus.SUCCESS: frozenset(),
    TaskStatus.FAILURE: frozenset({TaskStatus.PENDING}),
    TaskStatus.CANCELLED: frozenset({TaskStatus.PENDING}),
    TaskStatus.SHED: frozenset(),
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
