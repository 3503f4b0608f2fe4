"""AgentEvents fuzzed: valid agent events (a few agents logging in with changing profiles, going offline, ending
calls, queue depths), near-valid mutations of events/agent_events-*.json, and garbage.

A valid event is done; anything else is refused with a TaskQueueError and writes nothing. After every event the
agent table is consistent: a queued agent has exactly the entries its item lists, any other agent has none."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskqueue.matching.rules import MatchSettings
from taskqueue.services import MatcherServices
from tests.agent_support import AGENT_TABLE
from tests.fuzz.strategies import garbage_events, json_values, mutated, near
from tests.fuzz.support import RequestSpy, fuzz, fuzz_services, invoke, scan
from tests.support import LambdaContextStub, load_function

app = load_function("agent_events")
AGENTS = ["agent-1", "agent-2", "agent-3"]
LANGUAGES = ["en", "fr"]
GENDERS = ["f"]
FILES = ("agent_events-agent-available.json", "agent_events-agent-offline.json", "agent_events-call-ended.json",
         "agent_events-queue-depth.json")

agent_ids = st.sampled_from(AGENTS)
preference = st.sampled_from([None, "", "*", "any", "ANY"])


@st.composite
def available(draw: st.DrawFn) -> dict[str, Any]:
    agent: dict[str, Any] = {"agentId": draw(agent_ids)}
    if draw(st.booleans()):
        agent["name"] = draw(st.text(min_size=1, max_size=20))
    attributes = {}
    for name, values in (("language", LANGUAGES), ("gender", GENDERS)):
        if draw(st.booleans()):
            chosen = draw(st.lists(st.sampled_from(values), max_size=len(values), unique=True))
            attributes[name] = [v.upper() if draw(st.booleans()) else v for v in chosen]
    if attributes or draw(st.booleans()):
        agent["attributes"] = attributes
    return {"action": "agentAvailable", "agent": agent}


@st.composite
def queue_depth(draw: st.DrawFn) -> dict[str, Any]:
    event: dict[str, Any] = {"action": "queueDepth"}
    if draw(st.booleans()):
        event["preferences"] = {name: draw(preference | st.sampled_from(values))
                                for name, values in (("language", LANGUAGES), ("gender", GENDERS)) if draw(st.booleans())}
    return event


valid_events = st.one_of(
    available(),
    available(),
    st.builds(lambda a: {"action": "agentOffline", "agentId": a}, agent_ids),
    st.builds(lambda a, c: {"action": "callEnded", "agentId": a, "callId": c}, agent_ids, st.just("call-1")),
    queue_depth(),
)
events = st.one_of(
    valid_events.map(lambda e: ("valid", e)),
    valid_events.flatmap(lambda e: mutated(e, 2)).map(lambda e: ("unknown", e)),
    near(*FILES).map(lambda e: ("unknown", e)),
    st.dictionaries(st.sampled_from(["action", "agent", "agentId", "callId", "preferences", "queue"]),
                    st.sampled_from(["agentAvailable", "agentOffline", "callEnded", "queueDepth", "agent-1"])
                    | json_values, max_size=3).map(lambda e: ("unknown", e)),
    garbage_events.map(lambda e: ("unknown", e)),
    # A callEnded without its call: refused (sent again after the agent took the next call, it would queue a busy agent).
    st.builds(lambda a: {"action": "callEnded", "agentId": a}, agent_ids).map(lambda e: ("unknown", e)),
)


@pytest.fixture
def world(fuzz_dynamodb, clock, sns, monkeypatch) -> Any:
    msvc = MatcherServices.of(fuzz_services(fuzz_dynamodb, clock, sns), MatchSettings(agent_table_name=AGENT_TABLE),
                              fuzz_dynamodb)
    monkeypatch.setattr(app, "services", lambda: msvc)
    spy = RequestSpy(fuzz_dynamodb)
    # The agent table as the last example left it: nothing else writes it between examples.
    yield spy, {"table": []}
    spy.close()


def check_consistent(items: list[dict[str, Any]]) -> None:
    entries: dict[str, set[str]] = defaultdict(set)
    for item in items:
        if item["entity"]["S"] == "entry":
            entries[item["agentId"]["S"]].add(item["pk"]["S"])
    for item in items:
        if item["entity"]["S"] != "agent":
            continue
        agent = item["agentId"]["S"]
        if item["agentStatus"]["S"] == "queued":
            assert entries.pop(agent, set()) == {e["S"] for e in item["entries"]["L"]}, agent
        else:
            assert agent not in entries, f"{agent} is {item['agentStatus']['S']} but still has entries"
    assert not entries, f"entries of no queued agent: {sorted(entries)}"


@fuzz
@given(case=events)
def test_agent_events_do_what_they_say_or_refuse_clearly_and_write_nothing(world, fuzz_dynamodb, case):
    dynamodb = fuzz_dynamodb
    spy, last = world
    label, event = case
    before = last["table"]
    spy.clear()
    result, error = invoke(lambda: app.lambda_handler(event, LambdaContextStub(function_name="AgentEvents")))
    after = last["table"] = scan(dynamodb, AGENT_TABLE)
    check_consistent(after)
    known = {item["agentId"]["S"] for item in before if item["entity"]["S"] == "agent"}
    if label == "valid" and event["action"] in ("agentOffline", "callEnded") and event["agentId"] not in known:
        label = "unknown agent"  # refused: an agent must log in first
        assert error is not None and "send an agent-available event first" in str(error)
    if error is not None:
        assert label != "valid", f"a valid agent event was refused: {error}"
        assert spy.writes() == [], f"refused ({error}) but wrote {spy.writes()}"
        assert after == before
        return
    strays = {i["agentId"]["S"] for i in after if i["agentId"]["S"] not in AGENTS}
    if len(strays) > 2:  # agents of mutated events: removed, so the table (and each scan) stays small
        doomed = [{"pk": i["pk"], "sk": i["sk"]} for i in after if i["agentId"]["S"] in strays]
        for start in range(0, len(doomed), 25):
            dynamodb.batch_write_item(RequestItems={AGENT_TABLE: [{"DeleteRequest": {"Key": k}} for k in doomed[start:start + 25]]})
        last["table"] = scan(dynamodb, AGENT_TABLE)
    assert isinstance(event, dict)
    if event["action"] == "queueDepth":
        assert set(result) == {"queueKey", "depth"} and result["depth"] >= 0
    else:
        assert result["action"] == event["action"] and result["agentId"] in (
            event.get("agentId"), (event.get("agent") or {}).get("agentId"))
