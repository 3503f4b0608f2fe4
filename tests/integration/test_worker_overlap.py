"""A worker's runner is not idle while an outcome is written: the next task starts as the last one's runner returns,
and the run still waits for every outcome (a failed attempt's release among them) before it ends."""

from __future__ import annotations

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
    """The slot frees before the release is written; the run must not take the queue for empty meanwhile (an empty
    look with nothing running would end the run at once)."""
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
