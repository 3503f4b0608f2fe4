"""One task followed across functions: its creating request's id names the stream start's log lines, rides on every
tail call (message attributes) and appears in the JSON log lines of each function that handles it
(docs/operations.md)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.metrics.provider import cold_start

from taskqueue.services import Services
from tests.conftest import TABLE, make_settings
from tests.support import LambdaContextStub, emitted, load_event, load_function

create_tasks = load_function("create_tasks")
trigger = load_function("trigger")
process_tasks = load_function("process_tasks")

CREATE_REQUEST = "create-req-7"


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    """What the functions log, as the JSON lines Powertools writes: every handler's Logger (service "taskqueue")
    and the layer's child loggers write through the one handler of the "taskqueue" logger."""
    (handler,) = logging.getLogger(trigger.logger.service).handlers
    stream = io.StringIO()
    previous = handler.setStream(stream)
    yield stream
    handler.setStream(previous)


def log_lines(logs: io.StringIO) -> list[dict[str, Any]]:
    """The structured (JSON) log lines written since the last call."""
    output = logs.getvalue()
    logs.seek(0)
    logs.truncate()
    lines = []
    for line in output.splitlines():
        try:
            blob = json.loads(line)
        except ValueError:
            continue
        if isinstance(blob, dict) and "message" in blob and "_aws" not in blob:
            lines.append(blob)
    return lines


def attributes(message: dict[str, Any]) -> dict[str, str]:
    return {name: value["Value"] for name, value in message["MessageAttributes"].items()}


def as_lambda_event(message: dict[str, Any]) -> dict[str, Any]:
    """The SNS notification a probe queue received, as SNS hands it to a subscribed function."""
    return {"Records": [{"EventSource": "aws:sns", "EventVersion": "1.0", "Sns": message}]}


def stream_insert(task_id: str) -> dict[str, Any]:
    """The queue table's stream record of the task's creation (its NewImage read from the table)."""
    item = boto3.client("dynamodb").get_item(TableName=TABLE, Key={"taskId": {"S": task_id}})["Item"]
    record = json.loads(json.dumps(load_event("process_tasks-stream-insert.json")["Records"][0]))
    record["dynamodb"]["NewImage"] = item
    record["dynamodb"]["Keys"] = {"taskId": item["taskId"]}
    return {"Records": [record]}


def invoke(module: Any, event: Any, monkeypatch: pytest.MonkeyPatch, svc: Services, request_id: str, **patches: Any) -> Any:
    monkeypatch.setattr(module, "services", lambda: svc)
    for name, value in patches.items():
        monkeypatch.setattr(module, name, value)
    return module.lambda_handler(event, LambdaContextStub(request_id=request_id))


@pytest.fixture
def slow(services: Services, clock: Any, topics: Any) -> Services:
    """One task at a time, and a budget the first task uses up: the worker tail-calls."""
    settings = make_settings(topics, runner_capacity=1, time_budget_seconds=0.01)
    return Services(settings, services.store, services.notifier, clock)


def test_a_tasks_ids_travel_from_creation_through_every_wake_up_and_onto_its_log_lines(
    services, slow, clock, topics, logs, monkeypatch
):
    created = invoke(create_tasks, {"queue": "work", "count": 2}, monkeypatch, services, CREATE_REQUEST)
    first = created["taskIds"][0]
    assert services.store.get(first).request_id == CREATE_REQUEST
    lines = log_lines(logs)
    (created_line,) = [line for line in lines if line["message"] == "tasks created"]
    assert created_line["correlation_id"] == CREATE_REQUEST

    assert topics.messages(topics.wake_up_queue) == []  # a producer publishes nothing: the stream starts the worker

    # The worker logs its whole invocation under the creating request, and its tail call carries both ids on.
    def runner(task: Any) -> dict[str, Any]:
        clock.advance(1)  # past the budget: work remains, so the worker tail-calls
        return {}

    report = invoke(process_tasks, stream_insert(first), monkeypatch, slow, "worker-req-1", runner=lambda: runner)
    assert report["work_remains"] is True
    lines = log_lines(logs)
    assert lines and all(line["correlation_id"] == CREATE_REQUEST for line in lines)
    assert all(line["wake_up_task_id"] == first for line in lines)
    about_tasks = [line for line in lines if "task_id" in line]
    assert about_tasks and {line["task_id"] for line in about_tasks} <= set(created["taskIds"])
    (tail_call,) = topics.messages(topics.wake_up_queue)  # straight to the next worker
    assert attributes(tail_call) == {"queue": "work", "correlation_id": CREATE_REQUEST, "task_id": first}

    # The next worker, started by the tail call, logs under the same ids.
    invoke(process_tasks, as_lambda_event(tail_call), monkeypatch, slow, "worker-req-2", runner=lambda: runner)
    lines = log_lines(logs)
    assert lines and all(line["correlation_id"] == CREATE_REQUEST for line in lines)


def test_a_wake_up_without_ids_starts_a_chain_of_its_own_request(services, slow, clock, topics, logs, monkeypatch):
    invoke(create_tasks, {"queue": "work", "count": 2}, monkeypatch, services, CREATE_REQUEST)

    def runner(task: Any) -> dict[str, Any]:
        clock.advance(1)
        return {}

    log_lines(logs)
    invoke(process_tasks, {"queue": "work"}, monkeypatch, slow, "worker-req-9", runner=lambda: runner)
    lines = log_lines(logs)
    assert lines and all(line["correlation_id"] == "worker-req-9" and "wake_up_task_id" not in line for line in lines)
    tail_calls = [m for m in topics.messages(topics.wake_up_queue) if attributes(m).get("correlation_id") == "worker-req-9"]
    assert [attributes(m) for m in tail_calls] == [{"queue": "work", "correlation_id": "worker-req-9"}]


@pytest.mark.parametrize("module,event", [
    (create_tasks, {"queue": "work", "count": 1}),
    (trigger, load_event("trigger-safety-net.json")),
])
def test_the_first_invocation_of_an_execution_environment_counts_a_cold_start(services, capsys, monkeypatch, module, event):
    capsys.readouterr()
    monkeypatch.setattr(cold_start, "is_cold_start", True)
    invoke(module, event, monkeypatch, services, "req-cold")
    invoke(module, event, monkeypatch, services, "req-warm")
    cold = [m for m in emitted(capsys.readouterr().out) if m.name == "ColdStart"]
    assert [(m.value, m.dims["function_name"]) for m in cold] == [(1, "fn")]
