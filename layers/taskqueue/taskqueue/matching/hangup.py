"""A caller hung up: their call is cancelled and never matched (AgentEvents' ``callerHungUp`` event).

The contact center knows first when a caller leaves; until it says so, a waiting call stayed matchable until its
TTL, and the Matcher could hand an agent to nobody. The hang-up is one conditional write on the call
(``TaskStore.hang_up``): PENDING or TAKEN (a matcher holds it this moment) -> CANCELLED. A match is one
transaction that names the call TAKEN by its matcher, so the two cannot both succeed: either the caller hung up
before (the match loses and the agent stays queued) or the match committed first, and the hang-up reports the
call as already matched, with the agent. Repeating the event changes nothing and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from taskqueue.core.describe import shown
from taskqueue.core.errors import InvalidAgentInput
from taskqueue.core.model import valid_task_id
from taskqueue.core.states import TaskStatus
from taskqueue.store import TaskStore


class HangUpOutcome(StrEnum):
    HUNG_UP = "hung-up"  # cancelled now: it will never be matched
    ALREADY_HUNG_UP = "already-hung-up"  # cancelled before (a repeated event, or an operator's cancel)
    ALREADY_MATCHED = "already-matched"  # the match committed first: ``agent_id`` took the call
    EXPIRED = "expired"  # the caller's patience (the call's TTL) ran out before: it was shed
    DEAD_LETTERED = "dead-lettered"  # its preferences can never match: it is in FAILURE


_FINAL = {
    TaskStatus.CANCELLED: HangUpOutcome.ALREADY_HUNG_UP,
    TaskStatus.SUCCESS: HangUpOutcome.ALREADY_MATCHED,
    TaskStatus.SHED: HangUpOutcome.EXPIRED,
    TaskStatus.FAILURE: HangUpOutcome.DEAD_LETTERED,
}


@dataclass(frozen=True)
class HangUp:
    call_id: str
    outcome: HangUpOutcome
    agent_id: str | None = None  # the agent of an already matched call


def hang_up(store: TaskStore, call_id: object, queue: str) -> HangUp:
    """Cancel the waiting call ``call_id`` of ``queue`` (the matching queue), or say what had become of it.
    Raises InvalidAgentInput for a malformed id, InvalidTaskInput for a task of another queue, TaskNotFound for an
    unknown id (never created, or removed by TTL after its retention)."""
    if not isinstance(call_id, str) or not valid_task_id(call_id):
        raise InvalidAgentInput(f"callId must be a call's task id (1-200 printable characters without '#'), got {shown(call_id)}")
    after, cancelled_now = store.hang_up(call_id, queue)
    if cancelled_now:
        return HangUp(call_id, HangUpOutcome.HUNG_UP)
    outcome = _FINAL.get(after.status)
    if outcome is None:  # still PENDING or TAKEN after every attempt: the caller retries the event
        raise InvalidAgentInput(f"call {call_id!r} kept changing while hanging up ({after.status}); send the event again")
    agent = (after.result or {}).get("agentId") if after.status is TaskStatus.SUCCESS else None
    return HangUp(call_id, outcome, agent if isinstance(agent, str) else None)
