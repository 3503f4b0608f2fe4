"""The worker when AWS is harsh: errors recording an outcome, results too large for an item, leases that
must outlive long tasks, stale index entries, retries that fall due while it waits."""

import threading
import time
from typing import Any

import pytest

from taskqueue.clock import SystemClock
from taskqueue.errors import ConfigError
from taskqueue.lease import LeaseLost, extend_lease
from taskqueue.model import MAX_RESULT_BYTES, new_tasks, parse_create_request
from taskqueue.states import TaskStatus
from taskqueue.store import TaskStore
from taskqueue.worker import IDLE_POLL_SECONDS, RECORD_ATTEMPTS, Worker
from tests.conftest import make_settings
from tests.faults import FaultyClient


def create(store: TaskStore, clock, n: int = 1, **body: Any) -> list[str]:
    tasks = new_tasks(parse_create_request({"count": n, **body}, store.settings), clock.now_ms(), store.settings)
    store.put_tasks(tasks)
    return [t.task_id for t in tasks]


def worker(store: TaskStore, runner, clock, capacity: int = 1) -> Worker:
    return Worker(store, runner, capacity=capacity, owner="worker-1", clock=clock)


def test_an_oversized_result_is_recorded_as_a_failure_naming_the_limit(store, clock):
    (task_id,) = create(store, clock)
    report = worker(store, lambda task: {"blob": "x" * 250_000}, clock).run("work", 5)
    task = store.get(task_id)
    # DynamoDB would refuse the update (item over 400 KB) and the result would be lost with the task TAKEN.
    assert task.status is TaskStatus.FAILURE and task.result is None
    assert f"over the limit of {MAX_RESULT_BYTES} bytes (MAX_RESULT_BYTES" in task.last_error
    assert (report.failed, report.succeeded, report.errors) == (1, 0, 0)


def test_an_error_recording_the_outcome_is_logged_and_counted_not_dropped(dynamodb, settings, clock, caplog):
    client = FaultyClient(dynamodb)
    store = TaskStore(client, settings, clock)
    (task_id,) = create(store, clock)

    def runner(task):
        # The completion is throttled past botocore's retries, every time the worker tries.
        client.fail("update_item", *["ThrottlingException"] * RECORD_ATTEMPTS)
        return {"ok": True}

    report = worker(store, runner, clock).run("work", 5)
    assert (report.claimed, report.succeeded, report.errors) == (1, 0, 1)
    assert store.get(task_id).status is TaskStatus.TAKEN  # recovered once its lease expires
    (record,) = [r for r in caplog.records if "could not record the task's outcome" in r.getMessage()]
    assert record.levelname == "ERROR" and "ThrottlingException" in str(record.__dict__.get("error"))


def test_a_throttled_completion_is_recorded_later_not_run_twice(dynamodb, settings, clock):
    client = FaultyClient(dynamodb)
    store = TaskStore(client, settings, clock)
    (task_id,) = create(store, clock)
    runs: list[str] = []

    def runner(task):
        runs.append(task.task_id)
        client.fail("update_item", *["ProvisionedThroughputExceededException"] * (RECORD_ATTEMPTS - 1))
        return {"ok": True}

    report = worker(store, runner, clock).run("work", 5)
    assert (report.succeeded, report.errors) == (1, 0) and runs == [task_id]
    assert store.get(task_id).status is TaskStatus.SUCCESS


def test_the_heartbeat_keeps_a_task_longer_than_its_lease_from_being_recovered(dynamodb, topics):
    clock = SystemClock()
    store = TaskStore(dynamodb, make_settings(topics, lease_seconds=1), clock)
    (task_id,) = create(store, clock)
    started, done = threading.Event(), threading.Event()
    recovered: list[dict[str, int]] = []

    def runner(task):
        started.set()
        time.sleep(2.5)  # the work itself: two and a half leases
        return {"ok": True}

    def recoverer():  # another worker's lease recovery, running all the while
        started.wait(5)
        while not done.is_set():
            recovered.append(store.recover_expired_leases("work"))
            time.sleep(0.1)

    thread = threading.Thread(target=recoverer)
    thread.start()
    try:
        report = worker(store, runner, clock).run("work", 0.5)
    finally:
        done.set()
        thread.join()
    task = store.get(task_id)
    assert task.status is TaskStatus.SUCCESS and task.attempts == 1
    assert report.leases_renewed >= 2 and report.lost == 0
    assert recovered and all(sum(r.values()) == 0 for r in recovered)


def test_a_runner_can_extend_its_own_lease_and_learns_when_it_is_lost(store, clock):
    (task_id,) = create(store, clock)
    seen: dict[str, Any] = {}

    def runner(task):
        extend_lease(3600)
        seen["expires"] = store.get(task.task_id).lease_expires_ms
        return None

    worker(store, runner, clock).run("work", 5)
    assert seen["expires"] == clock.now_ms() + 3_600_000
    assert store.get(task_id).status is TaskStatus.SUCCESS

    create(store, clock)

    def late_runner(task):
        clock.advance(store.settings.lease_seconds + 1)
        store.recover_expired_leases("work")  # someone else recovered it meanwhile
        extend_lease(60)

    report = worker(store, late_runner, clock).run("work", 5)
    assert report.succeeded == 0 and report.lost == 1
    with pytest.raises(RuntimeError, match="for task runners"):
        extend_lease(10)
    assert issubclass(LeaseLost, Exception)


def test_a_lease_shorter_than_what_an_invocation_can_hold_is_refused_before_any_claim(store, clock):
    (task_id,) = create(store, clock)
    with pytest.raises(ConfigError, match="LEASE_SECONDS=300 is shorter than this invocation can hold a task"):
        worker(store, lambda task: None, clock).run("work", 5, hold_seconds=900)
    assert store.get(task_id).status is TaskStatus.PENDING


def test_a_round_of_lost_claims_pauses_instead_of_spinning(store, clock):
    create(store, clock)

    class StaleIndex(TaskStore):
        reads = 0

        def candidates(self, queue, limit, now_ms=None, *, shed=True):
            StaleIndex.reads += 1
            assert StaleIndex.reads < 1000, "the worker spins on entries it cannot claim"
            return super().candidates(queue, limit, now_ms, shed=shed)

        def claim(self, candidate, owner, now_ms=None):
            return None  # the index still shows an entry another worker claimed

    stale = StaleIndex(store._db, store.settings, clock)
    report = worker(stale, lambda task: None, clock).run("work", 2)
    assert report.stopped_by == "budget" and report.claimed == 0
    assert StaleIndex.reads <= 2 / 0.1 + 2  # one read per pause of at least 0.1 s


def test_waiting_for_a_retry_looks_for_new_arrivals_every_poll_interval(store, clock):
    create(store, clock)
    task = store.claim(store.candidates("work", 1)[0], "worker-1")
    assert store.release(task, "worker-1", not_before_ms=clock.now_ms() + 30_000)
    sleeps: list[float] = []
    real_sleep = clock.sleep

    def recording_sleep(seconds: float) -> None:
        sleeps.append(seconds)
        real_sleep(seconds)

    clock.sleep = recording_sleep
    report = worker(store, lambda t: None, clock).run("work", 60)
    assert report.succeeded == 1
    assert sleeps and max(sleeps) <= IDLE_POLL_SECONDS
