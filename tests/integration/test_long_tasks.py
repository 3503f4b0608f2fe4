"""Long tasks against DynamoDB (moto and DynamoDB Local): a task declares how long it may run (``runSeconds``, else
its queue's DEFAULT_RUN_SECONDS); a claim is refused by its own condition when the claiming invocation could not
finish the task, so a worker never claims what it cannot finish and leaves it PENDING for a fresh invocation; a
task longer than the worker's Timeout allows is refused at creation, and dead-lettered if it reaches a worker
anyway; a worker's claim holds a lease at least as long as its Timeout."""

from __future__ import annotations

from typing import Any

import pytest

from taskqueue.client.create import create_tasks
from taskqueue.core.errors import InvalidField, TaskTooLong
from taskqueue.core.model import parse_create_request
from taskqueue.core.run_time import FINISH_RESERVE_SECONDS
from taskqueue.core.settings import Settings
from taskqueue.core.states import TaskStatus
from taskqueue.store import TaskStore
from taskqueue.work.worker import Worker
from tests.conftest import make_settings


def make(store: TaskStore, clock: Any, **body: Any) -> str:
    summary = create_tasks(parse_create_request(body, store.settings), store, clock.now_ms())
    return summary.task_ids[0]


def scan_count(dynamodb: Any, table: str) -> int:
    return dynamodb.scan(TableName=table, Select="COUNT")["Count"]


def test_a_claim_is_refused_for_a_task_the_invocation_cannot_finish_and_the_task_stays_pending(dynamodb, clock):
    store = TaskStore(dynamodb, make_settings(default_run_seconds=60, worker_timeout_seconds=900), clock)
    long_id = make(store, clock, runSeconds=300)
    (candidate,) = store.candidates("work", 10)
    with pytest.raises(TaskTooLong) as refused:
        store.claim(candidate, "w1", run_within=299)
    assert (refused.value.task_id, refused.value.run_seconds) == (long_id, 300)
    task = store.get(long_id)
    assert task.status is TaskStatus.PENDING and task.attempts == 0 and task.lease_owner is None
    claimed = store.claim(candidate, "w1", run_within=300)
    assert claimed is not None and claimed.run_seconds == 300 and claimed.status is TaskStatus.TAKEN


def test_a_task_that_declares_nothing_takes_its_queues_run(dynamodb, clock):
    store = TaskStore(dynamodb, make_settings(default_run_seconds=60), clock)
    make(store, clock)
    (candidate,) = store.candidates("work", 10)
    with pytest.raises(TaskTooLong) as refused:
        store.claim(candidate, "w1", run_within=59.5)
    assert refused.value.run_seconds == 60
    assert store.claim(candidate, "w1", run_within=60) is not None


def test_a_claim_lost_to_another_worker_is_no_refusal_for_its_run(dynamodb, clock):
    store = TaskStore(dynamodb, make_settings(default_run_seconds=60, worker_timeout_seconds=900), clock)
    make(store, clock, runSeconds=300)
    (candidate,) = store.candidates("work", 10)
    assert store.claim(candidate, "w1") is not None
    assert store.claim(candidate, "w2", run_within=10) is None  # taken: a lost race, not "too long"


@pytest.mark.parametrize("remaining", [180, 120, 75, 40, 12])
def test_with_timeout_180_a_worker_claims_only_what_it_can_finish(dynamodb, clock, remaining):
    """Tasks of 150, 100, 60, 30 and 5 s wait; an invocation with ``remaining`` seconds left (Timeout 180) claims,
    one at a time, only those that finish inside it, each run pushing the clock on; the rest stay PENDING and the
    run ends with a tail call for them."""
    settings = make_settings(worker_timeout_seconds=180, default_run_seconds=60, time_budget_seconds=170)
    store = TaskStore(dynamodb, settings, clock)
    runs = {make(store, clock, runSeconds=run): run for run in (150, 100, 60, 30, 5)}
    start = clock.monotonic()
    seen: list[tuple[int, float]] = []

    def runner(task):
        left = remaining - (clock.monotonic() - start)
        seen.append((task.run_seconds, left))
        clock.advance(task.run_seconds)
        return {"ran": task.run_seconds}

    report = Worker(store, runner, capacity=1, owner="w1", clock=clock).run("work", remaining - 11, hold_seconds=remaining)
    assert bool(seen) is (remaining >= 5 + FINISH_RESERVE_SECONDS), seen  # the 5 s task fits whenever 15 s are left
    for run_seconds, left in seen:  # never a claim it cannot finish, with the outcome's reserve kept
        assert run_seconds + FINISH_RESERVE_SECONDS <= left, (run_seconds, left)
    done = {run for run, _ in seen}
    for task_id, run in runs.items():
        assert store.get(task_id).status is (TaskStatus.SUCCESS if run in done else TaskStatus.PENDING)
    left_over = set(runs.values()) - done
    assert report.work_remains is bool(left_over)
    assert report.failed == 0  # nothing here is beyond a fresh invocation


def test_a_task_no_invocation_of_the_worker_can_run_is_dead_lettered_with_what_to_do(dynamodb, clock):
    """Made while ProcessTasks had a 900 s Timeout, which was then lowered to 60 s: no invocation can run it."""
    maker = TaskStore(dynamodb, make_settings(worker_timeout_seconds=900), clock)
    task_id = make(maker, clock, runSeconds=600)
    store = TaskStore(dynamodb, make_settings(worker_timeout_seconds=60, default_run_seconds=30), clock)
    report = Worker(store, lambda task: {}, capacity=1, owner="w1", clock=clock).run("work", 49, hold_seconds=60)
    task = store.get(task_id)
    assert task.status is TaskStatus.FAILURE and report.failed == 1 and report.work_remains is False
    assert "runSeconds (600)" in task.last_error and "ProcessTasksTimeout" in task.last_error


def test_creation_refuses_a_task_longer_than_the_worker_can_run_and_writes_nothing(dynamodb, clock):
    store = TaskStore(dynamodb, make_settings(worker_timeout_seconds=900), clock)
    with pytest.raises(InvalidField, match=r"runSeconds must be a whole number from 1 to 900, got 1200") as twenty:
        parse_create_request({"runSeconds": 1200}, store.settings)  # a 20-minute task: past Lambda's limit
    assert twenty.value.field == "runSeconds"
    with pytest.raises(InvalidField, match=r"runSeconds \(890\).*leaves 885 s.*ProcessTasksTimeout"):
        parse_create_request({"runSeconds": 890}, store.settings)
    short = TaskStore(dynamodb, make_settings(worker_timeout_seconds=180), clock)
    with pytest.raises(InvalidField, match=r"runSeconds \(300\).*WORKER_TIMEOUT_SECONDS=180 s.*leaves 165 s"):
        parse_create_request({"runSeconds": 300}, short.settings)
    assert scan_count(dynamodb, store.settings.queue_table_name) == 0
    five_minutes = make(store, clock, runSeconds=300)
    assert store.get(five_minutes).run_seconds == 300


def test_a_workers_claim_holds_a_lease_of_at_least_its_timeout(dynamodb, clock):
    settings = Settings.from_env({"QUEUE_TABLE_NAME": make_settings().queue_table_name, "LEASE_SECONDS": "300",
                                  "WORKER_TIMEOUT_SECONDS": "900"})
    store = TaskStore(dynamodb, settings, clock)
    make(store, clock, runSeconds=300)
    (candidate,) = store.candidates("work", 10)
    task = store.claim(candidate, "w1", run_within=890)
    assert task is not None and task.lease_expires_ms == clock.now_ms() + 900_000
