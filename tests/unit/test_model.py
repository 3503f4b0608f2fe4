import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskqueue.core.errors import InvalidTaskInput
from taskqueue.core.keys import Order
from taskqueue.core.model import Task, from_item, new_tasks, parse_create_request, to_item
from taskqueue.core.settings import Settings
from taskqueue.core.states import TaskStatus

SETTINGS = Settings(queue_table_name="t", default_ttl_seconds=3600, max_attempts=3)
NOW_MS = 1_795_348_800_123


def test_defaults_of_an_empty_request():
    request = parse_create_request({}, SETTINGS)
    assert (request.queue, request.count, request.priority, request.ttl_seconds, request.max_attempts) == ("work", 1, 0, 3600, 3)


def test_ttl_is_epoch_seconds_creation_plus_time_to_live():
    request = parse_create_request({"count": 3, "ttlSeconds": 120}, SETTINGS)
    tasks = new_tasks(request, NOW_MS, SETTINGS)
    assert len(tasks) == 3 and len({t.task_id for t in tasks}) == 3
    assert all(t.ttl == NOW_MS // 1000 + 120 for t in tasks)
    assert all(t.status is TaskStatus.PENDING and t.created_ms == t.enqueued_ms == NOW_MS for t in tasks)


def test_delay_sets_not_before():
    tasks = new_tasks(parse_create_request({"delaySeconds": 30}, SETTINGS), NOW_MS, SETTINGS)
    assert tasks[0].not_before_ms == NOW_MS + 30_000


@pytest.mark.parametrize(
    "body,message",
    [
        ({"count": 0}, "count must be a whole number from 1 to 1000, got 0"),
        ({"count": "3"}, "count must be"),
        ({"priority": 1000}, "priority must be"),
        ({"ttlSeconds": 0}, "ttlSeconds must be"),
        ({"payload": [1]}, "payload must be a JSON object"),
        ({"delaySeconds": 60, "ttlSeconds": 60}, r"delaySeconds \(60\) must be less than ttlSeconds \(60\)"),
        ({"delaySeconds": 4000}, r"delaySeconds \(4000\) must be less than ttlSeconds \(3600\)"),
        ({"payload": {"text": "\u00e9" * 140_000}}, "payload is 840011 bytes, over the limit of 262144 bytes"),
        ({"queue": "nope"}, "queue 'nope' is not configured"),
        ({"queue": "a#b"}, "queue must match pattern"),
        ({"colour": "red"}, "unknown field"),
        ({"taskIds": ["a", "a"]}, "taskIds must contain unique items"),
        ({"taskIds": ["a#1"]}, r"taskIds\[0\] must match pattern .* \(taskIds\[0\]: a task id: 1-200 printable characters without \'#\'\)"),
        ({"taskIds": ["a", "b"], "count": 3}, "must equal the number of taskIds"),
    ],
)
def test_bad_requests_are_refused_with_a_clear_message(body, message):
    with pytest.raises(InvalidTaskInput, match=message):
        parse_create_request(body, SETTINGS)


def test_not_an_object_is_refused():
    with pytest.raises(InvalidTaskInput, match="JSON object"):
        parse_create_request([1, 2], SETTINGS)  # type: ignore[arg-type]


statuses = st.sampled_from(list(TaskStatus))
payloads = st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=5), st.booleans()), max_size=3)


@given(statuses, st.integers(0, 999), st.integers(0, 10), payloads, st.sampled_from(list(Order)))
def test_item_round_trip_and_index_membership(status, priority, attempts, payload, order):
    task = Task(
        task_id="t-1", queue="work", status=status, priority=priority, created_ms=NOW_MS, updated_ms=NOW_MS + 5,
        enqueued_ms=NOW_MS, ttl=NOW_MS // 1000 + 60, attempts=attempts, payload=payload,
        lease_owner="w" if status is TaskStatus.TAKEN else None,
        lease_expires_ms=NOW_MS + 1000 if status is TaskStatus.TAKEN else None,
    )
    item = to_item(task, order)
    assert from_item(item) == task
    # Only PENDING tasks are in the ReadyIndex; SUCCESS tasks are in no index at all.
    assert ("readyKey" in item) == (status is TaskStatus.PENDING)
    # WAITING (a workflow's task waiting for its dependencies) is in neither: nothing looks for it.
    assert ("statusKey" in item) == (status not in (TaskStatus.PENDING, TaskStatus.SUCCESS, TaskStatus.SHED, TaskStatus.WAITING))


def test_from_item_rejects_a_non_task():
    with pytest.raises(InvalidTaskInput, match="item is not a task"):
        from_item({"taskId": {"S": "x"}})


def test_ids_derived_from_a_request_id_are_stable_and_distinct():
    request = parse_create_request({"count": 3}, SETTINGS)
    first = [t.task_id for t in new_tasks(request, NOW_MS, SETTINGS, "req-1")]
    assert first == [t.task_id for t in new_tasks(request, NOW_MS + 5000, SETTINGS, "req-1")]
    assert len(set(first)) == 3
    assert set(first).isdisjoint(t.task_id for t in new_tasks(request, NOW_MS, SETTINGS, "req-2"))
    assert set(first).isdisjoint(t.task_id for t in new_tasks(request, NOW_MS, SETTINGS))


def test_a_delayed_task_waits_in_the_delayed_partition_sorted_by_due_time():
    task = new_tasks(parse_create_request({"delaySeconds": 30, "priority": 7}, SETTINGS), NOW_MS, SETTINGS)[0]
    item = to_item(task, Order.LIFO)
    assert item["readyKey"]["S"] == "work#0#delayed"
    assert item["readySort"]["S"].startswith(f"{NOW_MS + 30_000:015d}#007#")
    assert item["deleteAt"] == item["ttl"]  # while it waits, DynamoDB may delete it at its shed deadline
