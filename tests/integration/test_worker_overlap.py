"""A worker's runner is not idle while an outcome is written: the next task starts as the last one's runner returns,
and the run still waits for every outcome (a failed attempt's release among them) before it ends."""

from __future__ import annotations

import dataclasses
import threading

from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.states import TaskStatus
from taskqueue.store import TaskStore
from taskqueue.work.worker import Worker


def create(store: TaskStore, clock, count: int) -> list[str]:
    tasks = new_tasks(parse_create_request({"queue": "work", "count": count}, store.settings), clock.now_ms(), store.settings)
    store.put_tasks(tasks)
    return [t.task_id for t in tasks]


def test_the_next_task_starts_while_the_last_ones_outcome_is_written(store, clock):
    ids = create(store, clock, 2)
    started: list[str] = []
    second_started = threading.Event()
    seen_while_recording: list[bool] = []

    def runner(task):
        started.append(task.task_id)
        if len(started) == 2:
            second_started.set()

    write = store.complete

    def complete(task, owner, outcome=None):
        if task.task_id == started[0]:
            # The first outcome's write waits (up to 5 s) for the second task to start: it starts only if the run's
            # one slot came free as the first runner returned, not once this write is done.
            seen_while_recording.append(second_started.wait(timeout=5))
        return write(task, owner, outcome)

    store.complete = complete
    report = Worker(store, runner, capacity=1, owner="w", clock=clock).run("work", 60)
    assert seen_while_recording == [True]
    assert report.succeeded == 2 and sorted(started) == sorted(ids)
    assert {store.get(i).status for i in ids} == {TaskStatus.SUCCESS}


def test_a_release_written_after_the_runner_returned_is_still_retried_by_the_same_run(store, clock):
    """The slot frees before the release is written; the run must not take the queue for empty meanwhile (no linger:
    an empty look would end the run at once)."""
    store = TaskStore(store._db, dataclasses.replace(store.settings, worker_linger_seconds=0), clock)
    (task_id,) = create(store, clock, 1)
    attempts: list[int] = []

    def runner(task):
        attempts.append(task.attempts)
        if len(attempts) == 1:
            raise RuntimeError("a passing failure")

    release = store.release
    done = threading.Event()

    def slow_release(*args, **kwargs):
        done.wait(timeout=0.3)  # the write takes a while: the claim loop looks meanwhile and finds nothing
        return release(*args, **kwargs)

    store.release = slow_release
    report = Worker(store, runner, capacity=1, owner="w", clock=clock).run("work", 60)
    assert attempts == [1, 2]
    assert (report.released, report.succeeded) == (1, 1)
    assert store.get(task_id).status is TaskStatus.SUCCESS


def test_slots_that_free_together_take_one_look_and_a_look_goes_stale_after_leftover_seconds(store, clock):
    """Tasks started together end together: the first freed slot's look also serves the next freed slots, its
    candidates not claimed yet, while LEFTOVER_SECONDS of it last (one look, not one a slot, one after another); once
    they have passed, the next claim looks again and sees what was written since."""
    from taskqueue.work.worker import LEFTOVER_SECONDS

    create(store, clock, 9)
    looks: list[int] = []
    real_look = store.look

    def look(queue, limit, *args, **kwargs):
        found = real_look(queue, limit, *args, **kwargs)
        if kwargs.get("shed", True) and limit > 1:  # the claim loop's looks (not the index peeks, nor a last check)
            looks.append(len(found[0]))
        return found

    store.look = look
    batches: list[list[str]] = []
    gate = threading.Barrier(3, timeout=5)
    newest: list[str] = []
    lock = threading.Lock()

    def runner(task):
        with lock:
            if not batches or len(batches[-1]) == 3:
                batches.append([])
            batches[-1].append(task.task_id)
        if gate.wait() == 0 and len(batches) == 2:  # the three tasks of a round end together; one of them, once:
            clock.advance(LEFTOVER_SECONDS)  # the second round's leftovers go stale ...
            newest.extend(create(store, clock, 3))  # ... and newer tasks arrive
        gate.wait()

    report = Worker(store, runner, capacity=3, owner="w", clock=clock).run("work", 60)
    assert report.succeeded == 12
    # Round 1: one look (9 waiting, 3 claimed). Round 2: its 3 slots from the 6 leftovers, no look. Round 3: the
    # leftovers are stale; a look finds the 3 new tasks (LIFO: first) and the 3 old ones left. Round 4: its leftovers.
    # Then only empty looks (the run's end).
    assert looks[:2] == [9, 6] and set(looks[2:]) <= {0}, looks
    assert sorted(batches[2]) == sorted(newest), (batches, newest)
