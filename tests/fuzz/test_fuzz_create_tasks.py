"""CreateTasks fuzzed: valid requests and Scheduled Events, near-valid mutations of events/create_tasks-*.json, and
garbage. Each input is created as asked, or refused with a TaskQueueError and nothing written; whatever is
accepted fits the published JSON Schema (checked with an independent validator, jsonschema)."""

from __future__ import annotations

import uuid
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskqueue.core import schema
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.states import TaskStatus
from tests.conftest import TABLE
from tests.fuzz.strategies import garbage_events, json_values, mutated, near
from tests.fuzz.support import RequestSpy, forget_wake_records, fuzz, fuzz_services, invoke, is_task, scan
from tests.support import LambdaContextStub, load_function

app = load_function("create_tasks")
PUBLISHED = jsonschema.Draft7Validator(schema.CREATE_TASKS_SCHEMA)
FILES = ("create_tasks-direct.json", "create_tasks-urgent.json", "create_tasks-schedule.json",
         "create_tasks-scheduled-event.json")

task_ids = st.text(st.characters(blacklist_characters="#"), min_size=1, max_size=24).filter(str.isprintable)


@st.composite
def valid_requests(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if draw(st.booleans()):
        body["queue"] = draw(st.sampled_from(["work", "calls"]))
    ids = draw(st.none() | st.lists(task_ids, min_size=1, max_size=3, unique=True))
    if ids:
        body["taskIds"] = ids
        if draw(st.booleans()):
            body["count"] = len(ids)
    elif draw(st.booleans()):
        body["count"] = draw(st.integers(1, 4))
    if draw(st.booleans()):
        body["priority"] = draw(st.integers(0, 999))
    ttl = draw(st.none() | st.integers(1, 315360000))
    if ttl is not None:
        body["ttlSeconds"] = ttl
    if draw(st.booleans()):
        body["delaySeconds"] = draw(st.integers(0, min((ttl or 3600) - 1, 31536000)))
    if draw(st.booleans()):
        body["maxAttempts"] = draw(st.integers(1, 100))
    if draw(st.booleans()):
        body["payload"] = draw(st.dictionaries(st.text(max_size=8), json_values, max_size=3))
    return body


@st.composite
def scheduled_events(draw: st.DrawFn) -> dict[str, Any]:
    """A Scheduled Event as EventBridge sends it without Input: required fields, and any of the optional ones."""
    event: dict[str, Any] = {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}
    optional = {"version": "0", "id": str(uuid.uuid4()), "account": "123456789012", "time": "2026-11-22T12:00:00Z",
                "region": "us-east-1", "resources": ["arn:aws:events:us-east-1:123456789012:rule/r"]}
    for key in draw(st.sets(st.sampled_from(sorted(optional)))):
        event[key] = optional[key]
    return event


events = st.one_of(
    valid_requests().map(lambda e: ("valid", e)),
    scheduled_events().map(lambda e: ("valid", e)),
    near(*FILES).map(lambda e: ("near", e)),
    valid_requests().flatmap(lambda e: mutated(e, 2)).map(lambda e: ("near", e)),
    scheduled_events().flatmap(lambda e: mutated(e, 2)).map(lambda e: ("near", e)),
    garbage_events.map(lambda e: ("garbage", e)),
)


@pytest.fixture
def world(fuzz_dynamodb, clock, sns, monkeypatch) -> Any:
    """The queue table with one task in it, and CreateTasks wired to it. Every example starts from this table and
    leaves it so (an accepted input's tasks are deleted once checked)."""
    svc = fuzz_services(fuzz_dynamodb, clock, sns)
    svc.store.put_tasks(new_tasks(parse_create_request({"taskIds": ["seed-task"]}, svc.settings), clock.now_ms(),
                                  svc.settings))
    monkeypatch.setattr(app, "services", lambda: svc)
    return scan(fuzz_dynamodb, TABLE)


@pytest.fixture
def spy(fuzz_dynamodb) -> Any:
    spy = RequestSpy(fuzz_dynamodb)
    yield spy
    spy.close()


def expected_request(event: dict[str, Any]) -> tuple[str, int]:
    if schema.is_eventbridge_event(event):
        return "work", 1
    return event.get("queue", "work"), event.get("count", len(event.get("taskIds") or ()) or 1)


@fuzz
@given(case=events)
def test_create_tasks_creates_what_it_is_asked_or_refuses_clearly_and_writes_nothing(world, fuzz_dynamodb, spy, case):
    dynamodb = fuzz_dynamodb
    label, event = case
    spy.clear()
    result, error = invoke(lambda: app.lambda_handler(event, LambdaContextStub(request_id=str(uuid.uuid4()))))
    after = scan(dynamodb, TABLE)
    if error is not None:
        assert label != "valid", f"a valid input was refused: {error}"
        assert spy.writes() == [], f"refused ({error}) but wrote {spy.writes()}"
        assert after == world
        return
    assert PUBLISHED.is_valid(event), f"accepted an input the published schema refuses: {event!r:.300}"
    queue, count = expected_request(event)
    assert (result["queue"], len(result["taskIds"])) == (queue, count)
    assert result["created"] + result["alreadyExisted"] == count
    assert result["wakeup"] == "stream"  # a producer writes its tasks alone: the table's stream starts the worker
    created = {item["taskId"]["S"]: item for item in after if item not in world and is_task(item)}
    assert set(created) == set(result["taskIds"]) - {"seed-task"}
    assert {(i["queue"]["S"], i["taskStatus"]["S"]) for i in created.values()} <= {(queue, TaskStatus.PENDING.value)}
    # Leave the table as the next example expects: the seed task only, and no queue woken.
    forget_wake_records(dynamodb)
    ids = sorted(created)
    for start in range(0, len(ids), 25):
        dynamodb.batch_write_item(RequestItems={TABLE: [
            {"DeleteRequest": {"Key": {"taskId": {"S": t}}}} for t in ids[start:start + 25]]})
