"""The call-center scenario end to end (a short version of `make demo SCENARIO=callcenter`): agents log in,
callers with preferences and patience arrive, the real Matcher pairs them, agents end their calls and queue
again, impatient callers hang up (TTL). The checks read the tables, not only the driver's own bookkeeping."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest

from local.__main__ import load_scenario
from local.scenarios import callcenter
from taskqueue.core.model import from_item
from tests.e2e.conftest import table_items

pytestmark = pytest.mark.e2e


def short_scenario() -> dict[str, Any]:
    scenario = load_scenario("callcenter")
    scenario.update({
        "duration_seconds": 15,
        "arrival_per_second": 1.5,
        "patience_seconds": [3, 8],
        "talk_seconds": [1.5, 4],
        "drain_timeout_seconds": 30,
        "seed": 3,
        "agents": [
            {"count": 2, "language": ["en"], "gender": ["f"]},
            {"count": 1, "language": ["en", "fr"], "gender": ["m"]},
            {"count": 1, "language": ["es"], "gender": ["f"]},
        ],
        "callers": [
            {"weight": 2, "preferences": {}},
            {"weight": 2, "preferences": {"language": "en"}},
            {"weight": 1, "preferences": {"language": "fr", "gender": "m"}},
            {"weight": 1, "preferences": {"language": "es"}},
            {"weight": 1, "preferences": {"language": "pt"}},  # nobody speaks it: these callers hang up
        ],
    })
    return scenario


def agent_items(engine) -> dict[str, dict[str, Any]]:
    table = engine.template.resolver.refs["AgentTable"]
    items = engine.ddb.scan(TableName=table, ConsistentRead=True)["Items"]
    assert len(items) < 1000  # one page
    return {i["agentId"]["S"]: i for i in items if i["entity"]["S"] == "agent"}


def test_callcenter_matches_fitting_agents_one_call_at_a_time_and_sheds_impatient_callers(start_engine):
    scenario = short_scenario()
    engine = start_engine(callcenter.scenario_parameters(scenario), time_scale=scenario["time_scale"])
    center = callcenter.CallCenter(engine, scenario)
    report = center.run()

    calls = report["calls"]
    assert calls["created"] >= 15, calls
    assert calls["matched"] >= 5 and calls["hung_up_shed"] >= 1, calls
    assert report["checks"] == {"agent_on_two_calls": 0, "misfit_matches": 0, "stale_call_ends": 0, "errors": 0}

    # Every call ended matched (SUCCESS with its agent), shed (never claimed) or still waiting.
    items = table_items(engine)
    created = {c["callId"]: c for c in report["calls_each"]}
    outcomes: dict[str, int] = defaultdict(int)
    matched: dict[str, Any] = {}
    for call_id in created:
        outcome = engine.observer.outcome_of(call_id)
        assert outcome in ("SUCCESS", "SHED", "PENDING"), (call_id, outcome)
        outcomes[outcome] += 1
        if outcome == "SHED":  # a hang-up: shed by a matcher that met it past its ttl, or deleted by TTL first
            assert call_id not in items or items[call_id]["taskStatus"]["S"] == "SHED"
            assert call_id not in items or items[call_id]["attempts"]["N"] == "0"  # never claimed
        else:
            task = from_item(items[call_id])
            assert task.status.value == outcome
            if outcome == "SUCCESS":
                matched[call_id] = task
    assert sum(outcomes.values()) == calls["created"]
    # A waiting call is claimed and released by each matcher pass that finds no agent, but never past its TTL.
    for claim in engine.observer.claims:
        track = engine.observer.tasks[claim["task_id"]]
        assert track.created_ms + claim["age_ms"] < track.ttl * 1000, claim
    assert outcomes["SUCCESS"] == calls["matched"] and outcomes["SHED"] == calls["hung_up_shed"]

    # Matched calls went to agents whose attributes fit the caller's preferences (read from the table).
    profiles = {a["agentId"]: a["attributes"] for a in callcenter.agent_list(scenario)}
    for call_id, task in matched.items():
        agent_id = task.result["agentId"]
        assert callcenter.fits(task.payload["preferences"], profiles[agent_id]), (call_id, task.payload, agent_id)
    pt_callers = [c for c in created.values() if c["preferences"].get("language") == "pt"]
    assert pt_callers and all(engine.observer.outcome_of(c["callId"]) == "SHED" for c in pt_callers)

    # No agent on two calls at once: each agent's next match came after the call-ended of its previous call.
    ended_sent = {e["callId"]: e["sent_ms"] for e in report["agent_events"] if e["action"] == "callEnded"}
    by_agent: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for call_id, task in matched.items():
        by_agent[task.result["agentId"]].append((task.result["matchedAt"], call_id))
    assert len(by_agent) >= 2
    for agent_id, spans in by_agent.items():
        spans.sort()
        for (_, previous), (next_at, following) in zip(spans, spans[1:]):
            assert previous in ended_sent, f"{agent_id} took {following} while {previous} never ended"
            assert ended_sent[previous] <= next_at, f"{agent_id} took {following} before {previous} ended"
    # The agent table agrees: a busy agent is on its latest matched call, the others are queued again.
    for agent_id, item in agent_items(engine).items():
        latest = max(by_agent.get(agent_id, [(0, None)]))[1]
        if item["agentStatus"]["S"] == "busy":
            assert item["busyWith"]["S"] == latest and latest not in ended_sent
        else:
            assert item["agentStatus"]["S"] == "queued" and (latest is None or latest in ended_sent)
    assert json.dumps(report, default=str)  # the report is JSON
