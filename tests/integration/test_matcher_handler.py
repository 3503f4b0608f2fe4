"""The Matcher handler against moto: SNS wake-ups, FIFO matching, no busy loop, tail calls, metrics, agent
events refused (they go to AgentEvents: tests/integration/test_agent_events_handler.py); and Trigger waking
queue "calls" on an agent-table stream record."""

import json
from typing import Any

import pytest

from taskqueue.core.errors import InvalidEvent, InvalidTaskInput
from taskqueue.core.keys import Order
from taskqueue.core.states import TaskStatus
from taskqueue.matching.rules import MatchSettings
from taskqueue.services import MatcherServices
from tests.agent_support import AGENT_TABLE, agent_table, all_items, create_calls  # noqa: F401 (fixture)
from tests.support import LambdaContextStub, load_event, load_function, metric_totals

app = load_function("matcher")
agent_events = load_function("agent_events")


@pytest.fixture
def msvc(services, agent_table) -> MatcherServices:
    return MatcherServices.of(services, MatchSettings(agent_table_name=AGENT_TABLE), agent_table)


def invoke(module: Any, event: dict[str, Any], svc: Any, request_id: str = "req-1") -> dict[str, Any]:
    original = module.services
    module.services = lambda: svc
    try:
        return module.lambda_handler(event, LambdaContextStub(request_id=request_id))
    finally:
        module.services = original


def available(svc, agent_id: str, languages=("en",), genders=("f",)) -> dict[str, Any]:
    event = {"action": "agentAvailable", "agent": {"agentId": agent_id, "attributes": {"language": list(languages), "gender": list(genders)}}}
    return invoke(agent_events, event, svc)


def wake(svc, request_id: str = "req-1") -> dict[str, Any]:
    return invoke(app, load_event("matcher-sns-wake.json"), svc, request_id)


def test_sns_wake_matches_calls_oldest_first_with_the_longest_waiting_agent(msvc, store, clock, topics, capsys):
    available(msvc, "ana", ["fr"])
    clock.advance(1)
    available(msvc, "bea", ["fr", "en"])
    clock.advance(1)
    first = create_calls(store, clock.now_ms(), {"language": "fr"})[0]
    clock.advance(1)
    second = create_calls(store, clock.now_ms(), {"language": "fr", "gender": "f"})[0]
    clock.advance(1)
    third = create_calls(store, clock.now_ms(), {"language": "fr"})[0]
    capsys.readouterr()
    report = wake(msvc)
    assert report["matched"] == 2 and report["stopped_by"] == "no-progress" and report["work_remains"] is False
    assert store.get(first).result["agentId"] == "ana"
    assert store.get(second).result["agentId"] == "bea"
    waiting = store.get(third)
    assert waiting.status is TaskStatus.PENDING and waiting.attempts == 0  # released with the attempt refunded
    metrics = metric_totals(capsys.readouterr().out)
    assert metrics["CallsMatched"] == 2 and metrics["NoAgent"] >= 1 and metrics["MatchConflicts"] == 0
    assert metrics["WaitTimeAtMatch"] == 2000 + 1000
    assert topics.tail_calls() == [] and topics.wakeups() == []  # no agent left for the waiting call: no busy loop, no tail call


def test_waiting_call_keeps_its_place_and_is_served_first_when_an_agent_arrives(msvc, store, clock):
    older = create_calls(store, clock.now_ms(), {"language": "de"})[0]
    clock.advance(1)
    younger = create_calls(store, clock.now_ms(), {"language": "de"})[0]
    assert wake(msvc)["matched"] == 0
    clock.advance(30)
    available(msvc, "dan", ["de"], ["m"])
    assert wake(msvc)["matched"] == 1
    assert store.get(older).status is TaskStatus.SUCCESS
    assert store.get(younger).status is TaskStatus.PENDING


def test_a_call_without_a_match_does_not_block_a_later_call_that_matches(msvc, store, clock):
    blocked = create_calls(store, clock.now_ms(), {"language": "de"}, n=3)
    clock.advance(1)
    served = create_calls(store, clock.now_ms(), {"language": "en"})[0]
    available(msvc, "eve", ["en"])
    assert wake(msvc)["matched"] == 1
    assert store.get(served).status is TaskStatus.SUCCESS
    assert {store.get(c).status for c in blocked} == {TaskStatus.PENDING}


