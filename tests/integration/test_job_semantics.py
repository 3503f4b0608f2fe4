"""Job-system rules end to end through Worker and the store against moto, with the injected FakeClock.

Complements tests/integration/test_store.py (single store calls) and the handler tests: here each rule is
exercised the way a worker meets it (recover, claim, run, finish/release)."""

import random
import threading
from typing import Any

import pytest

from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.states import TaskStatus
from taskqueue.store import TaskStore
from taskqueue.work.outcomes import backoff_ms
from taskqueue.work.worker import Worker
from tests.conftest import make_settings
from tests.support import load_function

trigger_app = load_function("trigger")


def create(store: TaskStore, clock, **body: Any) -> str:
    tasks = new_tasks(parse_create_request(body, store.settings), clock.now_ms(), store.settings)
    store.put_tasks(tasks, idempotent="taskIds" in body)
    return tasks[0].task_id


class Runner:
    def __init__(self, outcomes: list | None = None) -> None:
        self.seen: list[str] = []
        self._outcomes = list(outcomes or [])
        self._lock = threading.Lock()

    def __call__(self, task):
        with self._lock:
            self.seen.append(task.task_id)
            outcome = self._outcomes.pop(0) if self._outcomes else None
        if isinstance(outcome, Exception):
            raise outcome
        return {"done": task.task_id}


def worker(store, clock, runner, owner="w1", capacity=1, seed=0) -> Worker:
    return Worker(store, runner, capacity=capacity, owner=owner, clock=clock, rng=random.Random(seed))


def test_expired_lease_is_recovered_by_the_next_worker_and_completed_once(store, clock):
    task_id = create(store, clock)
    # Worker 1 claims and "dies": it never finishes.
    dead = store.claim(store.candidates("work", 1)[0], "w1")
    runner = Runner()
    # Before the lease passes, worker 2 finds nothing to do and recovers nothing.
    report = worker(store, clock, runner, owner="w2").run("work", 5)
    assert (report.recovered, report.claimed) == (0, 0)
    clock.advance(store.settings.lease_seconds + 1)
    report = worker(store, clock, runner, owner="w2").run("work", 5)
    assert (report.recovered, report.claimed, report.succeeded) == (1, 1, 1)
    assert runner.seen == [task_id]
    done = store.get(task_id)
    assert done.status is TaskStatus.SUCCESS and done.attempts == 2 and done.result == {"done": task_id}
    # The dead worker wakes up late: its lease is gone, every finish is refused.
    assert store.complete(dead, "w1") is False
    assert store.fail(dead, "w1", "late") is False
    assert store.release(dead, "w1") is False
    assert store.get(task_id).status is TaskStatus.SUCCESS


def test_transient_failure_backs_off_within_bounds_and_the_claim_respects_it(dynamodb, topics, clock):
    store = TaskStore(dynamodb, make_settings(topics, retry_base_seconds=10.0, retry_max_seconds=60.0), clock)
    task_id = create(store, clock, maxAttempts=5)
    # A claim window shorter than the backoff: the worker stops before the retry falls due (a retry due
    # inside the window is waited for: see test_process_tasks_handler).
    report = worker(store, clock, Runner([RuntimeError("legacy busy")]), seed=7).run("work", 0.5)
    assert report.released == 1
    task = store.get(task_id)
    # From the release (the run goes on after it: at its budget's end it waits the index's lag allowance before it
    # looks for work left, issue 29).
    expected = task.updated_ms + backoff_ms(1, 10.0, 60.0, random.Random(7))
    assert task.status is TaskStatus.PENDING and task.not_before_ms == expected
    assert task.updated_ms <= task.not_before_ms <= task.updated_ms + 10_000
    assert task.last_error == "RuntimeError: legacy busy"
    if task.not_before_ms > clock.now_ms():
        assert store.candidates("work", 1) == []
        assert store.peek("work") is None
    clock.advance((task.not_before_ms - clock.now_ms()) / 1000)
    assert [c.task_id for c in store.candidates("work", 1)] == [task_id]


def test_max_attempts_then_failure_with_the_last_error_findable_by_index(store, clock):
    task_id = create(store, clock, maxAttempts=3)
    errors = [RuntimeError(f"attempt {n}") for n in (1, 2, 3)]
    runner = Runner(errors)
    report = worker(store, clock, runner).run("work", 5)
    assert runner.seen == [task_id] * 3
    assert (report.released, report.failed) == (2, 1)
    dead = store.get(task_id)
    assert dead.status is TaskStatus.FAILURE and dead.attempts == 3
    assert dead.last_error == "attempts exhausted (3); last error RuntimeError: attempt 3"
    assert store.dead_letters("work") == [task_id]
    assert [t.task_id for t in store.list_tasks("work", "FAILURE").tasks] == [task_id]


def test_priority_before_order_in_both_orders(store, clock):
    ids: dict[str, list[str]] = {"work": [], "calls": []}
    for priority in (0, 7, 0, 7):
        for queue in ids:
            ids[queue].append(create(store, clock, queue=queue, priority=priority))
        clock.advance(1)
    lifo, fifo = Runner(), Runner()
    worker(store, clock, lifo).run("work", 5)
    worker(store, clock, fifo).run("calls", 5)
    w, c = ids["work"], ids["calls"]
    assert lifo.seen == [w[3], w[1], w[2], w[0]]  # priority 7 newest first, then priority 0 newest first
    assert fifo.seen == [c[1], c[3], c[0], c[2]]  # priority 7 oldest first, then priority 0 oldest first


