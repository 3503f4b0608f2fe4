"""The local stack end to end, as a user drives it: ``python -m local up`` in its own process, with no AWS
credentials in its environment; functions invoked through boto3's ``lambda`` client against its one endpoint;
the tables read through DynamoDB on the same endpoint; stopped with Ctrl-C (SIGINT); started again with the same
``--persist`` directory, and the same tasks, agent and failed event are there."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

REPO = Path(__file__).resolve().parents[2]
TASK_IDS = ["e2e-stack-1", "e2e-stack-2", "e2e-stack-3"]
# Tasks finish at once, a worker invocation ends soon after its queue is empty, and no schedule adds tasks.
PARAMS = ["CreateTasksScheduleState=DISABLED", "FakeRunnerDurationSeconds=0", "TimeBudgetSeconds=5"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Stack:
    """One ``python -m local up`` process and the clients a user would make against it."""

    def __init__(self, tmp: Path, port: int) -> None:
        self.discovery = tmp / "run" / "local-stack.json"
        self.log = (tmp / f"up-{port}-{time.monotonic_ns()}.log").open("w")
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}  # no credentials, no region
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "local", "up", "--port", str(port), "--persist", str(tmp / "state"),
             "--discovery", str(self.discovery), "--param-overrides", *PARAMS],
            cwd=REPO, env={**env, "PYTHONUNBUFFERED": "1"}, stdout=self.log, stderr=subprocess.STDOUT)
        self.record = self._wait_for_discovery(timeout=60)
        kwargs: dict[str, Any] = {"endpoint_url": self.record["endpoint_url"], "region_name": self.record["region"],
                                  "aws_access_key_id": "dummy", "aws_secret_access_key": "dummy",
                                  "config": Config(retries={"mode": "standard", "max_attempts": 1})}
        self.lambda_ = boto3.client("lambda", **kwargs)
        self.ddb = boto3.client("dynamodb", **kwargs)
        self.sqs = boto3.client("sqs", **kwargs)

    def output(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text()

    def _wait_for_discovery(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"`local up` exited with {self.proc.returncode}:\n{self.output()}"
            if self.discovery.exists():
                return json.loads(self.discovery.read_text())
            time.sleep(0.2)
        raise AssertionError(f"no discovery file after {timeout} s:\n{self.output()}")

    def invoke(self, function: str, event: Any, kind: str = "RequestResponse", timeout: float = 30) -> dict[str, Any]:
        """Invoke as a caller would, retrying a 429 (the worker may be running already, woken by the stream)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.lambda_.invoke(FunctionName=function, InvocationType=kind, Payload=json.dumps(event).encode())
            except self.lambda_.exceptions.TooManyRequestsException:
                assert time.monotonic() < deadline, f"{function} refused with 429 for {timeout} s"
                time.sleep(0.5)

    def tasks(self) -> dict[str, dict[str, Any]]:
        table = self.record["outputs"]["QueueTableName"]
        found = {}
        for task_id in TASK_IDS:
            item = self.ddb.get_item(TableName=table, Key={"taskId": {"S": task_id}}, ConsistentRead=True).get("Item")
            if item:
                found[task_id] = item
        return found

    def interrupt(self, timeout: float = 30) -> int:
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout)
        finally:
            self.log.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()


@pytest.fixture
def stacks(tmp_path: Path) -> Iterator[list[Stack]]:
    started: list[Stack] = []
    yield started
    for stack in started:
        stack.kill()


def load(name: str) -> Any:
    return json.loads((REPO / "events" / name).read_text())


