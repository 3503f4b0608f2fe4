"""CreateTasks against moto: tasks written PENDING with ttl in seconds; bad input writes nothing."""

import pytest

from taskqueue.errors import InvalidTaskInput
from taskqueue.states import TaskStatus
from tests.conftest import TABLE
from tests.support import load_event, load_function

app = load_function("create_tasks")


def all_items(dynamodb):
    return dynamodb.scan(TableName=TABLE)["Items"]


def test_direct_invoke_creates_pending_tasks_with_ttl_in_seconds(services, dynamodb, clock):
    result = app.handle(load_event("create_tasks-direct.json"), services)
    assert result["created"] == 15 and len(result["taskIds"]) == 15
    items = all_items(dynamodb)
    assert len(items) == 15
    for item in items:
        assert item["taskStatus"]["S"] == TaskStatus.PENDING
        # Seconds, not milliseconds: the seed demo wrote ms, so nothing ever expired.
        assert int(item["ttl"]["N"]) == clock.now_ms() // 1000 + 3600
        assert item["readyKey"]["S"] == "work#0"
        assert item["payload"]["S"] == '{"deviceId":"sensor-42","ip":"203.0.113.7"}'


def test_scheduled_event_without_input_reads_detail(services, dynamodb):
    assert app.handle(load_event("create_tasks-scheduled-event.json"), services)["created"] == 5
    assert len(all_items(dynamodb)) == 5


def test_schedule_input_shape(services, dynamodb):
    assert app.handle(load_event("create_tasks-schedule.json"), services)["created"] == 15


def test_caller_ids_make_creation_idempotent(services, dynamodb):
    event = load_event("create_tasks-urgent.json")
    assert app.handle(event, services)["created"] == 1
    again = app.handle(event, services)
    assert (again["created"], again["alreadyExisted"]) == (0, 1)
    assert len(all_items(dynamodb)) == 1


@pytest.mark.parametrize("event", [{"count": -1}, {"queue": "unknown"}, {"payload": "text"}, {"priority": 1e9}])
def test_bad_input_raises_a_clear_error_and_writes_nothing(services, dynamodb, event):
    with pytest.raises(InvalidTaskInput):
        app.handle(event, services)
    assert all_items(dynamodb) == []
