"""ProcessTasks started by the queue table's stream (its TaskStream event), on both DynamoDB engines: it claims the
tasks a batch names by key before it reads the index, counts what DynamoDB's TTL shed, skips what it cannot read,
and a batch delivered twice runs nothing twice."""

from __future__ import annotations

import json
from typing import Any

import pytest

from taskqueue.core.states import TaskStatus
from taskqueue.services import Services
from taskqueue.store import TaskStore
from tests.integration.test_delayed_head import create, recorded
from tests.support import emitted, load_event, load_function

pytestmark = pytest.mark.dynamodb_engines

app = load_function("process_tasks")


def image(store: TaskStore, task_id: str) -> dict[str, Any]:
    return store._db.get_item(TableName=store.settings.queue_table_name, Key={"taskId": {"S": task_id}},
                              ConsistentRead=True)["Item"]


def batch(*records: dict[str, Any]) -> dict[str, Any]:
    for n, record in enumerate(records):
        record.setdefault("eventSource", "aws:dynamodb")
        record.setdefault("eventID", str(n))
        record["dynamodb"].setdefault("SequenceNumber", str(100 + n))
    return {"Records": list(records)}


def insert(item: dict[str, Any]) -> dict[str, Any]:
    return {"eventName": "INSERT", "dynamodb": {"Keys": {"taskId": item["taskId"]}, "NewImage": item}}


def on(store: TaskStore, clock, **changes: Any) -> tuple[Services, Any]:
    worker_store, client = recorded(store, **changes)
    return Services(worker_store.settings, worker_store, None, clock), client  # type: ignore[arg-type]


class Runner:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, task):
        self.seen.append(task.task_id)


def test_named_tasks_are_claimed_by_key_newest_first_before_any_read_of_the_index(store, clock):
    svc, client = on(store, clock)
    ids = []
    for _ in range(3):
        ids += create(svc.store, clock)
        clock.advance(1)
    client.requests.clear()
    runner = Runner()
    report = app.handle(batch(*[insert(image(svc.store, i)) for i in ids]), 120, "stream-1", svc, runner)
    assert (report.claimed, report.succeeded, report.lost, report.stopped_by) == (3, 3, 0, "empty")
    assert runner.seen == list(reversed(ids))  # the queue's order: LIFO
    first_query = next(n for n, (op, _) in enumerate(client.requests) if op == "query")
    claims = [n for n, (op, kw) in enumerate(client.requests) if op == "update_item" and kw["Key"]["taskId"]["S"] in ids]
    assert claims and max(claims[:3]) < first_query  # the index is read once, after the named claims: the run's last look


def test_a_batch_delivered_twice_runs_each_task_once(store, clock):
    svc, _ = on(store, clock)
    ids = create(svc.store, clock, 2)
    event, runner = batch(*[insert(image(svc.store, i)) for i in ids]), Runner()
    first = app.handle(event, 120, "stream-1", svc, runner)
    second = app.handle(event, 120, "stream-2", svc, runner)
    assert (first.succeeded, second.claimed) == (2, 0)
    assert sorted(runner.seen) == sorted(ids)


def test_a_ttl_deletion_of_a_pending_task_is_counted_as_shed_and_claims_nothing(store, clock, capsys):
    svc, _ = on(store, clock)
    capsys.readouterr()
    report = app.handle(load_event("process_tasks-stream-ttl-remove.json"), 120, "stream-1", svc, Runner())
    app.metrics.clear_metrics()
    assert report.stopped_by == "nothing-to-run" and report.claimed == 0
    assert [(v, d["queue"]) for n, d, v, *_ in emitted(capsys.readouterr().out) if n == "TasksShed"] == [(1, "work")]


def test_a_record_that_is_no_task_is_skipped_and_counted_and_the_others_claimed(store, clock, capsys):
    svc, _ = on(store, clock)
    [task_id] = create(svc.store, clock)
    event = batch({"eventName": "INSERT", "dynamodb": {"NewImage": {"queue": {"S": "work"}}}}, insert(image(svc.store, task_id)))
    capsys.readouterr()
    report = app.handle(event, 120, "stream-1", svc, Runner())
    assert report.succeeded == 1
    assert [n for n, *_ in emitted(capsys.readouterr().out)].count("MalformedRecords") == 1


def test_a_resume_starts_the_queue_and_its_waiting_tasks_are_claimed(store, clock):
    svc, _ = on(store, clock)
    ids = create(svc.store, clock, 2)
    svc.store.pause("work")
    runner = Runner()
    assert app.handle(batch(*[insert(image(svc.store, i)) for i in ids]), 120, "stream-1", svc, runner).claimed == 0
    svc.store.resume("work")  # writes the resume's mark, whose INSERT the stream hands to the worker
    marks = [item for item in svc.store._db.scan(TableName=svc.settings.queue_table_name)["Items"]
             if item["taskId"]["S"].startswith("queue#work#resume#")]
    assert len(marks) == 1
    report = app.handle(batch(insert(marks[0])), 120, "stream-2", svc, runner)
    assert report.succeeded == 2 and sorted(runner.seen) == sorted(ids)


def test_a_sample_insert_of_the_events_folder_runs_as_sam_local_invoke_would(store, clock):
    svc, _ = on(store, clock)
    event = load_event("process_tasks-stream-insert.json")
    item = event["Records"][0]["dynamodb"]["NewImage"]
    item = json.loads(json.dumps(item))
    item["ttl"] = {"N": str(clock.now_ms() // 1000 + 3600)}
    svc.store._db.put_item(TableName=svc.settings.queue_table_name, Item=item)
    event["Records"][0]["dynamodb"]["NewImage"] = item
    report = app.handle(event, 120, "stream-1", svc, Runner())
    assert report.succeeded == 1
    assert svc.store.get(item["taskId"]["S"]).status is TaskStatus.SUCCESS


def test_an_old_batch_reads_its_tasks_first_and_claims_only_those_still_waiting(store, clock):
    """A replayed or retried batch (a recreated mapping reads up to StreamMaximumRecordAgeSeconds back): its tasks have
    mostly moved on. One read each instead of a refused claim, a write each."""
    svc, client = on(store, clock)
    ids = create(svc.store, clock, 3)
    images = [image(svc.store, i) for i in ids]
    done = svc.store.claim(svc.store.candidates("work", 10)[0], "earlier-worker")
    svc.store.complete(done, "earlier-worker")
    event = batch(*[insert(i) for i in images])
    for record in event["Records"]:
        record["dynamodb"]["ApproximateCreationDateTime"] = clock.now_ms() // 1000 - 600  # ten minutes old
    client.requests.clear()
    report = app.handle(event, 120, "replay-1", svc, Runner())
    assert (report.succeeded, report.lost) == (2, 0)
    assert [op for op, _ in client.requests][0] == "batch_get_item"
