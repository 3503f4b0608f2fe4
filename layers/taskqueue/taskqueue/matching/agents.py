"""The agent table's one adapter: agent profiles, their queue entries, presence (heartbeats, timeouts) and the
match transaction (the queue table's is ``taskqueue.store``; the items' layout is ``taskqueue.matching.agent_items``).

Every write that changes an agent is one TransactWriteItems whose conditions are on the items it writes:
the agent item (its status and per-agent ``version``) and the agent's own entries. Nothing is shared between
agents (no queue-version or counter item), so operations on different agents never conflict. A lost
condition is a domain outcome, never an exception; other ``ClientError`` codes become ``AgentStoreError``.

``AgentStore`` is the agent events and the readings (this module), on ``match_writes.AgentMatches`` (the match
transaction), ``presence.AgentPresence`` (heartbeats, timeouts) and ``agent_table.AgentTable`` (the client, one
request, one transaction: ``taskqueue.matching.transact``).
"""

from __future__ import annotations

from typing import Any

from taskqueue.core.clock import Clock
from taskqueue.core.keys import Order
from taskqueue.matching import rules as matching
from taskqueue.matching.agent_items import (
    ENTITY_AGENT,
    ENTITY_ENTRY,
    Agent,
    AgentStatus,
    AttributeValue,
    QueueHead,
    agent_from_item,
    agent_item,
    entry_item,
    head_from_item,
    idle_from_item,
    string_list,
)
from taskqueue.matching.agent_table import AGENT_OP_ATTEMPTS, AgentNotFound, AgentOutcome, AgentStoreError
from taskqueue.matching.match_items import PairsResult, entry_delete
from taskqueue.matching.match_writes import AgentMatches
from taskqueue.matching.presence import Presence
from taskqueue.matching.rules import AgentProfile, IdleAgent, MatchSettings
from taskqueue.store import TaskStore
from taskqueue.store.dynamo import count_all, make_client

__all__ = [
    "ENTITY_AGENT", "ENTITY_ENTRY", "Agent", "AgentNotFound", "AgentOutcome", "AgentStatus", "AgentStore",
    "AgentStoreError", "AttributeValue", "PairsResult", "Presence", "QueueHead", "agent_from_item", "agent_item",
    "entry_item", "head_from_item",
]

_AGENT_OP_ATTEMPTS = AGENT_OP_ATTEMPTS