def test_the_local_stack_serves_lambda_invoke_and_keeps_its_state_across_restarts(tmp_path: Path, stacks: list[Stack]) -> None:
    started = time.monotonic()
    port = free_port()
    stack = Stack(tmp_path, port)
    stacks.append(stack)

    # The discovery record: where the stack is, what it is called, what its outputs are.
    record = stack.record
    assert record["stack_name"] == "taskqueue-local"
    assert record["endpoint_url"] == f"http://127.0.0.1:{port}" and record["region"] == "us-east-1"
    assert record["pid"] == stack.proc.pid
    assert record["persist_dir"] == str((tmp_path / "state").resolve())
    outputs = record["outputs"]
    assert outputs["WorkerWakeUpTopicArn"] == "arn:aws:sns:us-east-1:123456789012:taskqueue-local-WorkerWakeUpTopic"
    assert outputs["QueueTableName"] == "taskqueue-local-QueueTable"
    assert outputs["AgentTableName"] == "taskqueue-local-AgentTable"
    assert outputs["FailedEventsQueueUrl"].endswith("/taskqueue-local-FailedEventsQueue")
    assert outputs["ProcessTasksFunctionName"] == "taskqueue-local-ProcessTasksFunction"
    assert record["parameters"]["FakeRunnerDurationSeconds"] == "0"

    # CreateTasks through the Lambda API (by logical id), the tasks read through DynamoDB on the same endpoint.
    created = stack.invoke("CreateTasksFunction", {"queue": "work", "taskIds": TASK_IDS})
    assert created["StatusCode"] == 200 and "FunctionError" not in created, created
    assert json.loads(created["Payload"].read())["created"] == 3
    assert set(stack.tasks()) == set(TASK_IDS)

    # ProcessTasks by its physical name: every task ends SUCCESS.
    worked = stack.invoke(outputs["ProcessTasksFunctionName"], load("process_tasks-direct.json"))
    assert "FunctionError" not in worked, worked["Payload"].read()
    deadline = time.monotonic() + 20
    while {t["taskStatus"]["S"] for t in stack.tasks().values()} != {"SUCCESS"} and time.monotonic() < deadline:
        time.sleep(0.3)
    assert {k: t["taskStatus"]["S"] for k, t in stack.tasks().items()} == dict.fromkeys(TASK_IDS, "SUCCESS")

    # AgentEvents with the events/ file: the agent is in the agent table.
    agent_event = load("agent_events-agent-available.json")
    answer = stack.invoke("AgentEventsFunction", agent_event)
    assert "FunctionError" not in answer and json.loads(answer["Payload"].read())["outcome"] == "queued"
    agent_key = {"pk": {"S": f"AGENT#{agent_event['agent']['agentId']}"}, "sk": {"S": "PROFILE"}}
    assert "Item" in stack.ddb.get_item(TableName=outputs["AgentTableName"], Key=agent_key, ConsistentRead=True)

    # The other invocation types and a function that does not exist, as Lambda answers them.
    assert stack.invoke("CreateTasksFunction", {"queue": "work", "count": 1}, kind="DryRun")["StatusCode"] == 204
    with pytest.raises(stack.lambda_.exceptions.ResourceNotFoundException):
        stack.lambda_.invoke(FunctionName="NoSuchFunction", Payload=b"{}")
    failed = stack.invoke("CreateTasksFunction", load("create_tasks-bad-input.json"))
    assert failed["FunctionError"] == "Unhandled" and json.loads(failed["Payload"].read())["errorType"] == "InvalidField"

    # A failed event waiting in FailedEventsQueue, to be kept too.
    stack.sqs.send_message(QueueUrl=outputs["FailedEventsQueueUrl"], MessageBody=json.dumps(load("failed_events-create_tasks.json")))

    # Ctrl-C: a clean stop removes the discovery file.
    assert stack.interrupt() == 0, stack.output()
    assert not stack.discovery.exists()
    assert (tmp_path / "state" / "dynamodb" / "QueueTable.jsonl").exists()

    # Started again with the same --persist: the same tasks, the agent and the failed event are back.
    again = Stack(tmp_path, free_port())
    stacks.append(again)
    assert {k: t["taskStatus"]["S"] for k, t in again.tasks().items()} == dict.fromkeys(TASK_IDS, "SUCCESS")
    assert "Item" in again.ddb.get_item(TableName=outputs["AgentTableName"], Key=agent_key, ConsistentRead=True)
    messages = again.sqs.receive_message(QueueUrl=again.record["outputs"]["FailedEventsQueueUrl"],
                                         MaxNumberOfMessages=10).get("Messages", [])
    assert [json.loads(m["Body"])["requestPayload"] for m in messages] == [{"queue": "work", "count": 15}]
    assert again.interrupt() == 0, again.output()
    assert not again.discovery.exists()
    assert time.monotonic() - started < 60
