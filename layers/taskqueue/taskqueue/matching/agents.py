"""The agent table's one adapter: agent profiles, their queue entries, presence (heartbeats, timeouts) and the
match transaction (the queue table's is ``taskqueue.store``; the items' layout is ``taskqueue.matching.agent_items``).

Every write that changes an agent is one TransactWriteItems whose conditions are on the items it writes:
the agent item (its status and per-agent ``version``) and the agent's own entries. Nothing is shared between
agents (no queue-version or counter item), so operations on different agents never conflict. A lost
condition is a domain outcome, never an exception; other ``ClientError`` codes become ``AgentStoreError``.

The items a match transaction writes (the agent's busy update, its entries' deletes, the call's result) are built
in ``taskqueue.matching.match_items`` (pure); this module sends them. Just over 400 lines: every agent operation
(available, offline, call ended, heartbeat, the match) re-reads and retries on one agent item the same way, and
they share one transaction helper; apart, each would repeat it.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from botocore.exceptions import ClientError

from taskqueue.core.clock import Clock, SystemClock
from taskqueue.core.errors import TaskQueueError
from taskqueue.core.keys import Order
from taskqueue.matching import rules as matching
from taskqueue.matching.agent_items import (
    ENTITY_AGENT,
    ENTITY_ENTRY,
    OFFLINE_TIMED_OUT,
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
from taskqueue.matching.match_items import NOT_SEEN_SINCE, PairsResult, busy_update, entry_delete, match_result
from taskqueue.matching.pairing import Pair, lost_in
from taskqueue.matching.rules import AgentProfile, IdleAgent, MatchSettings
from taskqueue.store import TaskStore, dynamo
from taskqueue.store.dynamo import ConditionLost, count_all, make_client

__all__ = [
    "ENTITY_AGENT", "ENTITY_ENTRY", "Agent", "AgentNotFound", "AgentOutcome", "AgentStatus", "AgentStore",
    "AgentStoreError", "AttributeValue", "PairsResult", "QueueHead", "agent_from_item", "agent_item",
    "entry_item", "head_from_item",
]

# Re-reads after a lost race on one agent operation (another event for the same agent won).
_AGENT_OP_ATTEMPTS = 5


class AgentStoreError(TaskQueueError):
    """DynamoDB refused an agent-table request for a reason other than a lost condition."""


class AgentNotFound(TaskQueueError):
    """No agent has this id (never made available)."""


class AgentOutcome(StrEnum):
    QUEUED = "queued"  # the agent was put in its queues now
    ALREADY_QUEUED = "already-queued"  # idempotent repeat: nothing changed
    REQUEUED = "requeued"  # the profile changed while queued: entries replaced, place kept
    STILL_BUSY = "still-busy"  # 'available' for an agent on a call: use call-ended
    OFFLINE = "offline"  # the agent left every queue now
    ALREADY_OFFLINE = "already-offline"
    STALE = "stale"  # call-ended for a call the agent is not on
    SEEN = "seen"  # a heartbeat of a queued or busy agent: it stays matchable
    TIMED_OUT = "timed-out"  # offline because it was not seen for AGENT_TIMEOUT_SECONDS: send agentAvailable


class AgentStore:
    def __init__(self, client: Any, settings: MatchSettings, tasks: TaskStore, clock: Clock | None = None) -> None:
        self._db = client
        self._settings = settings
        self._table = settings.agent_table_name
        self._tasks = tasks
        self._clock = clock or SystemClock()

    @classmethod
    def from_settings(cls, settings: MatchSettings, tasks: TaskStore, clock: Clock | None = None) -> AgentStore:
        return cls(make_client(), settings, tasks, clock)

    @property
    def settings(self) -> MatchSettings:
        return self._settings

    # ---- reading ----------------------------------------------------------------------------

    def find(self, agent_id: str) -> Agent | None:
        response = self._call("get_item", TableName=self._table, Key=matching.agent_key(agent_id), ConsistentRead=True)
        return agent_from_item(response["Item"]) if "Item" in response else None

    def get(self, agent_id: str) -> Agent:
        agent = self.find(agent_id)
        if agent is None:
            raise AgentNotFound(f"no agent {agent_id!r} in table {self._table}: send an agent-available event first")
        return agent

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
        """Put an agent in the queue of every combination it serves (idempotent), status -> queued.

        A new or offline agent is queued at the current time. An agent already queued with the same profile
        is left alone; with a changed profile its entries are replaced and it keeps its place. An agent on a
        call stays busy (send call-ended).
        """
        matching.check_profile_size(profile)
        for _ in range(_AGENT_OP_ATTEMPTS):
            current = self.find(profile.agent_id)
            if current is not None and current.status is AgentStatus.BUSY:
                return AgentOutcome.STILL_BUSY
            if current is not None and current.status is AgentStatus.QUEUED:
                if current.profile == profile:
                    # Nothing to change but a sign of life: the agent was seen now.
                    if self._seen(profile.agent_id) is not None:
                        return AgentOutcome.ALREADY_QUEUED
                    continue
                if self._enqueue(profile, current, current.available_ms or self._clock.now_ms()):
                    return AgentOutcome.REQUEUED
                continue
            if self._enqueue(profile, current, self._clock.now_ms()):
                return AgentOutcome.QUEUED
        raise AgentStoreError(f"agent {profile.agent_id!r} kept changing under put-available; retry the event")

    def call_ended(self, agent_id: str, call_id: str | None = None) -> AgentOutcome:
        """A busy agent is available again, at the back of its queues (the time the call ended)."""
        for _ in range(_AGENT_OP_ATTEMPTS):
            current = self.get(agent_id)
            if current.status is AgentStatus.QUEUED:
                return AgentOutcome.ALREADY_QUEUED
            if current.status is AgentStatus.OFFLINE:
                return AgentOutcome.ALREADY_OFFLINE
            if call_id is not None and current.busy_with != call_id:
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
            if self._transact(items) is None:
                return AgentOutcome.OFFLINE
        raise AgentStoreError(f"agent {agent_id!r} kept changing under offline; retry the event")

    # ---- presence: heartbeats and timeouts --------------------------------------------------------

    def heartbeat(self, agent_id: str) -> AgentOutcome:
        """The contact center still speaks for the agent: ``lastSeen`` = now (one conditional UpdateItem on the agent
        item, no entry written). Queued or busy: ``seen``. Offline: ``timed-out`` if the Matcher took it offline for
        not being seen, else ``already-offline`` (either way, send agentAvailable to queue it again)."""
        for _ in range(_AGENT_OP_ATTEMPTS):
            if self._seen(agent_id) is not None:
                return AgentOutcome.SEEN
            current = self.get(agent_id)
            if current.status is AgentStatus.OFFLINE:
                return AgentOutcome.TIMED_OUT if current.offline_reason == OFFLINE_TIMED_OUT else AgentOutcome.ALREADY_OFFLINE
        raise AgentStoreError(f"agent {agent_id!r} kept changing under heartbeat; retry the event")

    def _seen(self, agent_id: str) -> int | None:
        """``lastSeen`` = now on a queued or busy agent; the time written, or ``None`` if the agent is offline,
        unknown, or inside another transaction (the caller reads it again)."""
        now = self._clock.now_ms()
        try:
            self._call(
                "update_item",
                TableName=self._table,
                Key=matching.agent_key(agent_id),
                UpdateExpression="SET lastSeen = :now",
                ConditionExpression="agentStatus IN (:queued, :busy)",
                ExpressionAttributeValues={
                    ":now": {"N": str(now)},
                    ":queued": {"S": AgentStatus.QUEUED.value},
                    ":busy": {"S": AgentStatus.BUSY.value},
                },
            )
        except ConditionLost:
            return None
        return now

    def idle_agents(self) -> list[IdleAgent]:
        """Every queued agent with the keys it serves: the entries of the everyone partition (every agent has one
        there), strongly consistent, a page (1 MB, a few thousand agents) per request. Agents not seen lately are
        included: the match transaction refuses them (``retire_if_unseen``)."""
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

    def retire_if_unseen(self, head: QueueHead) -> bool:
        """After a match lost on ``head``'s agent: if it is still queued in that availability but was not seen for
        AGENT_TIMEOUT_SECONDS, take it offline (its entries deleted, ``offlineReason`` timeout) in one transaction
        conditioned on what was read, so a heartbeat or another event meanwhile wins. ``True`` when this call took
        it offline (read the head again: the next agent); ``False`` otherwise (a real race: another matcher or an
        event changed the agent), without a read when agents never time out."""
        cutoff = self._settings.seen_since_ms(self._clock.now_ms())
        if cutoff is None:
            return False
        agent = self.find(head.agent_id)
        if agent is None or agent.status is not AgentStatus.QUEUED or agent.queue_sort != head.sort:
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
        return self._transact(items) is None

    # ---- the match --------------------------------------------------------------------------

    def match_pairs(self, pairs: Sequence[Pair], now_ms: int | None = None) -> PairsResult:
        """ONE TransactWriteItems for ``pairs`` (at most 100 items: cut them with ``pairing.transactions``): per
        pair, the call PENDING -> SUCCESS, the agent queued -> busy on it, every entry of the agent deleted.
        Conditions are on those items only, so matchers taking different calls and agents never abort each
        other, and an agent is never given to two callers. All pairs commit, or none (``lost`` names what failed)."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        items: list[dict[str, Any]] = []
        results: list[tuple[Pair, dict[str, Any]]] = []
        for pair in pairs:
            result = match_result(pair, now_ms)
            results.append((pair, result))
            items.append({"Update": self._tasks.match_update(pair.call, result, now_ms)})
            items.append({"Update": busy_update(self._table, pair, self._settings.seen_since_ms(now_ms), now_ms)})
            items += [{"Delete": entry_delete(self._table, key, pair.head.sort)} for key in pair.head.entries]
        if len(items) > matching.MAX_TRANSACT_ITEMS:
            raise matching.ProfileTooLarge(
                f"{len(pairs)} matches would write {len(items)} items in one TransactWriteItems, over DynamoDB's "
                f"limit of {matching.MAX_TRANSACT_ITEMS}: cut them with pairing.transactions"
            )
        reasons = self._transact(items)
        if reasons is None:
            return PairsResult(matched=tuple(results))
        return PairsResult(lost=lost_in(pairs, reasons), reasons=tuple(reasons))

    # ---- helpers ----------------------------------------------------------------------------

    def _transact(self, items: Sequence[dict[str, Any]]) -> list[str] | None:
        """Run one TransactWriteItems; ``None`` if it committed, else the cancellation reason code per item.

        ConditionalCheckFailed and TransactionConflict (another transaction on the same item was in flight)
        are lost races; any other reason is an error.
        """
        try:
            self._db.transact_write_items(TransactItems=list(items))
            return None
        except ClientError as exc:
            code = dynamo.error_code(exc)
            if code == dynamo.CONFLICT_CODE:  # the whole request met another transaction: a lost race
                return [code]
            if code != "TransactionCanceledException":
                raise dynamo.translate(exc, self._table, "AGENT_TABLE_NAME", AgentStoreError) from exc
            reasons = dynamo.cancellation_reasons(exc)
            lost = {"ConditionalCheckFailed", "TransactionConflict", "None"}
            if not reasons or any(r not in lost for r in reasons):
                raise AgentStoreError(
                    f"a transaction on {self._table!r} was cancelled for reasons other than a lost race: {reasons}"
                ) from exc
            return reasons

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        return dynamo.call(
            self._db, operation, table=self._table, setting="AGENT_TABLE_NAME", error=AgentStoreError,
            clock=self._clock, **kwargs,
        )
