"""Workflows through the handlers, on both engines: CreateTasks takes the sample workflow; ProcessTasks runs it with
its runner seeing each task's dependencies; a task made ready is a MODIFY into PENDING that the template's TaskStream
filter passes and the worker claims by key; ProcessTasks' stream hook ends a PENDING task DynamoDB's TTL deleted for
its dependents; the safety net finishes a fan-out a dead writer left; taskq workflow create / show / cancel."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from taskq.main import main as taskq
from taskqueue.core.workflow_rules import key_of
from taskqueue.services import Services
from tests.conftest import TABLE, make_settings
from tests.support import LambdaContextStub, load_event, load_function
from tests.workflow_support import create, diamond, states

pytestmark = pytest.mark.dynamodb_engines

create_app = load_function("create_tasks")
process_app = load_function("process_tasks")
trigger_app = load_function("trigger")


class DependencyRunner:
    """Records what each task saw of its dependencies; fails the keys it is told to."""

    def __init__(self, fail: frozenset[str] = frozenset()) -> None:
        self.seen: dict[str, dict[str, str]] = {}
        self.order: list[str] = []
        self._fail = fail
        self._lock = threading.Lock()

    def __call__(self, task: Any) -> dict[str, Any]:
        key = key_of(task.task_id)
        with self._lock:
            self.order.append(key)
            self.seen[key] = {d.key: d.status.value for d in task.dependencies}
        if key in self._fail:
            from taskqueue.core.errors import PermanentTaskError

            raise PermanentTaskError(f"{key} cannot be done")
        return {"done": key}


def run_worker(services: Services, runner: DependencyRunner, rounds: int = 10) -> None:
    for _ in range(rounds):
        report = process_app.handle({"queue": "work"}, 120, "req", services, runner)
        if not report.claimed:
            return


def test_create_tasks_takes_the_sample_workflow_and_a_worker_runs_it_in_order(services, clock, topics):
    answer = create_app.handle(load_event("create_tasks-workflow.json"), services, "req-wf")
    assert answer["workflowId"] == "gallery-2026-12-05" and answer["created"] == 5 and answer["ready"] == 1
    assert answer["wakeup"] == "stream"  # its root is a new task: the table's stream starts the worker
    assert create_app.handle(load_event("create_tasks-workflow.json"), services, "req-wf")["created"] == 0
    runner = DependencyRunner(fail=frozenset({"resize-2"}))
    settings = make_settings(topics, runner_capacity=1)
    run_worker(Services(settings, services.store, services.notifier, clock), runner)
    assert runner.order[0] == "fetch" and runner.order[-2:] == ["gallery", "alert"]
    assert runner.seen["gallery"] == {"resize-1": "SUCCESS", "resize-2": "FAILURE"}  # ignore-failure: it ran
    assert runner.seen["alert"] == {"fetch": "SUCCESS", "resize-1": "SUCCESS", "resize-2": "FAILURE", "gallery": "SUCCESS"}


def stream_record(name: str, old: dict[str, Any] | None, new: dict[str, Any] | None, sequence: int,
                  created_s: int) -> dict[str, Any]:
    """A queue-table stream record as Lambda delivers it (NEW_AND_OLD_IMAGES)."""
    images = {"OldImage": old} if old is not None else {}
    images |= {"NewImage": new} if new is not None else {}
    key = (new or old or {})["taskId"]
    return {"eventID": str(sequence), "eventName": name, "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
            "dynamodb": {"Keys": {"taskId": key}, "SequenceNumber": str(sequence), "SizeBytes": 100,
                         "ApproximateCreationDateTime": created_s, "StreamViewType": "NEW_AND_OLD_IMAGES"} | images}


def task_stream_patterns() -> list[dict[str, Any]]:
    from tests.support import template

    stream = template()["Resources"]["ProcessTasksFunction"]["Properties"]["Events"]["TaskStream"]["Properties"]
    return [json.loads(f["Pattern"]) for f in stream["FilterCriteria"]["Filters"]]


def test_a_task_made_ready_is_a_modify_the_task_stream_passes_and_the_worker_claims_it_by_key(services, clock, dynamodb):
    """No wake-up of its own: the write that makes a dependent ready (WAITING -> PENDING in a ready partition) is a
    record the template's TaskStream filter hands ProcessTasks, which names it and claims it by key."""
    from local.template.filter_patterns import matches_any
    from taskqueue.work.stream_batch import read_batch

    store = services.store
    create(store, clock, diamond("wf-mod"))
    before = {k: dynamodb.get_item(TableName=TABLE, Key={"taskId": {"S": f"wf-mod/{k}"}})["Item"] for k in "bc"}
    a = store.claim(store.candidates("work", 1)[0], "w")
    assert store.complete(a, "w")
    after = {k: dynamodb.get_item(TableName=TABLE, Key={"taskId": {"S": f"wf-mod/{k}"}})["Item"] for k in "bc"}
    records = [stream_record("MODIFY", before[k], after[k], n, clock.now_ms() // 1000) for n, k in enumerate("bc")]
    patterns = task_stream_patterns()
    assert all(matches_any(patterns, r) for r in records)  # the filter passes both
    # ... and not the task that still waits, nor a dependent's end (no MODIFY into PENDING)
    d = dynamodb.get_item(TableName=TABLE, Key={"taskId": {"S": "wf-mod/d"}})["Item"]
    assert not matches_any(patterns, stream_record("MODIFY", d, d, 9, clock.now_ms() // 1000))
    batch = read_batch(records, ["work"])
    assert sorted(key_of(c.task_id) for c in batch.named["work"]) == ["b", "c"]
    runner = DependencyRunner()
    report = process_app.handle({"Records": records}, 120, "req", services, runner)
    assert report.claimed >= 2 and runner.order[:2] and set(runner.order[:2]) == {"b", "c"}
    assert runner.seen["b"] == {"a": "SUCCESS"}


def test_process_tasks_ends_a_pending_task_the_ttl_deleted_for_its_dependents(services, clock, dynamodb, topics):
    create(services.store, clock, diamond("wf-ttl", policy="ignore-cancelled"))
    image = dynamodb.get_item(TableName=TABLE, Key={"taskId": {"S": "wf-ttl/a"}})["Item"]
    dynamodb.delete_item(TableName=TABLE, Key={"taskId": {"S": "wf-ttl/a"}})
    record = {
        "eventID": "1", "eventName": "REMOVE", "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
        "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
        "dynamodb": {"Keys": {"taskId": {"S": "wf-ttl/a"}}, "OldImage": image, "SequenceNumber": "1",
                     "StreamViewType": "NEW_AND_OLD_IMAGES", "SizeBytes": 100},
    }
    report = process_app.handle({"Records": [record]}, 120, "req", services, DependencyRunner())
    assert report.claimed == 0
    process_app.handle({"Records": [record]}, 120, "req", services, DependencyRunner())  # a retried batch: no change
    record_view = services.store.workflow_record("wf-ttl")
    assert {key_of(v.task.task_id): v.task.status.value for v in services.store.workflow_tasks(record_view)} == {
        "b": "CANCELLED", "c": "CANCELLED", "d": "CANCELLED"}


def test_the_safety_net_finishes_a_fan_out_whose_writer_died_and_wakes_the_queue(services, clock, topics):
    store = services.store
    create(store, clock, diamond("wf-net"))
    a = store.claim(store.candidates("work", 1)[0], "w")
    store.workflow_ended = lambda task, now_ms=None: None  # type: ignore[method-assign]  # it died right after the write
    assert store.complete(a, "w")
    del store.workflow_ended
    assert states(store, "wf-net")["b"] == "WAITING"
    topics.wakeups()
    clock.advance(121)
    original = trigger_app.services
    trigger_app.services = lambda: services
    try:
        assert trigger_app.lambda_handler(load_event("trigger-safety-net.json"), LambdaContextStub(function_name="Trigger"))
    finally:
        trigger_app.services = original
    assert states(store, "wf-net") == {"a": "SUCCESS", "b": "PENDING", "c": "PENDING", "d": "WAITING"}
    assert "work" in topics.wakeups()


def test_taskq_workflow_create_show_and_cancel(dynamodb, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("TASKQ_LOCAL_STACK_FILE", str(tmp_path / "no-local-stack.json"))  # not a running `make up`

    def cli(*argv: str) -> tuple[int, str, str]:
        status = taskq(["--table-name", TABLE, *argv])
        out, err = capsys.readouterr()
        return status, out, err

    path = tmp_path / "wf.json"
    path.write_text(json.dumps(diamond("wf-cli")["workflow"]))
    status, out, _ = cli("workflow", "create", f"@{path}")
    assert status == 0 and "workflow 'wf-cli' on queue 'work': RUNNING, 4 task(s)" in out and "1 task(s) ready now" in out
    status, out, _ = cli("workflow", "show", "wf-cli")
    assert status == 0 and "RUNNING" in out
    assert [line.split()[:3] for line in out.splitlines() if line.startswith("d ")] == [["d", "WAITING", "b,"]]
    status, out, _ = cli("--json", "workflow", "show", "wf-cli")
    shown = json.loads(out)
    assert shown["counts"] == {"PENDING": 1, "WAITING": 3} and shown["taskList"][3]["dependsOn"][1]["key"] == "c"
    status, out, _ = cli("workflow", "cancel", "wf-cli")
    assert status == 0 and "4 waiting or pending task(s) cancelled" in out
    status, out, _ = cli("show", "wf-cli/d")
    assert status == 0 and "CANCELLED" in out
    status, _, err = cli("workflow", "show", "nope")
    assert status == 1 and "no workflow 'nope'" in err
