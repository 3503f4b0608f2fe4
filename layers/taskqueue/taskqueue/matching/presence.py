"""Presence: whether the contact center still speaks for an agent (heartbeats, ``lastSeen``), what a heartbeat of
an agent on a call answers, and taking offline an agent not seen for AGENT_TIMEOUT_SECONDS (docs/matcher.md, "Agents
who are not seen" and "Agents who stay busy").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from taskqueue.matching import rules as matching
from taskqueue.matching.agent_items import OFFLINE_TIMED_OUT, Agent, AgentStatus, QueueHead, agent_from_item
from taskqueue.matching.agent_table import AGENT_OP_ATTEMPTS, AgentOutcome, AgentStoreError, AgentTable
from taskqueue.matching.match_items import NOT_SEEN_SINCE, entry_delete
from taskqueue.store.dynamo import ConditionLost


@dataclass(frozen=True)
class Presence:
    """An agent event's outcome and what the contact center needs to act on it: the call a busy agent is on (send
    callEnded for it if the agent is not), since when, and the call an agentAvailable took as ended (the agent was
    busy on it past AGENT_BUSY_TIMEOUT_SECONDS)."""

    outcome: AgentOutcome
    call_id: str | None = None
    busy_since_ms: int | None = None
    ended_call: str | None = None

    def answer(self) -> dict[str, Any]:
        """The fields an AgentEvents answer adds for this outcome."""
        out: dict[str, Any] = {}
        if self.call_id is not None:
            out["callId"] = self.call_id
        if self.busy_since_ms is not None:
            out["busySince"] = self.busy_since_ms
        if self.ended_call is not None:
            out["endedCall"] = self.ended_call
        return out


class AgentPresence(AgentTable):
    def heartbeat(self, agent_id: str) -> AgentOutcome:
        return self.heartbeat_of(agent_id).outcome

    def heartbeat_of(self, agent_id: str) -> Presence:
        """The contact center still speaks for the agent: ``lastSeen`` = now (one conditional UpdateItem on the agent
        item, no entry written). Queued: ``seen``. On a call: ``busy`` with the call (past AGENT_BUSY_TIMEOUT_SECONDS
        ``busy-too-long``): if the agent is not on that call, its callEnded was lost, send it. Offline: ``timed-out``
        if the Matcher took it offline for not being seen, else ``already-offline`` (either way, send agentAvailable
        to queue it again)."""
        for _ in range(AGENT_OP_ATTEMPTS):
            agent = self._seen(agent_id)
            if agent is not None and agent.status is AgentStatus.BUSY:
                too_long = self._settings.busy_too_long(agent.busy_since_ms, self._clock.now_ms())
                return Presence(AgentOutcome.BUSY_TOO_LONG if too_long else AgentOutcome.BUSY, agent.busy_with,
                                agent.busy_since_ms)
            if agent is not None:
                return Presence(AgentOutcome.SEEN)
            current = self.get(agent_id)
            if current.status is AgentStatus.OFFLINE:
                timed_out = current.offline_reason == OFFLINE_TIMED_OUT
                return Presence(AgentOutcome.TIMED_OUT if timed_out else AgentOutcome.ALREADY_OFFLINE)
        raise AgentStoreError(f"agent {agent_id!r} kept changing under heartbeat; retry the event")

    def _seen(self, agent_id: str) -> Agent | None:
        """``lastSeen`` = now on a queued or busy agent; the agent as written, or ``None`` if it is offline, unknown,
        or inside another transaction (the caller reads it again)."""
        try:
            response = self._call(
                "update_item",
                TableName=self._table,
                Key=matching.agent_key(agent_id),
                UpdateExpression="SET lastSeen = :now",
                ConditionExpression="agentStatus IN (:queued, :busy)",
                ExpressionAttributeValues={
                    ":now": {"N": str(self._clock.now_ms())},
                    ":queued": {"S": AgentStatus.QUEUED.value},
                    ":busy": {"S": AgentStatus.BUSY.value},
                },
                ReturnValues="ALL_NEW",
            )
        except ConditionLost:
            return None
        return agent_from_item(response["Attributes"])

    def retire_if_unseen(self, head: QueueHead, agent: Agent) -> bool:
        """After a match lost on ``head``'s agent, whose item read ``agent`` then: if it is still queued in that
        availability but was not seen for AGENT_TIMEOUT_SECONDS, take it offline (its entries deleted,
        ``offlineReason`` timeout) in one transaction conditioned on what was read, so a heartbeat or another event
        meanwhile wins. ``True`` when this call took it offline; ``False`` otherwise (a real race)."""
        cutoff = self._settings.seen_since_ms(self._clock.now_ms())
        if cutoff is None or agent.status is not AgentStatus.QUEUED or agent.queue_sort != head.sort:
            return False
        if agent.last_seen_ms > cutoff:
            return False
        items: list[dict[str, Any]] = [{"Delete": entry_delete(self._table, key, head.sort)} for key in agent.entries]
        items.append({"Update": {
            "TableName": self._table,
            "Key": matching.agent_key(agent.agent_id),
            "UpdateExpression": "SET agentStatus = :off, offlineReason = :why, version = :next, updated = :now "
            "REMOVE entries, queueSort, availableSince",
            "ConditionExpression": "version = :seen AND agentStatus = :queued AND " + NOT_SEEN_SINCE,
            "ExpressionAttributeValues": {
                ":off": {"S": AgentStatus.OFFLINE.value},
                ":queued": {"S": AgentStatus.QUEUED.value},
                ":why": {"S": OFFLINE_TIMED_OUT},
                ":next": {"N": str(agent.version + 1)},
                ":seen": {"N": str(agent.version)},
                ":now": {"N": str(self._clock.now_ms())},
                ":cutoff": {"N": str(cutoff)},
            },
        }})
        return self._transact(items) is None
