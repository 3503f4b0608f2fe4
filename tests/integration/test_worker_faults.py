"""The worker when AWS is harsh: errors recording an outcome, results too large for an item, leases that
must outlive long tasks, stale index entries, retries that fall due while it waits."""

import random
import threading
import time
from typing import Any

import pytest

from taskqueue.core.clock import SystemClock
from taskqueue.core.errors import ConfigError
from taskqueue.core.model import MAX_RESULT_BYTES, new_tasks, parse_create_request
from taskqueue.core.states import TaskStatus
from taskqueue.store import TaskStore
from taskqueue.work.lease import LeaseLost, extend_lease
from taskqueue.work.outcomes import RECORD_ATTEMPTS, Outcomes
from taskqueue.work.worker import IDLE_POLL_SECONDS, Worker
from tests.conftest import make_settings
from tests.faults import FaultyClient, on_item, on_tasks
from tests.serialized_moto import SerializedMoto
from tests.support import create_queue_table


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
        # The completion is throttled past botocore's retries, every time the worker tries (the task's own item:
        # the worker's loop renews its watch on the queue's record meanwhile, and took one of the faults once).
        client.fail("update_item", *["ThrottlingException"] * RECORD_ATTEMPTS, when=on_item(task.task_id))
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
        client.fail("update_item", *["ProvisionedThroughputExceededException"] * (RECORD_ATTEMPTS - 1),
                    when=on_item(task.task_id))
        return {"ok": True}

    report = worker(store, runner, clock).run("work", 5)
    assert (report.succeeded, report.errors) == (1, 0) and runs == [task_id]
    assert store.get(task_id).status is TaskStatus.SUCCESS


@pytest.mark.moto_only("runs against the serialized moto server: renewal, completion and recovery race")
def test_the_heartbeat_keeps_a_task_longer_than_its_lease_from_being_recovered():
    # Three threads write the same item at once (heartbeat, completion, another worker's recovery): only the
    # serialized server is atomic under that, as DynamoDB is (in-process moto is not).
    clock = SystemClock()
    with SerializedMoto() as server:
        client = server.client()
        create_queue_table(client, "heartbeat-table")
        store = TaskStore(client, make_settings(queue_table_name="heartbeat-table", lease_seconds=1), clock)
        heartbeat_run(store, clock)


def heartbeat_run(store: TaskStore, clock) -> None:
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
        seen["expires"], seen["at"] = store.get(task.task_id).lease_expires_ms, clock.now_ms()
        return None

    worker(store, runner, clock).run("work", 5)
    # Measured from when the runner extended it: the run goes on after (its stop takes the index's lag allowance).
    assert seen["expires"] == seen["at"] + 3_600_000
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

        def look(self, queue, limit, now_ms=None, **reads):  # a worker's look (**reads: delayed=, shards=, skip=)
            StaleIndex.reads += 1
            assert StaleIndex.reads < 1000, "the worker spins on entries it cannot claim"
            return super().look(queue, limit, now_ms, **reads)

        def claim(self, candidate, owner, now_ms=None, **bounds):
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


def test_throttled_reads_and_claims_slow_the_run_down_and_fail_nothing(dynamodb, settings, clock, caplog):
    """A read or a claim refused past botocore's retries is logged, counted and tried again after a pause: the
    invocation does not fail (a failed one would tail-call nobody and strand the queue until the safety net)."""
    client = FaultyClient(dynamodb)
    store = TaskStore(client, settings, clock)
    ids = create(store, clock, 3)
    client.fail("query", "ThrottlingException", "ProvisionedThroughputExceededException")  # the first two looks
    client.fail("update_item", "ThrottlingException", when=on_tasks)  # the first claim
    report = worker(store, lambda task: {"ok": True}, clock).run("work", 30)
    assert report.succeeded == 3 and report.errors == 0
    assert report.retried == 3 and len(client.raised) == 3
    assert {store.get(i).status for i in ids} == {TaskStatus.SUCCESS}
    messages = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    for what in ("reading the queue", "claiming a task"):
        assert f"{what} was refused for now; trying again" in messages, messages


