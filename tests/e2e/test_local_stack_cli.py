"""`taskq` against the local stack, as a user runs it: ``python -m local up`` in its own process, then taskq as a
subprocess with no AWS credentials, region or names in its environment (it finds the stack through the stack
file), for stats, list, pause, resume, purge and failed-events."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
# Tasks finish at once, and no schedule adds tasks of its own.
PARAMS = ["CreateTasksScheduleState=DISABLED", "FakeRunnerDurationSeconds=0", "TimeBudgetSeconds=5"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def without_aws(env: dict[str, str]) -> dict[str, str]:
    names = ("QUEUE_TABLE_NAME", "TASKQ_STACK_NAME", "FAILED_EVENTS_QUEUE_URL", "AGENT_TABLE_NAME")
    return {k: v for k, v in env.items() if not k.startswith("AWS_") and k not in names}


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A running ``python -m local up`` on a free port, its stack file private to this test."""
    discovery = tmp_path / "run" / "local-stack.json"
    log_path = tmp_path / "up.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "local", "up", "--port", str(free_port()), "--discovery", str(discovery),
             "--param-overrides", *PARAMS],
            cwd=REPO, env={**without_aws(dict(os.environ)), "PYTHONUNBUFFERED": "1"}, stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 90
            while not discovery.exists():
                assert proc.poll() is None, f"`local up` exited with {proc.returncode}:\n{log_path.read_text()}"
                assert time.monotonic() < deadline, f"no stack file after 90 s:\n{log_path.read_text()}"
                time.sleep(0.2)
            yield {"file": discovery, "record": json.loads(discovery.read_text()), "proc": proc, "log": log_path}
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)


@pytest.fixture
def taskq(stack: dict[str, Any], tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run taskq as a user would: no AWS variables, an empty folder, a home without AWS configuration."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**without_aws(dict(os.environ)), "HOME": str(home), "TASKQ_LOCAL_STACK_FILE": str(stack["file"])}

    def run(*argv: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "taskq", *argv], cwd=home, env=env, capture_output=True,
                              text=True, timeout=60, check=False)
        if ok:
            assert done.returncode == 0, f"taskq {' '.join(argv)} exited {done.returncode}: {done.stderr}"
        return done

    return run


def as_json(taskq: Callable[..., subprocess.CompletedProcess[str]], *argv: str) -> Any:
    return json.loads(taskq(*argv, "--json").stdout)


def work_stats(taskq: Callable[..., subprocess.CompletedProcess[str]], *argv: str) -> dict[str, Any]:
    document = as_json(taskq, "stats", *argv)
    assert document["shedSource"] == "table"  # no CloudWatch locally: SHED counted from the table
    return {s["queue"]: s for s in document["stats"]}["work"]


def failure_record(function_arn: str) -> dict[str, Any]:
    """What Lambda sends to the on-failure destination after CreateTasks' asynchronous retries."""
    return {
        "version": "1.0",
        "timestamp": "2026-11-23T00:00:05.568Z",
        "requestContext": {"requestId": "e2e-failed-1", "functionArn": function_arn,
                           "condition": "RetriesExhausted", "approximateInvokeCount": 3},
        "requestPayload": {"queue": "work", "count": 2},
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "responsePayload": {"errorMessage": "throttled", "errorType": "StoreError"},
    }