class AgentStore(AgentMatches):
    @classmethod
    def from_settings(cls, settings: MatchSettings, tasks: TaskStore, clock: Clock | None = None) -> AgentStore:
        return cls(make_client(), settings, tasks, clock)

    # ---- reading ----------------------------------------------------------------------------

    def head(self, queue_key: str, order: Order | None = None) -> QueueHead | None:
        """The agent a caller of ``queue_key`` gets next: strongly consistent, one item read."""
        order = order or self._settings.agent_order
        response = self._call(
            "query",
            TableName=self._table,
            KeyConditionExpression="pk = :k",
            ExpressionAttributeValues={":k": {"S": queue_key}},
            ConsistentRead=True,
            ScanIndexForward=order is Order.FIFO,
            Limit=1,
        )
        items = response.get("Items", [])
        return head_from_item(items[0]) if items else None

    def depth(self, queue_key: str) -> int:
        """Agents waiting in one combination's queue: a COUNT query of its partition (no scan, no counter)."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :k",
            "ExpressionAttributeValues": {":k": {"S": queue_key}},
            "ConsistentRead": True,
            "Select": "COUNT",
        }
        return count_all(self._call, "query", request)

    def queued_agents(self) -> list[Agent]:
        """Every agent waiting for a call, for operators (``taskq agents``): a filtered Scan of the profile items
        (one per agent, not per queue entry); each agent's ``entries`` name the queues it waits in."""
        return self.agents(AgentStatus.QUEUED)

    def agents(self, status: AgentStatus | None = None) -> list[Agent]:
        """Every agent (``status`` None) or those in ``status``, for operators (the board): a filtered Scan of the
        agent table's profile items, one per agent."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "FilterExpression": "sk = :profile",
            "ExpressionAttributeValues": {":profile": {"S": matching.PROFILE_SORT}},
        }
        if status is not None:
            request["FilterExpression"] += " AND agentStatus = :status"
            request["ExpressionAttributeValues"][":status"] = {"S": status.value}
        found: list[Agent] = []
        while True:
            response = self._call("scan", **request)
            found += [agent_from_item(item) for item in response.get("Items", [])]
            if "LastEvaluatedKey" not in response:
                return found
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    # ---- agent events -----------------------------------------------------------------------

    def put_available(self, profile: AgentProfile) -> AgentOutcome:
        return self.make_available(profile).outcome

    def make_available(self, profile: AgentProfile) -> Presence:
        """Put an agent in the queue of every combination it serves (idempotent), status -> queued.

        A new or offline agent is queued at the current time. An agent already queued with the same profile
        is left alone; with a changed profile its entries are replaced and it keeps its place. An agent on a
        call stays busy (``still-busy``, naming the call: send callEnded for it), unless it has been busy past
        AGENT_BUSY_TIMEOUT_SECONDS: its callEnded was lost, the call is taken as ended and the agent queued
        (``queued``, naming the call ended).
        """
        matching.check_profile_size(profile)
        for _ in range(_AGENT_OP_ATTEMPTS):
            current = self.find(profile.agent_id)
            now = self._clock.now_ms()
            if current is not None and current.status is AgentStatus.BUSY:
                if not self._settings.busy_too_long(current.busy_since_ms, now):
                    return Presence(AgentOutcome.STILL_BUSY, current.busy_with, current.busy_since_ms)
                if self._enqueue(profile, current, now):
                    return Presence(AgentOutcome.QUEUED, ended_call=current.busy_with)
                continue
            if current is not None and current.status is AgentStatus.QUEUED:
                if current.profile == profile:
                    # Nothing to change but a sign of life: the agent was seen now.
                    if self._seen(profile.agent_id) is not None:
                        return Presence(AgentOutcome.ALREADY_QUEUED)
                    continue
                if self._enqueue(profile, current, current.available_ms or now):
                    return Presence(AgentOutcome.REQUEUED)
                continue
            if self._enqueue(profile, current, now):
                return Presence(AgentOutcome.QUEUED)
        raise AgentStoreError(f"agent {profile.agent_id!r} kept changing under put-available; retry the event")

    def call_ended(self, agent_id: str, call_id: str) -> AgentOutcome:
        """The agent's call ``call_id`` ended: the agent is available again, at the back of its queues (the time the
        call ended). Only the call the agent is on ends it: a callEnded sent again after the agent took the next call
        names the call before and changes nothing (``stale``)."""
        for _ in range(_AGENT_OP_ATTEMPTS):
            current = self.get(agent_id)
            if current.status is AgentStatus.QUEUED:
                return AgentOutcome.ALREADY_QUEUED
            if current.status is AgentStatus.OFFLINE:
                return AgentOutcome.ALREADY_OFFLINE
            if current.busy_with != call_id:
                return AgentOutcome.STALE
            if self._enqueue(current.profile, current, self._clock.now_ms()):
                return AgentOutcome.QUEUED
        raise AgentStoreError(f"agent {agent_id!r} kept changing under call-ended; retry the event")

    def offline(self, agent_id: str) -> AgentOutcome:
        """The agent leaves every queue (or, if on a call, will not be queued when it ends)."""
        for _ in range(_AGENT_OP_ATTEMPTS):
            current = self.get(agent_id)
            if current.status is AgentStatus.OFFLINE:
                return AgentOutcome.ALREADY_OFFLINE
            now = self._clock.now_ms()
            items = [
                {"Delete": entry_delete(self._table, key, current.queue_sort or "")} for key in current.entries
            ]
            items.append(
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": matching.agent_key(agent_id),
                        "UpdateExpression": "SET agentStatus = :off, version = :next, updated = :now "
                        "REMOVE entries, queueSort, availableSince, busyWith, busySince",
                        "ConditionExpression": "version = :seen",
                        "ExpressionAttributeValues": {
                            ":off": {"S": AgentStatus.OFFLINE.value},
                            ":next": {"N": str(current.version + 1)},
                            ":seen": {"N": str(current.version)},
                            ":now": {"N": str(now)},
                        },
                    }
                }
            )
            if self._commit(items):
                return AgentOutcome.OFFLINE
        raise AgentStoreError(f"agent {agent_id!r} kept changing under offline; retry the event")

    # ---- what the Matcher reads ----------------------------------------------------------------

    def idle_agents(self) -> list[IdleAgent]:
        """Every queued agent with the keys it serves: the entries of the everyone partition (every agent has one
        there), strongly consistent, a page (1 MB, a few thousand agents) per request. Agents not seen lately are
        included: the match transaction refuses them (``settle_lost_agent``)."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :k",
            "ExpressionAttributeValues": {":k": {"S": matching.everyone_key(self._settings.attributes)}},
            "ProjectionExpression": "sk, agentId, entries, agentName, availableSince",
            "ConsistentRead": True,
        }
        found: list[IdleAgent] = []
        while True:
            response = self._call("query", **request)
            found += [idle_from_item(item) for item in response.get("Items", [])]
            if "LastEvaluatedKey" not in response:
                return found
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def _enqueue(self, profile: AgentProfile, current: Agent | None, available_ms: int) -> bool:
        """One transaction: (replace the old entries and) put one entry per combination, agent -> queued."""
        keys = matching.entry_keys(profile)
        sort = matching.entry_sort(available_ms, profile.agent_id)
        queued = current is not None and current.status is AgentStatus.QUEUED
        old_sort = current.queue_sort if queued and current is not None else None
        old = set(current.entries) if queued and current is not None else set()
        kept = old & set(keys) if old_sort == sort else set()
        removed = sorted(old - kept)
        total = len(removed) + len(keys) + 1
        if total > matching.MAX_TRANSACT_ITEMS:
            raise matching.ProfileTooLarge(
                f"changing agent {profile.agent_id!r}'s profile while queued would write {total} items in one "
                f"TransactWriteItems, over DynamoDB's limit of {matching.MAX_TRANSACT_ITEMS}: take the agent "
                "offline first, then make it available with the new profile"
            )
        now = self._clock.now_ms()
        items: list[dict[str, Any]] = [{"Delete": entry_delete(self._table, k, old_sort or "")} for k in removed]
        for key in keys:
            # An entry kept across a profile change is rewritten: every entry lists all of the agent's keys.
            items.append(
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": entry_item(key, sort, profile, available_ms, keys, self._settings.queue),
                        "ConditionExpression": "attribute_exists(pk)" if key in kept else "attribute_not_exists(pk)",
                    }
                }
            )
        agent = agent_item(profile, AgentStatus.QUEUED, (current.version + 1) if current else 1, now)
        agent |= {"availableSince": {"N": str(available_ms)}, "queueSort": {"S": sort}, "entries": string_list(keys),
                  "lastSeen": {"N": str(now)}}
        if current is None:
            condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        else:
            condition = {
                "ConditionExpression": "version = :seen",
                "ExpressionAttributeValues": {":seen": {"N": str(current.version)}},
            }
        items.append({"Put": {"TableName": self._table, "Item": agent, **condition}})
        return self._commit(items)
