"""The AgentEvents handler against moto: agentAvailable / agentOffline / callEnded / queueDepth, the event files,
refused events, the AgentEvents metric. These events used to go to the Matcher, whose reserved concurrency made
Lambda refuse them (HTTP 429) while a matching run was in progress: they have their own function now."""

from typing import Any

import pytest

from taskqueue.core.errors import InvalidAgentInput
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.matching.rules import MatchSettings, ProfileTooLarge
from taskqueue.services import MatcherServices
from tests.agent_support import AGENT_TABLE, agent_table  # noqa: F401 (fixture)
from tests.support import LambdaContextStub, emitted, load_event, load_function, metric_totals

app = load_function("agent_events")

OVERSIZED = {"agentId": "a", "attributes": {"language": [f"l{i}" for i in range(30)], "gender": ["f", "m", "x"]}}


@pytest.fixture
def msvc(services, agent_table) -> MatcherServices:
    return MatcherServices.of(services, MatchSettings(agent_table_name=AGENT_TABLE), agent_table)


def invoke(event: dict[str, Any], svc: Any, request_id: str = "req-1") -> dict[str, Any]:
    original = app.services
    app.services = lambda: svc
    try:
        return app.lambda_handler(event, LambdaContextStub(request_id=request_id))
    finally:
        app.services = original


def test_event_files_drive_the_agent_lifecycle(msvc):
    assert invoke(load_event("agent_events-agent-available.json"), msvc) == {
        "action": "agentAvailable", "agentId": "agent-0042", "outcome": "queued"}
    assert invoke(load_event("agent_events-agent-available.json"), msvc)["outcome"] == "already-queued"
    assert invoke(load_event("agent_events-queue-depth.json"), msvc) == {"queueKey": "Q#gender=f#language=fr", "depth": 1}
    assert invoke(load_event("agent_events-call-ended.json"), msvc)["outcome"] == "already-queued"
    assert invoke(load_event("agent_events-agent-heartbeat.json"), msvc)["outcome"] == "seen"
    assert invoke(load_event("agent_events-agent-offline.json"), msvc)["outcome"] == "offline"
    assert invoke(load_event("agent_events-agent-heartbeat.json"), msvc)["outcome"] == "already-offline"
    assert invoke(load_event("agent_events-queue-depth.json"), msvc)["depth"] == 0


def test_the_caller_hung_up_event_file_cancels_its_waiting_call(msvc, store, clock):
    event = load_event("agent_events-caller-hung-up.json")
    request = parse_create_request({"queue": "calls", "taskIds": [event["callId"]], "payload": {"preferences": {}}},
                                   store.settings)
    store.put_tasks(new_tasks(request, clock.now_ms(), store.settings), idempotent=True)
    assert invoke(event, msvc) == {"action": "callerHungUp", "callId": event["callId"], "outcome": "hung-up"}
    assert invoke(event, msvc)["outcome"] == "already-hung-up"


def test_each_agent_event_counts_one_agent_events_metric(msvc, capsys):
    capsys.readouterr()
    invoke(load_event("agent_events-agent-available.json"), msvc)
    invoke(load_event("agent_events-call-ended.json"), msvc)
    invoke(load_event("agent_events-agent-offline.json"), msvc)
    invoke(load_event("agent_events-queue-depth.json"), msvc)  # a read: not counted
    out = capsys.readouterr().out
    assert metric_totals(out) == {"AgentEvents": 3}
    for metric in emitted(out):
        assert metric.dimension_sets == (("queue", "service"),) and metric.dims["queue"] == "calls"


@pytest.mark.parametrize(
    "event, error",
    [
        ({"action": "dance"}, "unknown action"),
        ({"action": "agentOffline"}, "agentId"),
        ({"action": "callEnded", "agentId": "a", "callId": 7}, "callId"),
        ({"action": "agentAvailable", "agent": OVERSIZED}, "limit of 100"),
    ],
)
def test_bad_agent_events_are_refused_with_the_reason(msvc, event, error):
    with pytest.raises(InvalidAgentInput, match=error):
        invoke(event, msvc)


def test_oversized_profile_error_names_the_limit_and_count(msvc):
    event = {"action": "agentAvailable", "agent": OVERSIZED}
    with pytest.raises(ProfileTooLarge, match=r"124 attribute combinations.*126 items.*limit of 100"):
        invoke(event, msvc)


@pytest.mark.parametrize("event", [{"queue": "calls"}, load_event("matcher-sns-wake.json")])
def test_a_wake_up_is_not_an_agent_event(msvc, event):
    with pytest.raises(InvalidAgentInput, match="Matcher"):
        invoke(event, msvc)
