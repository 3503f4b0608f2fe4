"""The DynamoDB store against moto: order, priorities, expiry, leases, ownership, batching."""

from typing import Any

import pytest

from taskqueue.core.errors import InvalidTransition, TaskNotFound
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.states import TaskStatus
from taskqueue.store import StoreError, TaskStore
from tests.conftest import make_settings


def create(store: TaskStore, clock, n: int = 1, **body: Any) -> list:
    tasks = new_tasks(parse_create_request({"count": n, **body}, store.settings), clock.now_ms(), store.settings)
    store.put_tasks(tasks, idempotent="taskIds" in body)
    return tasks


def claim_all(store: TaskStore, queue: str = "work") -> list[str]:
    claimed = []
    while candidates := store.candidates(queue, 10):
        task = store.claim(candidates[0], "worker-1")
        assert task is not None
        claimed.append(task.task_id)
    return claimed


def test_lifo_queue_serves_newest_first(store, clock):
    order = []
    for _ in range(5):
        order += [t.task_id for t in create(store, clock)]
        clock.advance(1)
    assert claim_all(store) == list(reversed(order))


def test_fifo_queue_serves_oldest_first(store, clock):
    order = []
    for _ in range(5):
        order += [t.task_id for t in create(store, clock, queue="calls")]
        clock.advance(1)
    assert claim_all(store, "calls") == order


def test_higher_priority_first_then_queue_order(store, clock):
    low_old = create(store, clock, priority=1)[0].task_id
    clock.advance(1)
    high_old = create(store, clock, priority=5)[0].task_id
    clock.advance(1)
    low_new = create(store, clock, priority=1)[0].task_id
    clock.advance(1)
    high_new = create(store, clock, priority=5)[0].task_id
    assert claim_all(store) == [high_new, high_old, low_new, low_old]


def test_expired_task_is_never_claimed_even_before_ttl_deletes_it(store, clock):
    task = create(store, clock, ttlSeconds=10)[0]
    candidate = store.candidates("work", 10)[0]
    clock.advance(11)
    assert store.candidates("work", 10, shed=False) == []
    # Even a worker holding a stale candidate is refused by the claim's condition.
    assert store.claim(candidate, "worker-1") is None
    assert store.get(task.task_id).status is TaskStatus.PENDING
    # A reader that sheds meets it and takes it out of the queue for good, counted once.
    assert store.candidates("work", 10) == []
    assert store.get(task.task_id).status is TaskStatus.SHED
    assert store.claim(candidate, "worker-1") is None
    assert store.drain_shed() == {"work": 1}
    assert store.candidates("work", 10) == [] and store.drain_shed() == {}


def test_delayed_task_is_not_claimable_before_its_time(store, clock):
    create(store, clock, delaySeconds=30)
    assert store.candidates("work", 10) == []
    clock.advance(30)
    assert len(store.candidates("work", 10)) == 1


def test_claim_records_lease_and_attempt_and_leaves_the_ready_index(store, clock, dynamodb):
    task = create(store, clock)[0]
    claimed = store.claim(store.candidates("work", 1)[0], "worker-1")
    assert claimed.status is TaskStatus.TAKEN and claimed.attempts == 1
    assert claimed.lease_owner == "worker-1"
    assert claimed.lease_expires_ms == clock.now_ms() + store.settings.lease_seconds * 1000
    item = dynamodb.get_item(TableName=store.settings.queue_table_name, Key={"taskId": {"S": task.task_id}})["Item"]
    # The task keeps its ReadyIndex entry, its lease marked on it (one index write), and no StatusIndex entry.
    assert item["readyKey"]["S"] == "work#0" and item["notBefore"]["N"] == str(claimed.lease_expires_ms)
    assert "statusKey" not in item and "statusSort" not in item
    assert store.candidates("work", 1) == []  # a look passes the running task over


