"""Issue 29: stream starts. The table's stream hands a batch of new ready tasks to ProcessTasks, which claims them by
key unless a watcher has them (taskqueue.work.stream_start), on both DynamoDB engines."""

from __future__ import annotations

import dataclasses

import pytest

from taskqueue.client.create import create_tasks
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.states import TaskStatus
from taskqueue.services import Services
from taskqueue.store import TaskStore
from taskqueue.work.stream_start import BUSY_TASKS, NAMED, ArrivalHistory
from tests.integration.test_delayed_head import create, recorded
from tests.support import load_event, load_function

pytestmark = pytest.mark.dynamodb_engines

app = load_function("process_tasks")


def stream_event(store: TaskStore, task_ids: list[str]) -> dict:
    """The TaskStream batch AWS would deliver for these tasks: INSERTs whose NewImage is each item as written."""
    records = []
    for n, task_id in enumerate(task_ids):
        item = store._db.get_item(TableName=store.settings.queue_table_name, Key={"taskId": {"S": task_id}})["Item"]
        records.append({"eventID": str(n), "eventName": "INSERT", "eventSource": "aws:dynamodb",
                        "dynamodb": {"Keys": {"taskId": item["taskId"]}, "NewImage": item,
                                     "StreamViewType": "NEW_AND_OLD_IMAGES"}})
    return {"Records": records}


def services_on(store: TaskStore, clock, **changes) -> tuple[Services, object]:
    settings = {"stream_start_queues": ("work",), "claim_lanes": 10, **changes}
    worker_store, client = recorded(store, **settings)
    return Services(worker_store.settings, worker_store, None, clock), client  # type: ignore[arg-type]


def ops(client) -> list[str]:
    return [op for op, _ in client.requests]


class Runner:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, task):
        self.seen.append(task.task_id)


def test_an_idle_queues_new_tasks_are_claimed_by_key_without_reading_the_index_or_the_slots(store, clock):
    svc, client = services_on(store, clock)
    ids = []
    for _ in range(2):
        ids += create(svc.store, clock)
        clock.advance(1)
    event, runner = stream_event(svc.store, ids), Runner()
    client.requests.clear()
    report = app.handle(event, 120, "stream-1", svc, runner)
    sent = ops(client)
    assert (report.stopped_by, report.claimed, report.succeeded, report.lost) == (NAMED, 2, 2, 0)
    assert runner.seen == list(reversed(ids))  # the queue's order: LIFO, newest first
    assert all(svc.store.get(i).status is TaskStatus.SUCCESS for i in ids)
    # One read of the record; no index query, no read of the slots, no watch: slots taken by a guess and freed.
    assert sent.count("get_item") == 1 and "query" not in sent and "batch_get_item" not in sent
    assert not svc.store.read_wake_record("work").watcher


def test_a_watcher_that_is_not_stopping_has_them(store, clock):
    svc, client = services_on(store, clock)
    svc.store.watch("work", "the-watcher", clock.now_ms() + 5_000, index_looks=True)
    event = stream_event(svc.store, create(svc.store, clock, 2))
    client.requests.clear()
    report = app.handle(event, 120, "stream-1", svc, Runner())
    assert (report.stopped_by, report.claimed) == ("watched", 0)
    assert ops(client) == ["get_item"]
    assert svc.store.depth("work").pending == 2


def test_a_stopping_watcher_leaves_them_to_the_stream_start(store, clock):
    svc, _ = services_on(store, clock)
    watched = svc.store.watch("work", "the-watcher", clock.now_ms() + 5_000, index_looks=True)
    assert svc.store.mark_stopping("work", "the-watcher", watched.seq, clock.now_ms())
    ids = create(svc.store, clock, 1)
    report = app.handle(stream_event(svc.store, ids), 120, "stream-1", svc, Runner())
    assert (report.stopped_by, report.succeeded) == (NAMED, 1)


def test_a_paused_queue_claims_nothing(store, clock):
    svc, _ = services_on(store, clock)
    ids = create(svc.store, clock, 1)
    svc.store.pause("work")
    report = app.handle(stream_event(svc.store, ids), 120, "stream-1", svc, Runner())
    assert (report.stopped_by, report.claimed) == ("paused", 0)


