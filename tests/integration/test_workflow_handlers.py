"""Workflows through the handlers, on both engines: CreateTasks takes the sample workflow; ProcessTasks runs it with
its runner seeing each task's dependencies, and wakes the queue for tasks made ready; Trigger's stream hook ends a
PENDING task DynamoDB's TTL deleted for its dependents; the safety net finishes a fan-out a dead writer left; taskq
workflow create / show / cancel."""

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
    assert answer["wakeup"] == "woken"
    assert create_app.handle(load_event("create_tasks-workflow.json"), services, "req-wf")["created"] == 0
    runner = DependencyRunner(fail=frozenset({"resize-2"}))
    settings = make_settings(topics, runner_capacity=1)
    run_worker(Services(settings, services.store, services.notifier, clock), runner)
    assert runner.order[0] == "fetch" and runner.order[-2:] == ["gallery", "alert"]
    assert runner.seen["gallery"] == {"resize-1": "SUCCESS", "resize-2": "FAILURE"}  # ignore-failure: it ran
    assert runner.seen["alert"] == {"fetch": "SUCCESS", "resize-1": "SUCCESS", "resize-2": "FAILURE", "gallery": "SUCCESS"}
    assert "work" in topics.wakeups()  # tasks made ready by an UpdateItem: the queue was woken


def test_the_worker_wakes_the_queue_when_a_completion_makes_tasks_ready(services, clock, topics):
    create(services.store, clock, diamond("wf-wake"))
    topics.wakeups()
    calls: list[str] = []
    services.store.on_workflow_ready = lambda queue: calls.append(queue)  # what Services installs: workflows.wake
    runner = DependencyRunner()
    report = process_app.handle({"queue": "work"}, 120, "req", services, runner)
    assert report.claimed >= 1 and calls and set(calls) == {"work"}


def test_trigger_ends_a_pending_task_the_ttl_deleted_for_its_dependents(services, clock, dynamodb, topics):
    create(services.store, clock, diamond("wf-ttl", policy="ignore-cancelled"))
    image = dynamodb.get_item(TableName=TABLE, Key={"taskId": {"S": "wf-ttl/a"}})["Item"]
    dynamodb.delete_item(TableName=TABLE, Key={"taskId": {"S": "wf-ttl/a"}})
    record = {
        "eventID": "1", "eventName": "REMOVE", "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
        "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
        "dynamodb": {"Keys": {"taskId": {"S": "wf-ttl/a"}}, "OldImage": image, "SequenceNumber": "1",
                     "StreamViewType": "NEW_AND_OLD_IMAGES", "SizeBytes": 100},
    }
    original = trigger_app.services
    trigger_app.services = lambda: services
    try:
        result = trigger_app.lambda_handler({"Records": [record]}, LambdaContextStub(function_name="Trigger"))
    finally:
        trigger_app.services = original
    assert result == {"batchItemFailures": []}
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
    assert status == 0 and "workflow 'wf-cli' on queue 'work': RUNNING, 4 task(s)" in out and "1 task(s) made ready" in out
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
