"""Progress against DynamoDB (moto and DynamoDB Local): a runner's reports reach its task while its worker holds the
lease, rate-limited; only the lease owner writes them; a new attempt starts without the last one's."""

from __future__ import annotations

from taskqueue.client.create import create_tasks
from taskqueue.core.model import parse_create_request
from taskqueue.core.states import TaskStatus
from taskqueue.work.progress import PROGRESS_INTERVAL_SECONDS, report_progress
from taskqueue.work.worker import Worker


def make(store, clock, **body) -> str:
    return create_tasks(parse_create_request(body, store.settings), store, clock.now_ms()).task_ids[0]


def test_a_runners_reports_reach_its_task_at_most_once_per_interval(store, clock):
    task_id = make(store, clock)
    written: list[bool] = []

    def runner(task):
        for step in range(1, 13):  # a report every second for 12 s
            written.append(report_progress(step, f"step {step} of 12"))
            clock.advance(1)
        return {"steps": 12}

    report = Worker(store, runner, capacity=1, owner="w1", clock=clock).run("work", 30)
    assert report.succeeded == 1
    assert [step for step, w in enumerate(written, start=1) if w] == [1, 6, 11]  # every PROGRESS_INTERVAL_SECONDS
    assert PROGRESS_INTERVAL_SECONDS == 5
    task = store.get(task_id)
    assert (task.status, task.progress, task.progress_message) == (TaskStatus.SUCCESS, 11.0, "step 11 of 12")
    assert task.progress_updated_ms is not None


def test_only_the_lease_owner_writes_progress_and_a_new_attempt_starts_without(store, clock):
    make(store, clock)
    (candidate,) = store.candidates("work", 1)
    task = store.claim(candidate, "w1")
    assert store.record_progress(task, "w1", 30, "a third") is True
    assert store.record_progress(task, "w2", 90, "not mine") is False
    seen = store.get(task.task_id)
    assert (seen.progress, seen.progress_message) == (30.0, "a third")
    assert store.record_progress(task, "w1", 40, None) is True
    assert store.get(task.task_id).progress_message is None  # a report without a message clears the old one
    assert store.release(task, "w1", error="retry")
    (candidate,) = store.candidates("work", 1)
    again = store.claim(candidate, "w2")
    assert again is not None and again.progress is None and again.progress_message is None
    clock.advance(store.settings.lease_seconds + 1)  # the lease passed: no more writes from its owner
    assert store.record_progress(again, "w2", 50, "late") is False