def test_delayed_task_waits_for_its_time_even_ahead_of_older_work(store, clock):
    later = create(store, clock, delaySeconds=60, priority=9)
    now = create(store, clock)
    runner = Runner()
    worker(store, clock, runner).run("work", 5)
    assert runner.seen == [now]
    clock.advance(60)
    worker(store, clock, runner).run("work", 5)
    assert runner.seen == [now, later]


def test_idempotent_create_through_the_handler(services, clock):
    app = load_function("create_tasks")
    first = app.handle({"taskIds": ["invoice-7"], "priority": 4}, services)
    again = app.handle({"taskIds": ["invoice-7"], "priority": 1}, services)
    assert (first["created"], again["created"], again["alreadyExisted"]) == (1, 0, 1)
    assert services.store.get("invoice-7").priority == 4
    worker(services.store, clock, Runner()).run("work", 5)
    app.handle({"taskIds": ["invoice-7"]}, services)  # finished tasks are not recreated either
    assert services.store.get("invoice-7").status is TaskStatus.SUCCESS


def test_redriven_task_runs_again_with_fresh_attempts(store, clock):
    task_id = create(store, clock, maxAttempts=1)
    worker(store, clock, Runner([RuntimeError("bad input")])).run("work", 5)
    assert store.get(task_id).status is TaskStatus.FAILURE
    store.redrive(task_id)
    runner = Runner()
    report = worker(store, clock, runner).run("work", 5)
    assert runner.seen == [task_id] and report.succeeded == 1
    done = store.get(task_id)
    assert done.status is TaskStatus.SUCCESS and done.attempts == 1


def test_cancelled_task_is_never_run(store, clock):
    keep = create(store, clock)
    drop = create(store, clock)
    store.cancel(drop)
    runner = Runner()
    worker(store, clock, runner).run("work", 5)
    assert runner.seen == [keep] and store.get(drop).status is TaskStatus.CANCELLED


def test_safety_net_recovers_expired_leases_itself_and_wakes_the_queue(services, clock, topics):
    store = services.store
    back = create(store, clock, maxAttempts=3)
    store.claim(store.candidates("work", 1)[0], "crashed-1")
    clock.advance(1)
    dead = create(store, clock, maxAttempts=1)
    store.claim(store.candidates("work", 1)[0], "crashed-2")
    clock.advance(store.settings.lease_seconds + 1)
    result = trigger_app.handle_safety_net(services)
    assert result == {"woken": ["work"]}
    assert topics.wakeups() == ["work"]
    assert store.get(back).status is TaskStatus.PENDING
    failed = store.get(dead)
    assert failed.status is TaskStatus.FAILURE and "lease of crashed-2 expired" in failed.last_error
    assert store.expired_leases("work") == []
    # Nothing left to do: the next tick wakes nobody.
    worker(store, clock, Runner()).run("work", 5)
    assert trigger_app.handle_safety_net(services) == {"woken": []}


@pytest.mark.parametrize("lease_left", [1, 0])
def test_lease_boundary_owner_may_finish_only_while_the_lease_holds(store, clock, lease_left):
    create(store, clock)
    task = store.claim(store.candidates("work", 1)[0], "w1")
    clock.advance(store.settings.lease_seconds - lease_left)
    assert store.complete(task, "w1") is bool(lease_left)



def test_dead_letters_are_kept_for_the_dead_letter_retention_and_successes_for_the_retention(store, clock):
    """What failed on Friday is still there on Monday: FAILURE and CANCELLED tasks get deleteAt = now +
    DEAD_LETTER_RETENTION_SECONDS (14 days), SUCCESS and SHED keep RETENTION_SECONDS (1 day)."""
    settings = store.settings
    assert (settings.retention_seconds, settings.dead_letter_retention_seconds) == (86400, 14 * 86400)
    day, fortnight = 86400, 14 * 86400

    def claimed(**body: Any):
        task_id = create(store, clock, **body)
        (candidate,) = [c for c in store.candidates("work", 100) if c.task_id == task_id]
        return store.claim(candidate, "w1")

    failed, succeeded = claimed(), claimed()
    assert store.fail(failed, "w1", "legacy down") and store.complete(succeeded, "w1")
    cancelled = create(store, clock)
    store.cancel(cancelled)
    now_s = clock.now_ms() // 1000
    assert store.get(failed.task_id).delete_at == now_s + fortnight
    assert store.get(cancelled).delete_at == now_s + fortnight
    assert store.get(succeeded.task_id).delete_at == now_s + day
    # Shed by a reader: not a dead letter.
    shed = create(store, clock, ttlSeconds=5)
    clock.advance(6)
    assert store.candidates("work", 10) == [] and store.get(shed).status is TaskStatus.SHED
    assert store.get(shed).delete_at == clock.now_ms() // 1000 + day
    # A lease that passes on the task's last attempt: the recovery dead-letters it, kept as long.
    last = claimed(maxAttempts=1)
    clock.advance(settings.lease_seconds + 1)
    assert store.recover_lease(last.task_id, None) is TaskStatus.FAILURE
    assert store.get(last.task_id).delete_at == clock.now_ms() // 1000 + fortnight
    # Listed and redriven as before (taskq list --state FAILURE / CANCELLED, taskq redrive).
    assert set(store.dead_letters("work")) == {failed.task_id, last.task_id}
    assert store.dead_letters("work", TaskStatus.CANCELLED) == [cancelled]
    assert store.redrive(cancelled).status is TaskStatus.PENDING
