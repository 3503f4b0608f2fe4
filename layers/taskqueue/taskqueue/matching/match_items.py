"""The items of a match transaction, built without I/O: per pair, the call's result, the agent queued -> busy on it
(``busy_update``), and the deletes of the agent's queue entries (``entry_delete``); and what the transaction's
outcome says (``PairsResult``). ``taskqueue.matching.agents.AgentStore.match_pairs`` sends them in one
TransactWriteItems. May import core and the matching rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from taskqueue.matching import rules as matching
from taskqueue.matching.agent_items import AgentStatus
from taskqueue.matching.pairing import Lost, Pair

# An agent item not seen since :cutoff (epoch ms). Agents queued before lastSeen existed count from ``updated``.
NOT_SEEN_SINCE = "(lastSeen <= :cutoff OR (attribute_not_exists(lastSeen) AND updated <= :cutoff))"


@dataclass(frozen=True)
class PairsResult:
    """A match transaction's outcome: every pair matched (each with the result recorded on its call), or none,
    with what failed (``lost``) and DynamoDB's reason per item."""

    matched: tuple[tuple[Pair, Mapping[str, Any]], ...] = ()
    lost: Lost | None = None
    reasons: tuple[str, ...] = ()

    @property
    def committed(self) -> bool:
        return self.lost is None


def busy_update(table: str, pair: Pair, seen_cutoff_ms: int | None, now_ms: int) -> dict[str, Any]:
    """The agent queued -> busy on the pair's call, if it is still queued in the availability read and (unless
    agents never time out: ``seen_cutoff_ms`` None) seen since ``seen_cutoff_ms``."""
    condition = "agentStatus = :queued AND queueSort = :sort"
    values = {
        ":busy": {"S": AgentStatus.BUSY.value},
        ":queued": {"S": AgentStatus.QUEUED.value},
        ":call": {"S": pair.call.task_id},
        ":now": {"N": str(now_ms)},
        ":one": {"N": "1"},
        ":sort": {"S": pair.head.sort},
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
