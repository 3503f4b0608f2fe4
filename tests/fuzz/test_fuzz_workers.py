"""The two workers fuzzed: ProcessTasks (WORKER_QUEUES=work) and the Matcher (WORKER_QUEUES=calls), as the template
configures them, fed wake-ups for their own queue, for the other worker's queue, near-valid mutations of their
event files, agent events, and garbage.

A wake-up for the worker's own queue runs it (the tasks seeded for it are done, the calls matched); anything else
is refused with a TaskQueueError before any claim: nothing written, and the other queue's tasks never touched."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.matching.rules import MatchSettings
from taskqueue.services import MatcherServices
from taskqueue.store import TaskStore
from tests.agent_support import AGENT_TABLE, profile
from tests.conftest import TABLE
from tests.fuzz.strategies import garbage_events, json_values, near
from tests.fuzz.support import RequestSpy, fuzz, fuzz_services, invoke, is_task, scan
from tests.support import LambdaContextStub, load_event, load_function

process_tasks = load_function("process_tasks")
matcher = load_function("matcher")


def sns_wake(queue: Any, by_message: bool = False) -> dict[str, Any]:
    event = copy.deepcopy(load_event("process_tasks-sns-wake.json"))
    sns = event["Records"][0]["Sns"]
    sns["MessageAttributes"]["queue"]["Value"] = queue
    sns["Message"] = json.dumps({"queue": queue, "reason": "stream"})
    if by_message:
        sns["MessageAttributes"] = {}
    return event


def wake_ups(own: str, other: str) -> st.SearchStrategy[tuple[str, Any]]:
    """(label, event): "own" must run the worker, "other" must be refused naming WORKER_QUEUES, "unknown" either."""
    return st.one_of(
        st.one_of(
            st.builds(sns_wake, st.just(own), st.booleans()),
            st.sampled_from([{"queue": own}, {"queue": own, "reason": "tail-call"}]),
        ).map(lambda e: ("own", e)),
        st.one_of(st.builds(sns_wake, st.just(other), st.booleans()), st.just({"queue": other})).map(
            lambda e: ("other", e)),
        st.one_of(
            near("process_tasks-sns-wake.json", "matcher-sns-wake.json", "process_tasks-direct.json",
                 "agent_events-agent-available.json", "process_tasks-stream-insert.json"),
            st.builds(sns_wake, json_values),
            st.dictionaries(st.sampled_from(["queue", "reason", "Records", "action"]), json_values, max_size=3),
            garbage_events,
        ).map(lambda e: ("unknown", e)),
    )


def seed_tasks(store: TaskStore, queue: str, n: int, payload: dict[str, Any] | None = None) -> None:
    if n:
        body = {"queue": queue, "count": n, "payload": payload or {}}
        store.put_tasks(new_tasks(parse_create_request(body, store.settings), store._clock.now_ms(), store.settings))


def delete_items(client: Any, table: str, items: list[dict[str, Any]], key_names: tuple[str, ...]) -> None:
    keys = [{name: item[name] for name in key_names} for item in items]
    for start in range(0, len(keys), 25):
        client.batch_write_item(RequestItems={table: [{"DeleteRequest": {"Key": k}} for k in keys[start:start + 25]]})


# ---- ProcessTasks --------------------------------------------------------------------------------------------


@pytest.fixture
def work_world(fuzz_dynamodb, clock, sns, monkeypatch) -> Any:
    svc = fuzz_services(fuzz_dynamodb, clock, sns, worker_queues=("work",), runner_capacity=2)
    seed_tasks(svc.store, "calls", 2, {"preferences": {}})  # the Matcher's: never to be touched by ProcessTasks
    ran: list[str] = []
    monkeypatch.setattr(process_tasks, "services", lambda: svc)
    monkeypatch.setattr(process_tasks, "runner", lambda: lambda task: ran.append(task.queue))
    spy = RequestSpy(fuzz_dynamodb)
    yield svc, sns, spy, ran, {"work": 0}
    spy.close()


@fuzz
@given(case=wake_ups("work", "calls"), target=st.integers(0, 2))
def test_process_tasks_serves_only_its_own_queue(work_world, fuzz_dynamodb, case, target):
    dynamodb = fuzz_dynamodb
    svc, sns, spy, ran, waiting_now = work_world
    label, event = case
    seed_tasks(svc.store, "work", max(0, target - waiting_now["work"]))  # at most 2 waiting: the table stays small
    before = scan(dynamodb, TABLE)
    waiting = sum(1 for i in before if is_task(i) and i["queue"]["S"] == "work" and i["taskStatus"]["S"] == "PENDING")
    spy.clear()
    sns.published.clear()
    ran.clear()
    result, error = invoke(lambda: process_tasks.lambda_handler(event, LambdaContextStub(function_name="ProcessTasks")))
    after = scan(dynamodb, TABLE)
    waiting_now["work"] = sum(1 for i in after if is_task(i) and i["queue"]["S"] == "work" and i["taskStatus"]["S"] == "PENDING")
    calls = [i for i in after if is_task(i) and i["queue"]["S"] == "calls"]
    assert len(calls) == 2 and all(i["taskStatus"]["S"] == "PENDING" and i["attempts"]["N"] == "0" for i in calls)
    if error is not None:
        assert label != "own", f"a wake-up for its own queue was refused: {error}"
        if label == "other":
            assert "this worker serves queue 'work' only (WORKER_QUEUES)" in str(error)
        assert spy.writes() == [] and after == before and ran == [] and sns.published == []
        return
    assert label != "other", "served a wake-up for the Matcher's queue"
    if label == "unknown" and result["stopped_by"] == "nothing-to-run":  # a stream batch of records that are no task
        assert result["claimed"] == 0 and ran == [] and spy.writes() == [] and sns.published == []
        return
    assert result["queue"] == "work" and ran == ["work"] * waiting
    assert (result["claimed"], result["succeeded"]) == (waiting, waiting)
    # Keep the table small for the next example: the finished tasks go.
    delete_items(dynamodb, TABLE, [i for i in after if is_task(i) and i["taskStatus"]["S"] == "SUCCESS"], ("taskId",))


# ---- the Matcher ---------------------------------------------------------------------------------------------


@pytest.fixture
def calls_world(fuzz_dynamodb, clock, sns, monkeypatch) -> Any:
    base = fuzz_services(fuzz_dynamodb, clock, sns, worker_queues=("calls",))
    msvc = MatcherServices.of(base, MatchSettings(agent_table_name=AGENT_TABLE), fuzz_dynamodb)
    seed_tasks(base.store, "work", 2)  # ProcessTasks': never to be touched by the Matcher
    monkeypatch.setattr(matcher, "services", lambda: msvc)
    spy = RequestSpy(fuzz_dynamodb)
    yield msvc, sns, spy, {"calls": 0, "agents": 0}
    spy.close()


def agent_matches(event: Any) -> bool:
    return isinstance(event, dict) and "action" in event


@fuzz
@given(case=wake_ups("calls", "work"), calls=st.integers(0, 2), agents=st.integers(0, 2))
def test_the_matcher_serves_only_its_own_queue(calls_world, fuzz_dynamodb, clock, case, calls, agents):
    dynamodb = fuzz_dynamodb
    msvc, sns, spy, now = calls_world
    label, event = case
    # At most 2 calls waiting and 2 agents available: the tables stay small.
    seed_tasks(msvc.base.store, "calls", max(0, calls - now["calls"]), {"caller": "c", "preferences": {}})
    for n in range(max(0, agents - now["agents"])):
        clock.advance(0.001)
        msvc.agents.put_available(profile(f"agent-{clock.now_ms()}-{n}"))
    before = (scan(dynamodb, TABLE), scan(dynamodb, AGENT_TABLE))
    waiting = sum(1 for i in before[0] if is_task(i) and i["queue"]["S"] == "calls" and i["taskStatus"]["S"] == "PENDING")
    available = sum(1 for i in before[1] if i["sk"]["S"] == "PROFILE" and i["agentStatus"]["S"] == "queued")
    spy.clear()
    sns.published.clear()
    result, error = invoke(lambda: matcher.lambda_handler(event, LambdaContextStub(function_name="Matcher")))
    after = (scan(dynamodb, TABLE), scan(dynamodb, AGENT_TABLE))
    now["calls"] = sum(1 for i in after[0] if is_task(i) and i["queue"]["S"] == "calls" and i["taskStatus"]["S"] == "PENDING")
    now["agents"] = sum(1 for i in after[1] if i["sk"]["S"] == "PROFILE" and i["agentStatus"]["S"] == "queued")
    work = [i for i in after[0] if is_task(i) and i["queue"]["S"] == "work"]
    assert len(work) == 2 and all(i["taskStatus"]["S"] == "PENDING" and i["attempts"]["N"] == "0" for i in work)
    if error is not None:
        assert label != "own", f"a wake-up for its own queue was refused: {error}"
        if label == "other":
            assert "this worker serves queue 'calls' only (WORKER_QUEUES)" in str(error)
        assert spy.writes() == [] and after == before and sns.published == []
        return
    assert label != "other" and not agent_matches(event), f"served {event!r:.200}"
    assert result["queue"] == "calls" and result["matched"] == min(waiting, available)
    # Keep the tables small: matched calls and busy agents (with their entries, already gone) go.
    delete_items(dynamodb, TABLE, [i for i in after[0] if is_task(i) and i["taskStatus"]["S"] == "SUCCESS"], ("taskId",))
    delete_items(dynamodb, AGENT_TABLE, [i for i in after[1] if i.get("agentStatus", {}).get("S") == "busy"],
                 ("pk", "sk"))