def test_a_throttled_check_for_work_left_tail_calls_rather_than_strand_work(dynamodb, settings, clock):
    client = FaultyClient(dynamodb)

    class ThrottledAtTheEnd(TaskStore):
        def has_claimable(self, queue, now_ms=None, **reads):  # **reads: the worker passes delayed= (issue 21: the delayed partitions read only when due)
            client.fail("query", "ThrottlingException")
            return super().has_claimable(queue, now_ms, **reads)

    store = ThrottledAtTheEnd(client, settings, clock)
    create(store, clock)
    # The task outlasts the budget: the run ends there and asks whether work is left, which DynamoDB refuses.
    report = worker(store, lambda task: clock.advance(2), clock).run("work", 1)
    assert report.stopped_by == "budget" and report.work_remains is True and report.retried == 1


def test_a_refused_read_that_is_not_throttling_still_fails_the_run(dynamodb, settings, clock):
    client = FaultyClient(dynamodb)
    store = TaskStore(client, settings, clock)
    create(store, clock)
    client.fail("query", "ValidationException")
    with pytest.raises(Exception, match="rejected a request"):
        worker(store, lambda task: None, clock).run("work", 5)


def test_a_failed_renewal_while_recording_is_logged_and_counted(store, clock, caplog):
    """While the worker waits to record a throttled outcome it renews the lease; a renewal refused in turn is
    logged and counted, not dropped (the write that follows tells whether the lease still holds)."""
    from collections import Counter

    from taskqueue.store import StoreError

    def throttled(what: str) -> StoreError:
        error = StoreError(f"DynamoDB is throttling {what}")
        error.retryable = True  # as taskqueue.store.dynamo.translate marks it
        return error

    class DueLease:
        lost = False
        task = type("T", (), {"task_id": "t-1"})()

        def due(self) -> bool:
            return True

        def renew(self, seconds=None) -> bool:
            raise throttled("the renewal")

    writes = iter([throttled("the completion"), True])

    def write():
        outcome = next(writes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    counts: Counter[str] = Counter()
    outcomes = Outcomes(
        store, lambda task: None, "worker-1", clock, random.Random(1),
        count=lambda name: counts.update([name]), released=lambda task_id, not_before_ms: None,
    )
    assert outcomes.record(DueLease(), write) is True
    assert counts["retried"] == 2  # the refused write, and the refused renewal
    messages = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "recording the outcome was refused for now; trying again" in messages
    assert "lease renewal failed while recording the outcome; trying the write again" in messages


def test_entries_the_index_still_shows_after_a_claim_are_skipped_not_claimed_again(store, clock):
    """A GSI shows writes late: right after a claim the task still looks PENDING there. The worker passes over
    the entries it has just claimed (or lost) instead of spending a failed conditional write on each."""
    ids = create(store, clock, 2)

    class LaggingIndex(TaskStore):
        """Answers every read with the index as it was before any claim (stale entries included)."""

        first: list = []
        claims: list[str] = []

        def look(self, queue, limit, now_ms=None, *, skip=(), **reads):  # a worker's look (**reads: delayed=, shards=)
            if not LaggingIndex.first:
                LaggingIndex.first = super().look(queue, limit, now_ms, **reads)[0]
            shown = [c for c in LaggingIndex.first if c.task_id not in skip]
            return shown, len(LaggingIndex.first) - len(shown)

        def claim(self, candidate, owner, now_ms=None, **bounds):
            LaggingIndex.claims.append(candidate.task_id)
            return super().claim(candidate, owner, now_ms, **bounds)

    lagging = LaggingIndex(store._db, store.settings, clock)
    # Each claim comes from a look of the lagging index.
    report = worker(lagging, lambda task: clock.advance(0.25), clock, capacity=1).run("work", 1)
    assert sorted(LaggingIndex.claims) == sorted(ids)  # each entry claimed once, never again while stale
    assert report.succeeded == 2 and report.lost == 0 and report.skipped > 0
