"""CreateTasks against moto: tasks written PENDING with ttl in seconds; bad input writes nothing."""

import pytest

from taskqueue.core.errors import InvalidTaskInput
from taskqueue.core.states import TaskStatus
from taskqueue.services import Services
from taskqueue.store import StoreError, TaskStore
from taskqueue.store.control import is_control_id
from tests.conftest import TABLE
from tests.faults import FaultyClient
from tests.support import load_event, load_function

app = load_function("create_tasks")


def all_items(dynamodb):
    """Every task item (not the queues' records)."""
    return [i for i in dynamodb.scan(TableName=TABLE)["Items"] if not is_control_id(i["taskId"]["S"])]


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


def test_scheduled_event_without_input_creates_the_default_request(services, dynamodb):
    # A schedule without Input delivers the whole Scheduled Event, whose detail is always {}: the default request.
    result = app.handle(load_event("create_tasks-scheduled-event.json"), services)
    assert (result["queue"], result["created"]) == ("work", 1)
    assert len(all_items(dynamodb)) == 1


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


def test_lambdas_retry_after_a_partial_batch_write_creates_no_duplicates(services, dynamodb, settings, clock):
    client = FaultyClient(dynamodb)
    svc = Services(settings, TaskStore(client, settings, clock), services.notifier, clock)
    client.fail("batch_write_item", "", "ThrottlingException")  # the second batch of 25 is throttled past retries
    with pytest.raises(StoreError):
        app.handle({"queue": "work", "count": 60}, svc, "request-7")
    assert len(all_items(dynamodb)) == 25
    retried = app.handle({"queue": "work", "count": 60}, svc, "request-7")  # Lambda's retry: same request id
    assert (retried["created"], retried["alreadyExisted"]) == (35, 25)
    assert len(all_items(dynamodb)) == 60
    again = app.handle({"queue": "work", "count": 60}, svc, "request-7")
    assert (again["created"], again["taskIds"]) == (0, retried["taskIds"])
    other = app.handle({"queue": "work", "count": 60}, svc, "request-8")  # another invocation: new tasks
    assert other["created"] == 60 and set(other["taskIds"]).isdisjoint(retried["taskIds"])


def test_a_retry_never_resets_a_task_a_worker_already_took(services, dynamodb, clock):
    first = app.handle({"queue": "work", "count": 3}, services, "request-9")
    taken = services.store.claim(services.store.candidates("work", 1)[0], "worker-1")
    app.handle({"queue": "work", "count": 3}, services, "request-9")
    assert services.store.get(taken.task_id).status is TaskStatus.TAKEN
    assert len(all_items(dynamodb)) == 3 and taken.task_id in first["taskIds"]


@pytest.mark.parametrize(
    ("preferences", "said"),
    [
        ({"language": 5}, "value 5 of attribute 'language'"),  # no agent's language is a number
        ({"accent": "scottish"}, "unknown preference(s) ['accent']"),  # the Matcher does not match on it
        ("french", "preferences must be an object"),
    ],
)
def test_a_call_that_can_never_match_is_refused_at_creation_and_nothing_is_written(services, dynamodb, preferences, said):
    with pytest.raises(InvalidTaskInput) as refused:
        app.handle({"queue": "calls", "payload": {"caller": "c-1", "preferences": preferences}}, services)
    assert refused.value.field == "payload.preferences" and said in str(refused.value)
    assert all_items(dynamodb) == []


def test_a_call_that_can_match_is_created_and_work_payloads_are_not_read_as_calls(services, dynamodb):
    app.handle({"queue": "calls", "payload": {"caller": "c-1", "preferences": {"language": "FR", "gender": "any"}}},
               services)
    app.handle({"queue": "work", "payload": {"preferences": {"language": 5}}}, services)  # not a call: its own business
    assert len(all_items(dynamodb)) == 2


def test_the_stacks_match_attributes_decide_what_a_call_may_ask_for(services, dynamodb):
    accents = Services(services.settings, services.store, services.notifier, services.clock, "calls", ("accent",))
    app.handle({"queue": "calls", "payload": {"preferences": {"accent": "scottish"}}}, accents)
    with pytest.raises(InvalidTaskInput):
        app.handle({"queue": "calls", "payload": {"preferences": {"language": "fr"}}}, accents)
    assert len(all_items(dynamodb)) == 1


def test_a_grouped_sample_event_puts_its_tasks_in_that_groups_line(services, dynamodb):
    """events/create_tasks-group.json: what a direct invoke, or the schedule's Input, sends to name a fair-share group."""
    result = app.handle(load_event("create_tasks-group.json"), services)
    assert result["created"] == 5
    items = all_items(dynamodb)
    assert {i["taskGroup"]["S"] for i in items} == {"customer-17"}
    assert {i["readyKey"]["S"] for i in items} == {"work#0#g#customer-17"}
    assert services.store.group_view("work", "customer-17").waiting == 5