def test_an_impatient_caller_is_shed_not_matched(msvc, store, clock, capsys):
    shed = create_calls(store, clock.now_ms(), {"language": "fr"}, ttl=5)[0]
    clock.advance(10)
    available(msvc, "ana", ["fr"])
    report = wake(msvc)
    assert report["matched"] == 0 and report["stopped_by"] == "empty"
    hung_up = store.get(shed)
    # Never claimed: the matcher met it past its ttl and shed it (counted once), before DynamoDB's TTL did.
    assert hung_up.status is TaskStatus.SHED and hung_up.attempts == 0 and hung_up.lease_owner is None
    assert report["shed"] == 1
    assert metric_totals(capsys.readouterr().out)["TasksShed"] == 1


def test_lifo_option_serves_the_most_recently_available_agent(services, agent_table, store, clock):
    svc = MatcherServices.of(services, MatchSettings(agent_table_name=AGENT_TABLE, agent_order=Order.LIFO), agent_table)
    available(svc, "old", ["fr"])
    clock.advance(1)
    available(svc, "new", ["fr"])
    call = create_calls(store, clock.now_ms(), {"language": "fr"})[0]
    wake(svc)
    assert store.get(call).result["agentId"] == "new"


def test_call_with_invalid_preferences_is_dead_lettered(msvc, store, clock):
    bad = create_calls(store, clock.now_ms(), {"skill": "billing"})[0]
    report = wake(msvc)
    assert report["invalid"] == 1
    failed = store.get(bad)
    assert failed.status is TaskStatus.FAILURE and "unknown preference" in failed.last_error


def test_budget_spent_with_matchable_calls_left_tail_calls(msvc, store, clock, topics):
    available(msvc, "ana", ["fr"])
    create_calls(store, clock.now_ms(), {"language": "fr"})
    # The fake clock never moves by itself: a zero budget ends the run before the first pass.
    report = app.run_matcher(msvc, "req-1", 0.0)
    assert report.stopped_by == "budget" and report.work_remains
    assert topics.wakeups() == ["calls"]  # a tail call goes straight to WorkerWakeUpTopic


def test_direct_wake_for_another_queue_is_refused(msvc):
    with pytest.raises(InvalidTaskInput, match="serves queue 'calls'"):
        invoke(app, {"queue": "work"}, msvc)


@pytest.mark.parametrize("name", ["agent-available", "agent-offline", "call-ended", "queue-depth"])
def test_agent_events_sent_to_the_matcher_are_refused_naming_the_agent_events_function(msvc, agent_table, name):
    event = load_event(f"agent_events-{name}.json")
    with pytest.raises(InvalidEvent, match=r"agent events .*go to the AgentEvents function \(AgentEventsFunction"):
        invoke(app, event, msvc)
    assert all_items(agent_table) == []  # refused before anything was written


def test_an_agent_entry_on_the_agent_tables_stream_starts_the_matcher_which_matches(msvc, store, clock, capsys):
    (call_id,) = create_calls(store, clock.now_ms(), {"language": "en"})
    available(msvc, "ana")
    result = invoke(app, load_event("matcher-stream-agent-entry.json"), msvc)
    assert result["matched"] == 1 and result["planned"] is True
    assert store.get(call_id).status is TaskStatus.SUCCESS


def test_a_call_on_the_queue_tables_stream_starts_the_matcher_and_a_shed_only_batch_does_not(msvc, store, clock, capsys):
    (call_id,) = create_calls(store, clock.now_ms(), {"language": "en"})
    available(msvc, "ana")
    assert invoke(app, load_event("matcher-stream-call.json"), msvc)["matched"] == 1
    shed = json.loads(json.dumps(load_event("process_tasks-stream-ttl-remove.json")))
    shed["Records"][0]["dynamodb"]["OldImage"]["queue"]["S"] = "calls"
    capsys.readouterr()
    assert invoke(app, shed, msvc) == {"stoppedBy": "nothing-to-run"}
    assert metric_totals(capsys.readouterr().out).get("TasksShed") == 1


def test_template_filter_passes_only_agent_entry_inserts():
    from tests.support import template

    events = template()["Resources"]["MatcherFunction"]["Properties"]["Events"]
    stream = events["AgentStream"]["Properties"]
    patterns = [json.loads(f["Pattern"]) for f in stream["FilterCriteria"]["Filters"]]
    assert patterns == [{"eventName": ["INSERT"], "dynamodb": {"NewImage": {"entity": {"S": ["entry"]}}}}]
    assert stream["BatchSize"] == events["CallStream"]["Properties"]["BatchSize"]
