"""The agent table's adapter, its common part: the client, one request, one transaction, reading an agent, and the
errors and outcomes every agent operation shares. ``taskqueue.matching.agents.AgentStore`` (agent events, readings),
``presence.AgentPresence`` (heartbeats, timeouts) and ``match_writes.AgentMatches`` (the match transaction) build on
it.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from taskqueue.core.clock import Clock, SystemClock
from taskqueue.core.errors import TaskQueueError
from taskqueue.matching import rules as matching
from taskqueue.matching.agent_items import Agent, agent_from_item
from taskqueue.matching.rules import MatchSettings
from taskqueue.matching.transact import Cancelled, transact
from taskqueue.store import TaskStore, dynamo

# Re-reads after a lost race on one agent operation (another event for the same agent won).
AGENT_OP_ATTEMPTS = 5


class AgentStoreError(TaskQueueError):
    """DynamoDB refused an agent-table request for a reason other than a lost condition."""


class AgentNotFound(TaskQueueError):
    """No agent has this id (never made available)."""


class AgentOutcome(StrEnum):
    QUEUED = "queued"  # the agent was put in its queues now
    ALREADY_QUEUED = "already-queued"  # idempotent repeat: nothing changed
    REQUEUED = "requeued"  # the profile changed while queued: entries replaced, place kept
    STILL_BUSY = "still-busy"  # 'available' for an agent on a call: use call-ended (the answer names the call)
    OFFLINE = "offline"  # the agent left every queue now
    ALREADY_OFFLINE = "already-offline"
    STALE = "stale"  # call-ended for a call the agent is not on
    SEEN = "seen"  # a heartbeat of a queued agent: it stays matchable
    BUSY = "busy"  # a heartbeat of an agent on a call (the answer names it): if it is not, send callEnded for it
    BUSY_TOO_LONG = "busy-too-long"  # as busy, past AGENT_BUSY_TIMEOUT_SECONDS: its callEnded was likely lost
    TIMED_OUT = "timed-out"  # offline because it was not seen for AGENT_TIMEOUT_SECONDS: send agentAvailable


class AgentTable:
    def __init__(self, client: Any, settings: MatchSettings, tasks: TaskStore, clock: Clock | None = None) -> None:
        self._db = client
        self._settings = settings
        self._table = settings.agent_table_name
        self._tasks = tasks
        self._clock = clock or SystemClock()

    @property
    def settings(self) -> MatchSettings:
        return self._settings

    def find(self, agent_id: str) -> Agent | None:
        response = self._call("get_item", TableName=self._table, Key=matching.agent_key(agent_id), ConsistentRead=True)
        return agent_from_item(response["Item"]) if "Item" in response else None

    def get(self, agent_id: str) -> Agent:
        agent = self.find(agent_id)
        if agent is None:
            raise AgentNotFound(f"no agent {agent_id!r} in table {self._table}: send an agent-available event first")
        return agent

    def _transact(self, items: Sequence[dict[str, Any]]) -> Cancelled | None:
        """One TransactWriteItems (``taskqueue.matching.transact``): ``None`` if it committed, else what cancelled it."""
        return transact(self._db, items, table=self._table, error=AgentStoreError, clock=self._clock)

    def _commit(self, items: Sequence[dict[str, Any]]) -> bool:
        """An agent operation's transaction: ``True`` if it committed, ``False`` if it lost a race (read again).
        Throttled past the retries: AgentStoreError (retryable), for the contact center to send the event again."""
        cancelled = self._transact(items)
        if cancelled is not None and cancelled.throttled:
            error = AgentStoreError(f"DynamoDB is throttling {self._table!r} even after retries; send the event again")
            error.retryable = True  # type: ignore[attr-defined]
            raise error
        return cancelled is None

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        return dynamo.call(
            self._db, operation, table=self._table, setting="AGENT_TABLE_NAME", error=AgentStoreError,
            clock=self._clock, **kwargs,
        )