def test_a_task_is_claimed_once(store, clock):
    create(store, clock)
    candidate = store.candidates("work", 1)[0]
    assert store.claim(candidate, "worker-1") is not None
    assert store.claim(candidate, "worker-2") is None


def test_only_the_lease_owner_may_finish(store, clock):
    create(store, clock)
    task = store.claim(store.candidates("work", 1)[0], "worker-1")
    assert store.complete(task, "worker-2") is False
    assert store.fail(task, "worker-2", "boom") is False
    assert store.release(task, "worker-2") is False
    assert store.get(task.task_id).status is TaskStatus.TAKEN
    assert store.complete(task, "worker-1", {"ok": True}) is True
    done = store.get(task.task_id)
    assert done.status is TaskStatus.SUCCESS and done.result == {"ok": True} and done.lease_owner is None


def test_an_owner_whose_lease_expired_cannot_finish(store, clock):
    create(store, clock)
    task = store.claim(store.candidates("work", 1)[0], "worker-1")
    clock.advance(store.settings.lease_seconds + 1)
    assert store.complete(task, "worker-1") is False
    assert store.get(task.task_id).status is TaskStatus.TAKEN


def test_finished_tasks_get_retention_ttl_in_seconds(store, clock):
    create(store, clock, ttlSeconds=60)
    task = store.claim(store.candidates("work", 1)[0], "worker-1")
    store.complete(task, "worker-1")
    assert store.get(task.task_id).delete_at == clock.now_ms() // 1000 + store.settings.retention_seconds


def test_release_keeps_the_tasks_place_and_sets_not_before(store, clock):
    older = create(store, clock)[0]
    clock.advance(1)
    newer = create(store, clock)[0]
    taken = store.claim(store.candidates("work", 1)[0], "worker-1")
    assert taken.task_id == newer.task_id
    assert store.release(taken, "worker-1", not_before_ms=clock.now_ms() + 5000, error="busy") is True
    # Not claimable during backoff; afterwards back at the front (it is still the newest).
    assert [c.task_id for c in store.candidates("work", 10)] == [older.task_id]
    clock.advance(5)
    assert [c.task_id for c in store.candidates("work", 10)] == [newer.task_id, older.task_id]
    again = store.get(newer.task_id)
    assert again.status is TaskStatus.PENDING and again.last_error == "busy" and again.attempts == 1


def test_forbidden_transition_is_refused_before_any_request(store, clock):
    class NoCalls:
        def __getattr__(self, name):
            raise AssertionError(f"DynamoDB was called: {name}")

    guarded = TaskStore(NoCalls(), store.settings, clock)
    # (PENDING -> SUCCESS is allowed: the Matcher's match transaction takes a waiting call straight there.)
    with pytest.raises(InvalidTransition, match="from PENDING to FAILURE"):
        guarded._transition("t", TaskStatus.PENDING, TaskStatus.FAILURE, now_ms=0, set_={})
    with pytest.raises(InvalidTransition):
        guarded.put_tasks([create(store, clock)[0].with_changes(status=TaskStatus.SUCCESS)])


def test_expired_lease_returns_task_to_pending_then_failure_when_attempts_run_out(store, clock):
    task = create(store, clock, maxAttempts=2)[0]
    for attempt, expected in ((1, TaskStatus.PENDING), (2, TaskStatus.FAILURE)):
        clock.advance(1)
        taken = store.claim(store.candidates("work", 1)[0], f"worker-{attempt}")
        assert taken.attempts == attempt
        assert store.expired_leases("work") == []
        clock.advance(store.settings.lease_seconds + 1)
        assert store.expired_leases("work") == [task.task_id]
        assert store.recover_lease(task.task_id, retry_at_ms=None) is expected
        # The old owner can no longer finish.
        assert store.complete(taken, f"worker-{attempt}") is False
    dead = store.get(task.task_id)
    assert dead.status is TaskStatus.FAILURE and "lease of worker-2 expired" in dead.last_error
    assert store.expired_leases("work") == []


