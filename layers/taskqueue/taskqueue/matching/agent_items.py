"""The agent table's items, as values and back: pure, no I/O (``taskqueue.matching.agents`` reads and writes them).

    pk = "AGENT#<agentId>"          sk = "PROFILE"                              the agent (one per agent)
    pk = "Q#gender=f#language=fr"   sk = "<available ms, 15 digits>#<agentId>"  one queue entry per combination

The agent item carries ``lastSeen`` (epoch ms): the last time the contact center spoke for the agent (available,
heartbeat, call ended). An agent not seen for AGENT_TIMEOUT_SECONDS is not matched (docs/matcher.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from taskqueue.matching import rules as matching
from taskqueue.matching.rules import AgentProfile, IdleAgent

ENTITY_AGENT = "agent"
ENTITY_ENTRY = "entry"
# Why an agent went offline, when it was not its own event: the Matcher found it not seen for too long.
OFFLINE_TIMED_OUT = "timeout"

AttributeValue = dict[str, Any]


class AgentStatus(StrEnum):
    OFFLINE = "offline"
    QUEUED = "queued"  # in every queue of its combinations, waiting for a call
    BUSY = "busy"  # on a call


@dataclass(frozen=True)
class Agent:
    agent_id: str
    name: str
    attributes: Mapping[str, tuple[str, ...]]
    status: AgentStatus
    version: int
    updated_ms: int
    available_ms: int | None = None
    queue_sort: str | None = None
    entries: tuple[str, ...] = ()
    busy_with: str | None = None
    busy_since_ms: int | None = None
    last_seen_ms: int = 0  # lastSeen; agents queued before it existed: their last change (``updated``)
    offline_reason: str | None = None  # offlineReason: OFFLINE_TIMED_OUT when the Matcher took it offline

    @property
    def profile(self) -> AgentProfile:
        return AgentProfile(self.agent_id, self.name, self.attributes)


@dataclass(frozen=True)
class QueueHead:
    """The first entry of one agent queue: who would be matched next, and every entry to delete then."""

    queue_key: str
    sort: str
    agent_id: str
    name: str
    available_ms: int
    entries: tuple[str, ...]


def agent_item(profile: AgentProfile, status: AgentStatus, version: int, now_ms: int) -> dict[str, AttributeValue]:
    return {
        **matching.agent_key(profile.agent_id),
        "entity": {"S": ENTITY_AGENT},
        "agentId": {"S": profile.agent_id},
        "agentName": {"S": profile.name},
        "attributes": {"S": json.dumps({k: list(v) for k, v in profile.attributes.items()}, sort_keys=True)},
        "agentStatus": {"S": status.value},
        "version": {"N": str(version)},
        "updated": {"N": str(now_ms)},
    }


def entry_item(
    key: str, sort: str, profile: AgentProfile, available_ms: int, all_keys: Sequence[str], queue: str
) -> dict[str, AttributeValue]:
    """One queue entry; it carries every key of the agent's entries, so a match needs no extra read."""
    return {
        "pk": {"S": key},
        "sk": {"S": sort},
        "entity": {"S": ENTITY_ENTRY},
        "queue": {"S": queue},
        "agentId": {"S": profile.agent_id},
        "agentName": {"S": profile.name},
        "availableSince": {"N": str(available_ms)},
        "entries": string_list(all_keys),
    }


def agent_from_item(item: Mapping[str, Mapping[str, Any]]) -> Agent:
    def opt_n(name: str) -> int | None:
        return int(item[name]["N"]) if name in item else None

    attributes = json.loads(item["attributes"]["S"]) if "attributes" in item else {}
    return Agent(
        agent_id=item["agentId"]["S"],
        name=item.get("agentName", {}).get("S", item["agentId"]["S"]),
        attributes={k: tuple(v) for k, v in sorted(attributes.items())},
        status=AgentStatus(item["agentStatus"]["S"]),
        version=int(item.get("version", {}).get("N", "0")),
        updated_ms=int(item.get("updated", {}).get("N", "0")),
        available_ms=opt_n("availableSince"),
        queue_sort=item["queueSort"]["S"] if "queueSort" in item else None,
        entries=tuple(v["S"] for v in item.get("entries", {}).get("L", [])),
        busy_with=item["busyWith"]["S"] if "busyWith" in item else None,
        busy_since_ms=opt_n("busySince"),
        last_seen_ms=int(item.get("lastSeen", item.get("updated", {"N": "0"}))["N"]),
        offline_reason=item["offlineReason"]["S"] if "offlineReason" in item else None,
    )


def head_from_item(item: Mapping[str, Mapping[str, Any]]) -> QueueHead:
    return QueueHead(
        queue_key=item["pk"]["S"],
        sort=item["sk"]["S"],
        agent_id=item["agentId"]["S"],
        name=item.get("agentName", {}).get("S", item["agentId"]["S"]),
        available_ms=int(item["availableSince"]["N"]),
        entries=tuple(v["S"] for v in item["entries"]["L"]),
    )


def idle_from_item(item: Mapping[str, Mapping[str, Any]]) -> IdleAgent:
    """A queue entry (sk, agentId, entries, agentName, availableSince) as the idle agent it stands for."""
    agent_id = item["agentId"]["S"]
    return IdleAgent(sort=item["sk"]["S"], agent_id=agent_id, keys=frozenset(v["S"] for v in item["entries"]["L"]),
                     name=item.get("agentName", {}).get("S", agent_id),
                     available_ms=int(item.get("availableSince", {}).get("N", "0")))


def head_of(agent: IdleAgent, queue_key: str) -> QueueHead:
    """The idle agent as the head of ``queue_key`` (one of the keys it serves): what a match of a call of that
    combination with it writes and records."""
    return QueueHead(queue_key=queue_key, sort=agent.sort, agent_id=agent.agent_id, name=agent.name or agent.agent_id,
                     available_ms=agent.available_ms, entries=tuple(sorted(agent.keys)))


def string_list(values: Sequence[str]) -> AttributeValue:
    return {"L": [{"S": v} for v in values]}