def test_a_busy_queue_gets_the_regular_worker_which_watches(store, clock):
    svc, _ = services_on(store, clock, worker_linger_seconds=0.0)
    svc = dataclasses.replace(svc, arrivals=ArrivalHistory())
    svc.arrivals.note(BUSY_TASKS, clock.monotonic())
    ids = create(svc.store, clock, 2)
    report = app.handle(stream_event(svc.store, ids), 120, "stream-1", svc, Runner())
    assert report.watched and report.succeeded == 2 and report.stopped_by == "empty"


def test_a_record_delivered_twice_runs_its_task_once(store, clock):
    svc, _ = services_on(store, clock)
    ids = create(svc.store, clock, 1)
    event, runner = stream_event(svc.store, ids), Runner()
    first = app.handle(event, 120, "stream-1", svc, runner)
    second = app.handle(event, 120, "stream-2", svc, runner)
    assert (first.succeeded, second.claimed, second.lost) == (1, 0, 1)
    assert runner.seen == ids


def test_with_every_slot_held_the_tasks_are_left_to_the_regular_worker(store, clock):
    svc, _ = services_on(store, clock, running_limit=1)
    [slot] = svc.store.acquire_slots("work", "another-worker", 1)
    ids = create(svc.store, clock, 1)
    starter_report, left = _starter(svc, clock).run_named("work", _named(svc, ids), svc.store.read_wake_record("work"), 120)
    assert left and starter_report.claimed == 0 and starter_report.limited == 1
    assert svc.store.depth("work").pending == 1
    svc.store.free_token(slot)


def test_delayed_tasks_and_other_queues_are_not_named(store, clock):
    svc, _ = services_on(store, clock)
    ready = create(svc.store, clock, 1)
    delayed = create(svc.store, clock, 1, delaySeconds=30)
    call = new_tasks(parse_create_request({"queue": "calls", "payload": {"preferences": {}}}, svc.settings),
                     clock.now_ms(), svc.settings)
    svc.store.put_tasks(call)
    named = _named(svc, ready + delayed + [call[0].task_id])
    assert [c.task_id for c in named] == ready


def test_producers_of_a_stream_started_queue_skip_the_handshake(store, clock):
    svc, client = services_on(store, clock)
    request = parse_create_request({"queue": "work", "count": 2}, svc.settings)
    client.requests.clear()
    summary = create_tasks(request, svc.store, clock.now_ms(), "req-1", svc.handshake)
    assert summary.wakeup == "stream" and summary.created == 2
    assert "get_item" not in ops(client) and "update_item" not in ops(client)  # no read, no touch of the record
    # A delayed task has no stream start: the handshake wakes the queue as before (its worker schedules the wake-up).
    delayed = parse_create_request({"queue": "work", "delaySeconds": 30}, svc.settings)
    assert create_tasks(delayed, svc.store, clock.now_ms(), "req-2", svc.handshake).wakeup != "stream"


def _named(svc: Services, ids: list[str]):
    from taskqueue.work.stream_start import named_tasks

    return named_tasks(stream_event(svc.store, ids)["Records"], svc.settings).get("work", [])


def _starter(svc: Services, clock):
    from taskqueue.work.stream_start import StreamStart

    return StreamStart(svc.store, Runner(), capacity=3, owner="stream", clock=clock)


