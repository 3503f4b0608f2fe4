"""A call center on the serialized moto server (local/emulator/server.py): agents, calls, N matchers at once, and the checks of the
result (shared by tests/integration/test_matcher_concurrency.py and bench/matcher_bench.py)."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from local.emulator.server import Emulator
from taskqueue.core.clock import SystemClock
from taskqueue.core.model import from_item, new_tasks, parse_create_request
from taskqueue.core.settings import Settings
from taskqueue.core.states import TaskStatus
from taskqueue.matching.agents import AgentStatus, AgentStore, agent_from_item
from taskqueue.matching.matcher import Matcher, MatchReport
from taskqueue.matching.rules import MatchSettings, call_queue_key, parse_entry_sort, parse_profile
from taskqueue.store import TaskStore
from tests.agent_support import create_agent_table
from tests.support import template

LANGUAGES = ["en", "fr", "es", "de"]
GENDERS = ["f", "m"]


@dataclass
class World:
    server: Emulator
    settings: Settings
    match_settings: MatchSettings
    agent_ids: list[str] = field(default_factory=list)
    call_ids: list[str] = field(default_factory=list)

    def stores(self) -> tuple[TaskStore, AgentStore]:
        client = self.server.client()
        clock = SystemClock()
        tasks = TaskStore(client, self.settings, clock)
        return tasks, AgentStore(client, self.match_settings, tasks, clock)


def create_queue_table_without_stream(client: Any, name: str) -> None:
    """The queue table of template.yaml, but without its stream (see create_agent_table: streams are not
    what these runs measure, and moto copies every stream record on every transaction)."""
    props = template()["Resources"]["QueueTable"]["Properties"]
    client.create_table(
        TableName=name,
        AttributeDefinitions=props["AttributeDefinitions"],
        KeySchema=props["KeySchema"],
        GlobalSecondaryIndexes=props["GlobalSecondaryIndexes"],
        BillingMode=props["BillingMode"],
    )


def make_world(
    server: Emulator, *, agents: int, calls: int, seed: int, shed: int = 0, name: str | None = None
) -> World:
    """Tables named after ``name``; ``agents`` agents with mixed profiles (queued one by one, so their order is
    known), ``calls`` calls with mixed preferences, ``shed`` of them with 1 s of patience (expired on return)."""
    name = name or uuid.uuid4().hex[:8]
    client = server.client()
    create_queue_table_without_stream(client, f"queue-{name}")
    create_agent_table(client, f"agents-{name}", stream=False)
    settings = Settings(queue_table_name=f"queue-{name}", page_size=100, retry_base_seconds=0.0)
    match_settings = MatchSettings(agent_table_name=f"agents-{name}", retry_base_ms=5)
    world = World(server, settings, match_settings)
    tasks, agent_store = world.stores()
    rng = random.Random(seed)
    for i in range(agents):
        languages = rng.sample(LANGUAGES, rng.choice([1, 1, 2, 3]))
        genders = [rng.choice(GENDERS)]
        profile = parse_profile({"agentId": f"agent-{i:03d}", "attributes": {"language": languages, "gender": genders}}, match_settings.attributes)
        agent_store.put_available(profile)
        world.agent_ids.append(profile.agent_id)
    now = SystemClock().now_ms()
    bodies = []
    for i in range(calls):
        preferences = {"language": rng.choice([*LANGUAGES, "pt", None]), "gender": rng.choice([*GENDERS, None, None])}
        patience = 1 if i < shed else 3600
        bodies.append({"queue": "calls", "ttlSeconds": patience, "payload": {"caller": f"caller-{i}", "preferences": preferences}})
    created = []
    for offset, body in enumerate(bodies):
        # One millisecond apart so the FIFO order of calls is total.
        created += new_tasks(parse_create_request(body, settings), now + offset, settings)
    tasks.put_tasks(created)
    world.call_ids = [t.task_id for t in created]
    if shed:
        time.sleep(max(0.0, (now + 1000 - SystemClock().now_ms()) / 1000) + 1.05)
    return world


def run_matchers(world: World, matchers: int, budget_seconds: float = 120.0) -> tuple[list[MatchReport], float]:
    """``matchers`` threads, each with its own client, run one Matcher invocation at the same moment. The seconds
    returned run from that moment (every client made) until the last run returned."""
    started: list[float] = []
    barrier = threading.Barrier(matchers, action=lambda: started.append(time.monotonic()))

    def one(index: int) -> MatchReport:
        tasks, agent_store = world.stores()
        matcher = Matcher(tasks, agent_store, owner=f"matcher-{index}", clock=SystemClock(), rng=random.Random(index))
        barrier.wait()
        return matcher.run(budget_seconds)

    with ThreadPoolExecutor(max_workers=matchers) as pool:
        reports = list(pool.map(one, range(matchers)))
    return reports, time.monotonic() - started[0]


def end_calls(world: World, count: int, seed: int) -> int:
    """Agents on a call hang up (call-ended): they are queued again at the back."""
    tasks, agent_store = world.stores()
    busy = [a for a in world.agent_ids if agent_store.get(a).status is AgentStatus.BUSY]
    ended = 0
    for agent_id in random.Random(seed).sample(busy, min(count, len(busy))):
        agent_store.call_ended(agent_id, agent_store.get(agent_id).busy_with)
        ended += 1
    return ended


def scan(client: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        response = client.scan(**kwargs)
        items += response["Items"]
        if "LastEvaluatedKey" not in response:
            return items
        kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def replay(world: World, matchers: int = 1) -> dict[str, int]:
    """Replays every committed transaction in commit order and checks each match against the queue state of
    that moment: the matched agent was queued (never given twice) and was the head of the caller's queue.

    A transaction may hold several matches: they are checked one after another in the order written (the order
    the Matcher planned them). With one matcher every match took the head of the caller's queue at its commit.
    With several, each writes the pairs of its own claim lane, planned from the same snapshot, so their commits
    come in any order: an agent ahead in the caller's queue may still be there at the commit, provided it goes
    to an older call (it was planned for that call: the FIFO walk gave it out first). Checked: no agent was
    passed over for a call younger than the one it finally got, nor left waiting."""
    agent_table = world.match_settings.agent_table_name
    order = {call_id: i for i, call_id in enumerate(world.call_ids)}
    entries: dict[str, set[tuple[str, str]]] = {}  # queue key -> {(sort, agent)}
    matches = Counter[str]()
    matched_to: dict[str, int] = {}  # agent -> FIFO position of the call it got
    passed_over: list[tuple[str, int, str]] = []  # (agent passed over, FIFO position of the call, queue key)
    puts = 0
    tables = {world.settings.queue_table_name, agent_table}
    for body in world.server.commits:  # one read of the server's commit log
        items = body["TransactItems"]
        if not any(next(iter(i.values()))["TableName"] in tables for i in items):
            continue  # another world's transaction on the same server
        results = []  # (call id, result) per match, in the order written
        for item in items:
            update = item.get("Update")
            if update and update["TableName"] == world.settings.queue_table_name:
                for value in update["ExpressionAttributeValues"].values():
                    text = value.get("S", "")
                    if text.startswith("{") and "queueKey" in text:
                        results.append((update["Key"]["taskId"]["S"], json.loads(text)))
        deletes: dict[str, list[tuple[str, str]]] = {}  # agent -> its deleted entries (pk, sk)
        for item in items:
            if "Delete" in item and item["Delete"]["TableName"] == agent_table:
                key = item["Delete"]["Key"]
                pk, sk = key["pk"]["S"], key["sk"]["S"]
                deletes.setdefault(parse_entry_sort(sk)[1], []).append((pk, sk))
        for call_id, result in results:
            agent_id, key = result["agentId"], result["queueKey"]
            mine = deletes.pop(agent_id, [])
            assert mine, f"match of {call_id} with {agent_id} deleted none of its entries"
            entry = (result["agentSort"], agent_id)
            for pk, sk in mine:
                assert (sk, agent_id) in entries.get(pk, set()), f"deleted an entry that was not there: {pk} {sk}"
            assert key in {pk for pk, _ in mine}, f"{agent_id} matched for {key} without an entry there"
            ahead = sorted(e for e in entries[key] if e < entry)
            if matchers == 1:
                assert not ahead, f"matched {entry} but the longest-waiting agent of {key} was {ahead[0]}"
            passed_over += [(other, order.get(call_id, -1), key) for _, other in ahead]
            for pk, sk in mine:
                entries[pk].discard((sk, agent_id))
            matches[agent_id] += 1
            matched_to[agent_id] = order.get(call_id, -1)
        for agent_id, gone in deletes.items():  # not a match: an agent went offline or was requeued
            for pk, sk in gone:
                assert (sk, agent_id) in entries.get(pk, set()), f"deleted an entry that was not there: {pk} {sk}"
                entries[pk].discard((sk, agent_id))
        for item in items:
            if "Put" in item and item["Put"]["TableName"] == agent_table and item["Put"]["Item"]["entity"]["S"] == "entry":
                new = item["Put"]["Item"]
                entry = (new["sk"]["S"], new["agentId"]["S"])
                assert entry not in entries.get(new["pk"]["S"], set()), f"entry put twice: {entry}"
                entries.setdefault(new["pk"]["S"], set()).add(entry)
                puts += 1
    for agent_id, position, key in passed_over:
        assert agent_id in matched_to, f"{agent_id} was passed over for a call of {key} and never matched"
        assert matched_to[agent_id] < position, (
            f"{agent_id} was passed over for call #{position} of {key} and got the younger call #{matched_to[agent_id]}")
    return {"matches": sum(matches.values()), "entry_puts": puts, "agents_matched": len(matches),
            "passed_over": len(passed_over)}


def check_final_state(world: World) -> dict[str, int]:
    """No agent assigned twice, no orphan entry, every call matched / waiting / shed, no waiting call that an
    available agent could serve (the matchers did not stop early)."""
    client = world.server.client()
    tasks, agent_store = world.stores()
    agent_items = scan(client, world.match_settings.agent_table_name)
    agents = {a.agent_id: a for a in (agent_from_item(i) for i in agent_items if i["entity"]["S"] == "agent")}
    entries = [(i["pk"]["S"], i["sk"]["S"], i["agentId"]["S"]) for i in agent_items if i["entity"]["S"] == "entry"]
    queue_items = [i for i in scan(client, world.settings.queue_table_name) if "taskStatus" in i]  # not claim lanes
    calls = {t.task_id: t for t in (from_item(i) for i in queue_items)}
    # Entries: exactly those of queued agents, at their current place.
    for pk, sk, agent_id in entries:
        agent = agents.get(agent_id)
        assert agent is not None and agent.status is AgentStatus.QUEUED, f"orphan entry {pk} {sk} of {agent_id}"
        assert agent.queue_sort == sk and pk in agent.entries, f"stale entry {pk} {sk} of {agent_id}"
    for agent in agents.values():
        if agent.status is AgentStatus.QUEUED:
            assert {(pk, sk) for pk, sk, a in entries if a == agent.agent_id} == {(k, agent.queue_sort) for k in agent.entries}
    # Calls: matched, waiting or shed; never left TAKEN; each busy agent is on exactly one matched call.
    now_s = SystemClock().now_ms() // 1000
    outcome = Counter[str]()
    on_call: dict[str, str] = {}
    for call in calls.values():
        assert call.status in (TaskStatus.SUCCESS, TaskStatus.PENDING, TaskStatus.SHED), f"call {call.task_id} left {call.status}"
        if call.status is TaskStatus.SUCCESS:
            outcome["matched"] += 1
            assert call.result is not None
            agent = agents[call.result["agentId"]]
            if agent.status is AgentStatus.BUSY and agent.busy_with == call.task_id:
                assert call.result["agentId"] not in on_call, "agent on two calls at once"
                on_call[call.result["agentId"]] = call.task_id
        elif call.ttl <= now_s:
            outcome["shed"] += 1
        else:
            outcome["waiting"] += 1
            key = call_queue_key(call.payload, world.match_settings.attributes)
            head = agent_store.head(key)
            assert head is None, f"call {call.task_id} waits for {key} although {head.agent_id} is available"
        assert call.attempts <= 1, f"call {call.task_id} has {call.attempts} attempts (release must refund)"
    busy = [a for a in agents.values() if a.status is AgentStatus.BUSY]
    assert {a.agent_id for a in busy} == set(on_call), "a busy agent without its call, or the reverse"
    assert sum(outcome.values()) == len(world.call_ids)
    return dict(outcome)