def test_taskq_finds_and_operates_the_local_stack_without_credentials(stack, taskq):
    outputs = stack["record"]["outputs"]

    # Paused first, so the stack's workers leave the tasks where the next commands look for them.
    assert as_json(taskq, "pause", "work") == {"paused": ["work"]}
    created = as_json(taskq, "create", "--count", "3", "--payload", '{"job": "e2e"}')
    assert created["created"] == 3 and created["queue"] == "work"
    work = work_stats(taskq)
    assert (work["counts"]["PENDING"], work["paused"], work["shed"]) == (3, True, 0)
    listed = as_json(taskq, "list", "--queue", "work", "--state", "PENDING")
    assert sorted(t["taskId"] for t in listed["tasks"]) == sorted(created["taskIds"])

    purged = as_json(taskq, "purge", "work", "--state", "PENDING", "--limit", "1", "--yes")
    assert (purged["deleted"], purged["skipped"]) == (1, 0)
    assert work_stats(taskq)["counts"]["PENDING"] == 2
    refused = taskq("purge", "work", "--state", "PENDING", ok=False)  # no terminal to ask on, and no --yes
    assert refused.returncode == 1 and "pass --yes to confirm" in refused.stderr

    # Resumed: the resume mark goes through the table's stream to the queue's worker, which runs the two tasks.
    resumed = as_json(taskq, "--local", "resume", "work")
    assert resumed["resumed"] == ["work"]
    deadline = time.monotonic() + 60
    while True:
        work = work_stats(taskq, "--include-success")
        if work["counts"]["SUCCESS"] == 2 and work["counts"]["PENDING"] == 0 and work["counts"]["TAKEN"] == 0:
            break
        assert time.monotonic() < deadline, f"the resumed queue did not run its tasks: {work}\n{stack['log'].read_text()}"
        time.sleep(1)
    assert work["paused"] is False
    listing = taskq("list")
    assert listing.stdout.strip().startswith("no PENDING, TAKEN, FAILURE or CANCELLED tasks in any queue")
    assert len(as_json(taskq, "list", "--state", "SUCCESS")["tasks"]) == 2

    # failed-events reads the stack's FailedEventsQueue (its URL from the stack's outputs).
    record = stack["record"]
    sqs = boto3.client("sqs", endpoint_url=record["endpoint_url"], region_name=record["region"],
                       aws_access_key_id="dummy", aws_secret_access_key="dummy")
    arn = f"arn:aws:lambda:{record['region']}:123456789012:function:{outputs['CreateTasksFunctionName']}"
    sqs.send_message(QueueUrl=outputs["FailedEventsQueueUrl"], MessageBody=json.dumps(failure_record(arn)))
    messages = as_json(taskq, "failed-events", "--wait-seconds", "0")["messages"]
    assert [(m["source"], m["function"], m["requestId"]) for m in messages] == [
        ("async", outputs["CreateTasksFunctionName"], "e2e-failed-1")]
    deleted = taskq("failed-events", "--wait-seconds", "0", "--delete", messages[0]["id"])
    assert deleted.stdout.startswith(f"deleted {messages[0]['id']} (asynchronous invocation")
    empty = taskq("failed-events", "--wait-seconds", "0")
    assert empty.stdout.strip() == f"FailedEventsQueue is empty ({outputs['FailedEventsQueueUrl']})"

    # Stopped, the stack removes its file, and taskq says to start one.
    stack["proc"].send_signal(signal.SIGINT)
    assert stack["proc"].wait(30) == 0
    gone = taskq("--local", "stats", ok=False)
    assert gone.returncode == 1 and "no local stack is running" in gone.stderr and "`make up`" in gone.stderr


PRODUCER = """
import json
from taskqueue.client import TaskQueueClient

queue = TaskQueueClient.connect()  # no names, no credentials: the running local stack, found by itself
task_id = queue.enqueue({"from": "an application"}, task_id="app-1", run_seconds=30)
assert queue.enqueue({"again": True}, task_id="app-1") == "app-1"  # the same enqueue twice: one task
task = queue.wait(task_id, timeout=60)
print(json.dumps({"status": str(task.status), "attempts": task.attempts, "result": task.result,
                  "payload": task.payload, "stack": queue.settings.queue_table_name}))
"""


def test_the_producer_client_reaches_the_running_local_stack_with_no_configuration(stack, tmp_path):
    home = tmp_path / "home-client"
    home.mkdir()
    env = {**without_aws(dict(os.environ)), "HOME": str(home), "TASKQ_LOCAL_STACK_FILE": str(stack["file"])}
    done = subprocess.run([sys.executable, "-c", PRODUCER], cwd=home, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert (outcome["status"], outcome["attempts"], outcome["payload"]) == ("SUCCESS", 1, {"from": "an application"})
    assert outcome["result"] == {"processedBy": "fake-legacy-system"}
    assert outcome["stack"] == stack["record"]["outputs"]["QueueTableName"]
