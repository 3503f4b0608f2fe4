"""The seams between the ways work starts: each test reproduces a way a task was stranded, ran past a limit, or waited
for the safety net when several paths started or woke workers, on both DynamoDB engines."""

from __future__ import annotations

import threading

import pytest

from taskqueue.core.model import from_item
from taskqueue.core.states import TaskStatus
from taskqueue.services import Services
from taskqueue.store import TaskStore
from taskqueue.store.table import candidate_of
from tests.faults import FaultyClient
from tests.integration.test_delayed_head import create, recorded
from tests.support import load_function

pytestmark = pytest.mark.dynamodb_engines

app = load_function("process_tasks")


def item_of(store: TaskStore, task_id: str) -> dict:
    return store._db.get_item(TableName=store.settings.queue_table_name, Key={"taskId": {"S": task_id}},
                              ConsistentRead=True)["Item"]


def candidate(image: dict):
    partition = image["readyKey"]["S"]
    return candidate_of(image, image["queue"]["S"], int(partition.split("#")[1]))


def insert_batch(images: list[dict]) -> dict:
    """The TaskStream batch Lambda delivers for these INSERT images (as they were written)."""
    return {"Records": [
        {"eventID": str(n), "eventName": "INSERT", "eventSource": "aws:dynamodb",
         "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/queue/stream/2026",
         "dynamodb": {"Keys": {"taskId": image["taskId"]}, "NewImage": image, "SequenceNumber": str(100 + n),
                      "StreamViewType": "NEW_AND_OLD_IMAGES"}}
        for n, image in enumerate(images)]}


def services_on(store: TaskStore, clock, **changes) -> Services:
    worker_store, _ = recorded(store, **changes)
    return Services(worker_store.settings, worker_store, None, clock)  # type: ignore[arg-type]


class Killed(BaseException):
    """The runner's process died (an OOM, a Timeout): nothing of the attempt is recorded."""


def test_a_stale_insert_image_never_claims_a_task_out_of_its_delayed_partition(store, clock):
    """A retried or late stream batch names a task that has since been claimed, failed and released with a backoff.
    Before: once the backoff passed, the batch's claim succeeded with the entry left in the delayed partition; when
    that run died, no lease recovery ever found the task (TAKEN for good, and every run tail-called for it)."""
    svc = services_on(store, clock)
    [task_id] = create(svc.store, clock)
    stale_image = item_of(svc.store, task_id)
    # A worker claims it, the attempt fails, it is released for a retry 1 s later (the delayed partition).
    task = svc.store.claim(candidate(stale_image), "first-worker")
    assert task is not None and svc.store.release(task, "first-worker", not_before_ms=clock.now_ms() + 1_000, error="boom")
    clock.advance(2)  # the backoff passed; the stale batch arrives now

    def dies(task):
        raise Killed()

    app.handle(insert_batch([stale_image]), 120, "stream-late", svc, dies)
    clock.advance(svc.settings.lease_seconds + 1)  # whoever claimed it is long dead
    svc.store.recover_expired_leases("work")  # the safety net's recovery
    now = from_item(item_of(svc.store, task_id))
    assert now.status is not TaskStatus.TAKEN or (now.lease_expires_ms or 0) > clock.now_ms(), (
        f"stranded: {now.status} with its lease passed {clock.now_ms() - (now.lease_expires_ms or 0)} ms ago")


def test_a_new_task_is_claimed_by_its_own_stream_start_whoever_else_runs(store, clock):
    """Before: a stream start that found a live watcher in the queue's record ended, leaving its task to that watcher;
    a watcher that died a moment later left the task to the safety net (a minute, plus a start)."""
    svc = services_on(store, clock)
    # Before, another worker running said so in the queue's record, and the stream start left the tasks to it.
    ids = create(svc.store, clock, 2)
    runner_saw: list[str] = []
    report = app.handle(insert_batch([item_of(svc.store, i) for i in ids]), 120, "stream-1", svc, runner_saw.append)
    assert report.claimed == 2, report
    assert sorted(t.task_id for t in runner_saw) == sorted(ids)


def test_a_retry_due_as_the_run_ends_is_run_or_scheduled_not_left_to_the_safety_net(store, clock):
    """Before: a stream start whose task failed (released with a 0-2 s backoff) ended without a look, a wait or a
    scheduled wake-up: the retry waited for the safety net."""
    svc = services_on(store, clock, retry_base_seconds=1.0, retry_max_seconds=1.0)
    [task_id] = create(svc.store, clock)
    attempts: list[int] = []

    def flaky(task):
        attempts.append(task.attempts)
        if len(attempts) == 1:
            raise RuntimeError("a passing failure")

    report = app.handle(insert_batch([item_of(svc.store, task_id)]), 120, "stream-1", svc, flaky)
    done = svc.store.get(task_id).status is TaskStatus.SUCCESS
    assert done or report.work_remains, (attempts, report)


def test_a_slow_request_never_lets_another_worker_take_a_running_tasks_slot(store, clock):
    """Before: running-limit slots lived on 5 s leases renewed by the claim loop; one slow request (the SDK's retries,
    a 60 s read timeout) let them lapse while their tasks ran, and another worker took them: the limit was exceeded."""
    svc = services_on(store, clock, running_limit=1)
    [task_id] = create(svc.store, clock)
    taken_by_another: list[int] = []
    released = threading.Event()

    def slow_while_running(task):
        clock.advance(30)  # the worker's own requests hang meanwhile (a slow request); its task still runs
        taken_by_another.append(len(svc.store.acquire_slots("work", "another-worker", 1, clock.now_ms() + 60_000)))
        released.set()

    app.handle(insert_batch([item_of(svc.store, task_id)]), 170, "stream-1", svc, slow_while_running)
    assert released.is_set() and taken_by_another == [0], taken_by_another


def test_a_running_stream_start_stops_claiming_once_its_queue_is_paused(store, clock):
    """Before: a stream start claimed every task its batch named, whatever ``taskq pause`` said meanwhile."""
    svc = services_on(store, clock, runner_capacity=1)
    ids = create(svc.store, clock, 3)
    ran: list[str] = []

    def pauses_then_runs(task):
        ran.append(task.task_id)
        svc.store.pause("work")
        clock.advance(5)

    app.handle(insert_batch([item_of(svc.store, i) for i in ids]), 120, "stream-1", svc, pauses_then_runs)
    assert len(ran) == 1, ran
    assert svc.store.depth("work").pending == 2


def test_a_failed_request_on_a_stream_start_is_counted_and_the_rest_left_claimable(store, clock):
    """A claim DynamoDB refuses past the SDK's retries: the task stays claimable and the run says work remains."""
    worker_store, client = recorded(store)
    svc = Services(worker_store.settings, worker_store, None, clock)  # type: ignore[arg-type]
    ids = create(svc.store, clock, 1)
    assert isinstance(client, FaultyClient)
    client.fail("update_item", "ThrottlingException", when=lambda r: r.get("Key", {}).get("taskId", {}).get("S") == ids[0])
    report = app.handle(insert_batch([item_of(svc.store, ids[0])]), 120, "stream-1", svc, lambda task: None)
    assert svc.store.get(ids[0]).status in (TaskStatus.PENDING, TaskStatus.SUCCESS)
    assert report.work_remains or svc.store.get(ids[0]).status is TaskStatus.SUCCESS
