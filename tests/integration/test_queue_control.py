"""Queue control in the queue table (taskqueue/store/control.py): pause and running-limit slots, on
both DynamoDB engines (``make test`` runs this module on moto and on DynamoDB Local)."""

from __future__ import annotations

import dataclasses

import pytest

from taskqueue.core.errors import InvalidTaskInput, TaskQueueError
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.store import TaskStore
from taskqueue.work.worker import Worker

pytestmark = pytest.mark.dynamodb_engines


def with_settings(store: TaskStore, **changes) -> TaskStore:
    return TaskStore(store._db, dataclasses.replace(store.settings, **changes), store._clock)


def create(store: TaskStore, clock, count: int = 1) -> None:
    request = parse_create_request({"queue": "work", "count": count}, store.settings)
    store.put_tasks(new_tasks(request, clock.now_ms(), store.settings))


def test_a_paused_queue_is_not_claimed_and_resumes_where_it_was(store, clock):
    create(store, clock, 2)
    assert not store.is_paused("work") and not store.control("work").paused
    store.pause("work")
    assert store.is_paused("work") and not store.is_paused("calls")
    report = Worker(store, lambda task: None, capacity=3, owner="w", clock=clock).run("work", 5)
    assert (report.claimed, report.stopped_by, report.work_remains) == (0, "paused", False)
    assert len(store.candidates("work", 10)) == 2  # the tasks keep their places
    store.resume("work")
    report = Worker(store, lambda task: None, capacity=3, owner="w", clock=clock).run("work", 5)
    assert report.succeeded == 2
    with pytest.raises(InvalidTaskInput, match="not configured"):
        store.pause("nope")


def test_slots_are_taken_only_while_free_and_come_back_when_freed_or_their_invocation_is_over(store, clock):
    store = with_settings(store, running_limit=2, lease_seconds=300)
    until = clock.now_ms() + 180_000  # the taking invocation's end
    first = store.acquire_slots("work", "a", 5, until)
    assert len(first) == 2 and {s.index for s in first} == {0, 1}
    assert store.acquire_slots("work", "b", 1, until) == []
    assert store.control("work").slots_held == 2
    assert store.free_token(first[0])
    assert not store.free_token(first[0])  # freed already: not ours any more
    (again,) = store.acquire_slots("work", "b", 1, until)
    assert again.index == first[0].index
    clock.advance(179)  # still inside the invocation that holds the other one: nobody takes it, however slow it is
    assert store.acquire_slots("work", "c", 1, until) == []
    clock.advance(2)  # past its invocation's end: it died without freeing it
    assert len(store.acquire_slots("work", "c", 1, clock.now_ms() + 180_000)) == 1
    with pytest.raises(InvalidTaskInput, match="no running limit"):
        with_settings(store, running_limit=0).acquire_slots("work", "a", 1, until)


def test_throttled_control_reads_and_writes_slow_a_run_down_but_never_stop_or_unbound_it(store, clock):
    # Throttling past the SDK's retries on control requests: the pause read, a slot's write. The run still does every
    # task, within the limit, and counts each refusal.
    from tests.faults import FaultyClient

    faulty = FaultyClient(store._db)
    throttled = TaskStore(faulty, dataclasses.replace(store.settings, running_limit=2), clock)
    create(throttled, clock, 4)
    faulty.fail("get_item", "ProvisionedThroughputExceededException")  # the run's first pause read
    faulty.fail("update_item", "ThrottlingException", when=lambda r: "#slot#" in r["Key"]["taskId"]["S"])  # a slot taken
    running, most = 0, 0

    def runner(task):
        nonlocal running, most
        running += 1
        most = max(most, running)
        running -= 1

    report = Worker(throttled, runner, capacity=3, owner="w", clock=clock).run("work", 30)
    assert {code for _, code in faulty.raised} == {"ThrottlingException", "ProvisionedThroughputExceededException"}
    assert report.succeeded == 4 and report.stopped_by == "empty", report
    assert report.retried == len(faulty.raised) == 2
    assert throttled.control("work").slots_held == 0 and most <= 2


def test_slots_taken_before_a_refused_slot_write_are_given_back(store, clock):
    from tests.faults import FaultyClient

    faulty = FaultyClient(store._db)
    limited = TaskStore(faulty, dataclasses.replace(store.settings, running_limit=3), clock)
    faulty.fail("update_item", "", "ThrottlingException")  # the first slot write goes through, the second is refused
    with pytest.raises(TaskQueueError):
        limited.acquire_slots("work", "w", 3, clock.now_ms() + 60_000)
    assert limited.control("work").slots_held == 0  # the first slot was freed, not left held for a lease


def test_slots_guessed_before_a_refused_guess_are_given_back(store, clock):
    # A worker started for a stream batch guesses slots before reading them; a guess refused past the SDK's retries
    # must not leave the guesses before it held, unused, until the invocation's end.
    from tests.faults import FaultyClient

    faulty = FaultyClient(store._db)
    limited = TaskStore(faulty, dataclasses.replace(store.settings, running_limit=3), clock)
    faulty.fail("update_item", "", "ThrottlingException")  # the first guess goes through, the second is refused
    with pytest.raises(TaskQueueError):
        limited.acquire_slots("work", "w", 3, clock.now_ms() + 60_000, guess=True)
    assert limited.control("work").slots_held == 0