def test_put_tasks_writes_in_batches_of_25(store, clock, dynamodb):
    tasks = create(store, clock, n=60)
    count = dynamodb.scan(TableName=store.settings.queue_table_name, Select="COUNT")["Count"]
    assert count == 60 == len({t.task_id for t in tasks})


def test_unprocessed_items_are_retried(store, clock):
    calls = []

    class Throttling:
        def batch_write_item(self, RequestItems):
            calls.append(sum(len(v) for v in RequestItems.values()))
            if len(calls) == 1:
                table, requests = next(iter(RequestItems.items()))
                return {"UnprocessedItems": {table: requests[:3]}}
            return {"UnprocessedItems": {}}

    tasks = new_tasks(parse_create_request({"count": 10}, store.settings), clock.now_ms(), store.settings)
    TaskStore(Throttling(), store.settings, clock).put_tasks(tasks)
    assert calls == [10, 3]


def test_same_task_id_twice_creates_one_task(store, clock):
    first = create(store, clock, taskIds=["device-42"], priority=3)
    tasks = new_tasks(parse_create_request({"taskIds": ["device-42"]}, store.settings), clock.now_ms(), store.settings)
    result = store.put_tasks(tasks, idempotent=True)
    assert (result.created, result.already_existed) == (0, 1)
    assert store.get("device-42").priority == first[0].priority == 3


def test_sharded_queue_still_serves_in_global_order(dynamodb, topics, clock):
    store = TaskStore(dynamodb, make_settings(topics, queue_shards=4), clock)
    ids = []
    for n in range(12):
        ids += [t.task_id for t in create(store, clock, taskIds=[f"task-{n:02d}"])]
        clock.advance(1)
    # These ids spread over every shard (crc32 is stable), so the merge across partitions is exercised.
    assert {c.shard for c in store.candidates("work", 12)} == {0, 1, 2, 3}
    assert claim_all(store) == list(reversed(ids))


def test_missing_table_is_a_clear_error(dynamodb, topics, clock):
    store = TaskStore(dynamodb, make_settings(topics, queue_table_name="nope"), clock)
    with pytest.raises(StoreError, match="'nope'.*does not exist: check QUEUE_TABLE_NAME"):
        store.candidates("work", 1)
    with pytest.raises(TaskNotFound):
        TaskStore(dynamodb, make_settings(topics), clock).get("missing")


# ---- a running task keeps its ReadyIndex entry, its lease marked on it (taskqueue.core.keys) ----------------------


def test_a_dead_workers_task_is_claimed_again_by_the_next_look_once_its_lease_passes(store, clock):
    (task,) = create(store, clock, maxAttempts=3)
    assert store.claim(store.candidates("work", 1)[0], "worker-1") is not None
    assert store.candidates("work", 5) == []  # its lease holds: a look passes it over
    clock.advance(store.settings.lease_seconds + 1)  # worker-1 died
    (found,) = store.candidates("work", 5)
    assert found.task_id == task.task_id and found.leased
    again = store.claim(found, "worker-2")
    assert again is not None and again.lease_owner == "worker-2" and again.attempts == 2
    assert "lease of worker-1 expired" in again.last_error


def test_a_running_task_past_its_ttl_is_neither_shed_nor_claimed(store, clock):
    create(store, clock, ttlSeconds=5)
    running = store.claim(store.candidates("work", 1)[0], "worker-1")
    clock.advance(10)  # past its ttl, within its lease
    assert store.candidates("work", 5) == []
    assert store.get(running.task_id).status is TaskStatus.TAKEN
    assert store.complete(running, "worker-1")


def test_a_dead_workers_task_past_its_ttl_is_shed_by_the_look_that_meets_it(store, clock):
    create(store, clock, ttlSeconds=5, maxAttempts=3)
    running = store.claim(store.candidates("work", 1)[0], "worker-1")
    clock.advance(store.settings.lease_seconds + 10)
    assert store.candidates("work", 5) == []
    assert store.get(running.task_id).status is TaskStatus.SHED