def test_the_sample_event_claims_and_runs_the_tasks_it_names(store, clock):
    svc, _ = services_on(store, clock)
    event = load_event("process_tasks-stream-insert.json")
    for record in event["Records"]:  # the tasks as the sample's images show them, due now on this clock
        image = dict(record["dynamodb"]["NewImage"], ttl={"N": str(clock.now_ms() // 1000 + 3600)})
        svc.store._db.put_item(TableName=svc.settings.queue_table_name, Item=image)
    runner = Runner()
    report = app.handle(event, 120, "stream-1", svc, runner)
    assert (report.stopped_by, report.succeeded) == (NAMED, 2)
    assert runner.seen == [r["dynamodb"]["Keys"]["taskId"]["S"] for r in reversed(event["Records"])]


def test_a_watcher_that_missed_its_renewal_is_waited_out_then_the_tasks_are_claimed(store, clock):
    # A dead watcher's lease still runs a few seconds: trusted on its word, the tasks would wait for the safety net.
    svc, _ = services_on(store, clock)
    svc.store.watch("work", "dead-watcher", clock.now_ms() + 1_000, index_looks=True)  # less than a live one has left
    ids = create(svc.store, clock, 1)
    slept_from = clock.now_ms()
    report = app.handle(stream_event(svc.store, ids), 120, "stream-1", svc, Runner())
    assert (report.stopped_by, report.succeeded) == (NAMED, 1)
    assert clock.now_ms() - slept_from >= 1_000


def test_a_batch_that_is_no_stream_batch_is_refused_before_any_claim(store, clock):
    from taskqueue.core.errors import InvalidEvent

    svc, client = services_on(store, clock)
    create(svc.store, clock, 1)
    client.requests.clear()
    with pytest.raises(InvalidEvent, match=r"Records\[0\] is not a DynamoDB stream record"):
        app.handle({"Records": [{"eventSource": "aws:dynamodb", "dynamodb": 5}]}, 120, "stream-1", svc, Runner())
    assert client.requests == [] and svc.store.depth("work").pending == 1


def test_a_task_with_a_group_goes_to_fair_shares_look_not_a_claim_by_key(store, clock):
    # Its producer put the group on the ring, and marked the record (hasGroups), before it wrote the task.
    svc, _ = services_on(store, clock, worker_linger_seconds=0.0)
    ids = create(svc.store, clock, 1, group="tenant-a")
    report = app.handle(stream_event(svc.store, ids), 120, "stream-1", svc, Runner())
    assert report.watched and report.succeeded == 1  # the regular worker (it watched the queue), not stopped_by named


def test_a_claim_throttled_past_the_sdks_retries_leaves_the_task_to_the_regular_worker(store, clock):
    # DynamoDB refuses the claim (ProvisionedThroughputExceeded after the SDK's own retries): not applied, the task is
    # still PENDING; the stream start does not end with it stranded, the regular worker (it watches) claims it.
    from tests.faults import on_item

    svc, client = services_on(store, clock, worker_linger_seconds=0.0)
    ids = create(svc.store, clock, 1)
    client.fail("update_item", "ProvisionedThroughputExceededException",
                when=lambda kw: on_item(ids[0])(kw) and ":to" in kw.get("ExpressionAttributeValues", {}))
    report = app.handle(stream_event(svc.store, ids), 120, "stream-1", svc, Runner())
    assert client.raised == [("update_item", "ProvisionedThroughputExceededException")]
    assert report.retried >= 1 and report.watched and report.succeeded == 1
    assert svc.store.get(ids[0]).status is TaskStatus.SUCCESS


def test_a_long_task_keeps_its_running_limit_slot_and_gets_its_lease_marked_while_it_runs(store, clock):
    # The slot's 5 s lease is renewed at half of it, and an unmarked lease is marked 2 s after its claim: both by the
    # run's loop, which must come round within a second (waiting a heartbeat's 50 s, the slot lapsed under the task).
    import threading
    import time

    from taskqueue.store.control import SLOT
    from tests.integration.test_unmarked_leases import lease_mark

    svc, _ = services_on(store, clock, running_limit=1)
    ids = create(svc.store, clock, 1)
    started, release = threading.Event(), threading.Event()

    def runner(task):
        started.set()
        release.wait(10)

    worker = threading.Thread(target=app.handle, args=(stream_event(svc.store, ids), 120, "stream-1", svc, runner))
    worker.start()
    try:
        assert started.wait(5)
        clock.advance(3.5)  # past half the slot's lease, and past the lease mark's 2 s
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            expiry = svc.store._token_expiries(SLOT, "work", 1).get(0, 0)
            if expiry >= clock.now_ms() + 4_000 and lease_mark(svc.store, ids[0]) is not None:
                break
            time.sleep(0.05)
        # Renewed from now (taken 3.5 s ago for 5 s, it had 1.5 s left).
        assert svc.store._token_expiries(SLOT, "work", 1).get(0, 0) >= clock.now_ms() + 4_000
        assert lease_mark(svc.store, ids[0]) is not None
    finally:
        release.set()
        worker.join(10)
    assert svc.store.get(ids[0]).status is TaskStatus.SUCCESS


def test_a_record_whose_image_is_no_task_is_skipped_and_the_others_claimed(store, clock):
    svc, _ = services_on(store, clock)
    ids = create(svc.store, clock, 1)
    event = stream_event(svc.store, ids)
    event["Records"].insert(0, {"eventName": "INSERT", "eventSource": "aws:dynamodb",
                                "dynamodb": {"NewImage": {"taskStatus": {"S": "PENDING"}, "queue": {"S": "work"},
                                                          "readyKey": "not an attribute value"}}})
    report = app.handle(event, 120, "stream-1", svc, Runner())
    assert (report.stopped_by, report.succeeded) == (NAMED, 1)
