"""The items of a match transaction, built without I/O: per pair, the call's result, the agent queued -> busy on it
(``busy_update``), and the deletes of the agent's queue entries (``entry_delete``); what the transaction's outcome
says (``PairsResult``), and what became of an agent whose item refused the match (``lost_agent``).
``taskqueue.matching.agents.AgentStore.match_pairs`` sends them in one TransactWriteItems. May import core and the
matching rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from taskqueue.matching import rules as matching
from taskqueue.matching.agent_items import Agent, AgentStatus, QueueHead
from taskqueue.matching.pairing import LOST_REASONS, Lost, Pair

# An agent item not seen since :cutoff (epoch ms). Agents queued before lastSeen existed count from ``updated``.
NOT_SEEN_SINCE = "(lastSeen <= :cutoff OR (attribute_not_exists(lastSeen) AND updated <= :cutoff))"


@dataclass(frozen=True)
class PairsResult:
    """A match transaction's outcome: every pair matched (each with the result recorded on its call), or none,
    with what failed (``lost``) and DynamoDB's reason per item."""

    matched: tuple[tuple[Pair, Mapping[str, Any]], ...] = ()
    lost: Lost | None = None
    reasons: tuple[str, ...] = ()
    # The lost agents' items as they were when they refused the match (agent id -> Agent; missing: none returned,
    # as for an item inside another transaction), and whether each one's entries all still existed then.
    agents_read: Mapping[str, Agent] = field(default_factory=dict)
    entries_there: Mapping[str, bool] = field(default_factory=dict)
    calls_in_flight: frozenset[str] = frozenset()  # lost calls whose item was inside another transaction
    throttled: bool = False  # DynamoDB throttled it past the retries: nothing written, nothing lost

    @property
    def committed(self) -> bool:
        return self.lost is None and not self.throttled


def busy_update(table: str, pair: Pair, seen_cutoff_ms: int | None, now_ms: int) -> dict[str, Any]:
    """The agent queued -> busy on the pair's call, if it is still queued in the availability read with the entries
    read (their number: together with each entry's delete, which needs it to exist, the agent serves exactly those;
    a profile change meanwhile that added combinations fails it, so no entry outlives the match) and (unless agents
    never time out: ``seen_cutoff_ms`` None) seen since ``seen_cutoff_ms``. A refusal returns the agent's item, which
    tells what became of it (``lost_agent``)."""
    condition = "agentStatus = :queued AND queueSort = :sort AND size(entries) = :entryCount"
    values = {
        ":busy": {"S": AgentStatus.BUSY.value},
        ":queued": {"S": AgentStatus.QUEUED.value},
        ":call": {"S": pair.call.task_id},
        ":now": {"N": str(now_ms)},
        ":one": {"N": "1"},
        ":sort": {"S": pair.head.sort},
        ":entryCount": {"N": str(len(pair.head.entries))},
    }
    cutoff = seen_cutoff_ms
    if cutoff is not None:
        condition += " AND NOT " + NOT_SEEN_SINCE
        values[":cutoff"] = {"N": str(cutoff)}
    return {
        "TableName": table,
        "Key": matching.agent_key(pair.head.agent_id),
        "UpdateExpression": "SET agentStatus = :busy, busyWith = :call, busySince = :now, updated = :now "
        "ADD version :one REMOVE entries, queueSort, availableSince",
        "ConditionExpression": condition,
        "ExpressionAttributeValues": values,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def entry_delete(table: str, key: str, sort: str) -> dict[str, Any]:
    """Delete one of an agent's queue entries, if it is still there (a lost race otherwise)."""
    return {
        "TableName": table,
        "Key": {"pk": {"S": key}, "sk": {"S": sort}},
        "ConditionExpression": "attribute_exists(pk)",
    }


def match_result(pair: Pair, now_ms: int) -> dict[str, Any]:
    """What a matched call records (its ``result``): the agent, the combination, and how long each waited."""
    return {
        "agentId": pair.head.agent_id,
        "agentName": pair.head.name,
        "queueKey": pair.head.queue_key,
        "agentSort": pair.head.sort,
        "matchedAt": now_ms,
        "waitedMs": max(0, now_ms - pair.created_ms),
        "agentIdleMs": max(0, now_ms - pair.head.available_ms),
    }


class LostAgent(StrEnum):
    """What became of an agent whose item refused a match, from its item as it was then (``lost_agent``)."""

    GONE = "gone"  # matched by another, offline, or its entries gone: nothing to do, nothing to match
    UNSEEN = "unseen"  # still queued in that availability but not seen lately: take it offline
    CHANGED = "changed"  # still queued and seen, its entries changed (a profile change): matchable on a fresh read
    UNKNOWN = "unknown"  # inside another transaction (no item returned): may be matchable on a fresh read
    ORPHANED = "orphaned"  # not queued in that availability, yet every entry read there still exists: delete them


def lost_agent(head: QueueHead, agent: Agent | None, entries_there: bool, seen_cutoff_ms: int | None) -> LostAgent:
    """Why the agent of ``head`` refused the match: its item as returned (``None``: none was, the item was inside
    another transaction), whether every entry the match meant to delete still existed, and the seen cutoff."""
    if agent is None:
        return LostAgent.UNKNOWN
    if agent.status is not AgentStatus.QUEUED or agent.queue_sort != head.sort:
        return LostAgent.ORPHANED if entries_there else LostAgent.GONE
    if seen_cutoff_ms is not None and agent.last_seen_ms <= seen_cutoff_ms:
        return LostAgent.UNSEEN
    if len(agent.entries) != len(head.entries):
        return LostAgent.CHANGED
    return LostAgent.GONE  # queued as read, yet refused: nothing a fresh read would change


def orphans_delete(table: str, head: QueueHead) -> list[dict[str, Any]]:
    """The items of one transaction that deletes the entries ``head`` read, if the agent is (still) not queued in
    that availability: a ConditionCheck of the agent item, then the deletes (of entries that may be gone already)."""
    check = {
        "TableName": table,
        "Key": matching.agent_key(head.agent_id),
        "ConditionExpression": "attribute_not_exists(pk) OR agentStatus <> :queued OR queueSort <> :sort",
        "ExpressionAttributeValues": {":queued": {"S": AgentStatus.QUEUED.value}, ":sort": {"S": head.sort}},
    }
    deletes = [{"Delete": {"TableName": table, "Key": {"pk": {"S": key}, "sk": {"S": head.sort}}}} for key in head.entries]
    return [{"ConditionCheck": check}, *deletes]


def entries_still_there(reasons: tuple[str, ...], at: int, count: int) -> bool:
    """Did every entry delete of a pair (``count`` items from ``at``) pass its condition (the entry existed)?"""
    mine = reasons[at : at + count]
    return len(mine) == count and not any(r in LOST_REASONS for r in mine)