def test_a_task_claimed_from_the_delayed_partition_moves_to_its_ready_partition(store, clock, dynamodb):
    (task,) = create(store, clock, delaySeconds=5)
    clock.advance(6)
    (due,) = store.candidates("work", 1)
    assert due.delayed
    claimed = store.claim(due, "worker-1")
    item = dynamodb.get_item(TableName=store.settings.queue_table_name, Key={"taskId": {"S": task.task_id}})["Item"]
    assert item["readyKey"]["S"] == "work#0" and item["readySort"]["S"] == due.ready_sort
    assert item["notBefore"]["N"] == str(claimed.lease_expires_ms) and claimed.not_before_ms is None
    assert store.complete(claimed, "worker-1")
    item = dynamodb.get_item(TableName=store.settings.queue_table_name, Key={"taskId": {"S": task.task_id}})["Item"]
    assert not {"readyKey", "readySort", "notBefore", "statusKey"} & set(item)


def test_a_look_reads_past_the_running_tasks_at_the_head_in_one_request(store, clock):
    create(store, clock, 6)
    for _ in range(3):  # the three newest run: their entries head the LIFO partition
        assert store.claim(store.candidates("work", 1)[0], "worker-1") is not None
    store.candidates("work", 1)  # the first look learns how many it passed over
    limits = []
    original = store._call

    def counting(operation, **kwargs):
        if operation == "query" and kwargs.get("IndexName") == "ReadyIndex" and kwargs["ExpressionAttributeValues"][":k"]["S"] == "work#0":
            limits.append(kwargs["Limit"])
        return original(operation, **kwargs)

    store._call = counting
    assert len(store.candidates("work", 1)) == 1
    assert limits == [4]


def test_counts_and_listings_tell_running_tasks_from_waiting_ones(store, clock):
    create(store, clock, 4)
    running = store.claim(store.candidates("work", 1)[0], "worker-1")
    depth = store.depth("work")
    assert (depth.ready, depth.taken, depth.expired) == (3, 1, 0)
    assert store.count("work", TaskStatus.TAKEN) == 1 and store.count("work", TaskStatus.PENDING) == 3
    assert [t.task_id for t in store.list_tasks("work", TaskStatus.TAKEN).tasks] == [running.task_id]
    assert running.task_id not in {t.task_id for t in store.list_tasks("work", TaskStatus.PENDING).tasks}
    (stats,) = store.stats(["work"])
    assert stats.counts["TAKEN"] == 1 and stats.counts["PENDING"] == 3


def test_the_safety_net_recovers_a_lease_taken_by_the_version_before_on_the_status_index(store, clock, dynamodb):
    (task,) = create(store, clock, maxAttempts=3)
    expires = clock.now_ms() + 1000
    # What the claim of the version before left: no ReadyIndex entry, a StatusIndex TAKEN entry by lease expiry.
    dynamodb.update_item(
        TableName=store.settings.queue_table_name, Key={"taskId": {"S": task.task_id}},
        UpdateExpression="SET taskStatus = :t, leaseOwner = :o, leaseExpires = :e, statusKey = :k, statusSort = :e "
                         "REMOVE readyKey, readySort",
        ExpressionAttributeValues={":t": {"S": "TAKEN"}, ":o": {"S": "old"}, ":e": {"N": str(expires)},
                                   ":k": {"S": "work#TAKEN#0"}},
    )
    clock.advance(2)
    assert store.recover_expired_leases("work") == {"PENDING": 0, "FAILURE": 0}  # a worker's recovery reads no StatusIndex
    assert store.recover_expired_leases("work", legacy=True) == {"PENDING": 1, "FAILURE": 0}
    assert [c.task_id for c in store.candidates("work", 5)] == [task.task_id]
