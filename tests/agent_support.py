"""Test helpers for the Matcher: the agent table as template.yaml declares it, agents and calls."""

from __future__ import annotations

from typing import Any

import pytest

from taskqueue.core.keys import Order
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.matching.agents import AgentStore
from taskqueue.matching.pairing import Pair
from taskqueue.matching.rules import AgentProfile, IdleAgent, MatchSettings, parse_profile
from taskqueue.store import TaskStore
from tests.support import template

AGENT_TABLE = "test-agent-table"


def create_agent_table(client: Any, name: str = AGENT_TABLE, stream: bool = True) -> None:
    """The agent table as template.yaml declares it. ``stream=False`` for load tests: moto keeps every stream
    record and deep-copies the table with them on each transaction, which makes long runs quadratic."""
    props = template()["Resources"]["AgentTable"]["Properties"]
    client.create_table(
        TableName=name,
        AttributeDefinitions=props["AttributeDefinitions"],
        KeySchema=props["KeySchema"],
        BillingMode=props["BillingMode"],
        **({"StreamSpecification": {"StreamEnabled": True, **props["StreamSpecification"]}} if stream else {}),
    )


def profile(agent_id: str, languages: list[str] | tuple[str, ...] = ("en",), genders: list[str] | tuple[str, ...] = ("f",), name: str | None = None) -> AgentProfile:
    return parse_profile(
        {"agentId": agent_id, "name": name or agent_id.title(), "attributes": {"language": list(languages), "gender": list(genders)}},
        ("gender", "language"),
    )


def create_calls(store: TaskStore, now_ms: int, preferences: dict[str, Any], n: int = 1, ttl: int = 600) -> list[str]:
    request = parse_create_request(
        {"queue": "calls", "count": n, "ttlSeconds": ttl, "payload": {"caller": "c", "preferences": preferences}},
        store.settings,
    )
    tasks = new_tasks(request, now_ms, store.settings)
    store.put_tasks(tasks)
    return [t.task_id for t in tasks]


def all_items(client: Any, table: str = AGENT_TABLE) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        response = client.scan(**kwargs)
        items += response["Items"]
        if "LastEvaluatedKey" not in response:
            return items
        kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def entries_by_agent(client: Any, table: str = AGENT_TABLE) -> dict[str, set[tuple[str, str]]]:
    found: dict[str, set[tuple[str, str]]] = {}
    for item in all_items(client, table):
        if item["entity"]["S"] == "entry":
            found.setdefault(item["agentId"]["S"], set()).add((item["pk"]["S"], item["sk"]["S"]))
    return found


def pair_of(store: TaskStore, agents: AgentStore, call_id: str, queue_key: str) -> Pair:
    """The pair a pass would plan for a waiting call: its index entry and the head of ``queue_key`` read now."""
    candidate = next(c for c in store.candidates("calls", 1000) if c.task_id == call_id)
    head = agents.head(queue_key)
    assert head is not None, f"no agent waits in {queue_key}"
    return Pair(candidate, head, store.get(call_id).created_ms)


def make_agent_store(client: Any, tasks: TaskStore, clock: Any, **overrides: Any) -> AgentStore:
    settings = MatchSettings(agent_table_name=AGENT_TABLE, **overrides)
    return AgentStore(client, settings, tasks, clock)


# ---- fixtures (import them into a test module by name) ------------------------------------------

@pytest.fixture
def agent_table(dynamodb: Any) -> Any:
    create_agent_table(dynamodb)
    return dynamodb


@pytest.fixture
def agents(agent_table: Any, store: TaskStore, clock: Any) -> AgentStore:
    return make_agent_store(agent_table, store, clock)


def greedy(calls: list[str], agents: list[IdleAgent], order: Order) -> list[tuple[int, str]]:
    """The match rule, one call after another in FIFO order: the call gets the head of its queue among the agents
    still idle (longest waiting for FIFO, most recent for LIFO). (call index, agent id) for each call matched."""
    left = sorted(agents, key=lambda a: a.sort, reverse=order is Order.LIFO)
    matched = []
    for index, key in enumerate(calls):
        head = next((a for a in left if key in a.keys), None)
        if head is not None:
            left.remove(head)
            matched.append((index, head.agent_id))
    return matched
