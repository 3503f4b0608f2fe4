"""How taskq finds its stack: the local stack file (live pid / dead pid / absent / malformed), the stack's outputs
and parameters as settings, and the commands against a local stack (a moto server standing in for `make up`)
with no AWS credentials or region in the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from taskq.main import main
from taskqueue.client import discovery
from taskqueue.client.discovery import DiscoveryError, StackInfo
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.settings import Settings
from taskqueue.store import TaskStore
from tests.support import FakeClock, create_queue_table

AWS_VARIABLES = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION",
    "AWS_PROFILE", "AWS_ENDPOINT_URL", "QUEUE_TABLE_NAME", "TASKQ_STACK_NAME", "FAILED_EVENTS_QUEUE_URL",
)


def stack_document(pid: int, endpoint: str = "http://127.0.0.1:4566", **outputs: str) -> dict[str, Any]:
    return {
        "stack_name": "taskqueue-local",
        "endpoint_url": endpoint,
        "region": "eu-west-1",
        "pid": pid,
        "started_at": "2026-11-23T00:00:00Z",
        "persist_dir": None,
        "outputs": {"QueueTableName": "taskqueue-local-QueueTable", **outputs},
        "parameters": {"QueueShards": 4, "MaxAttempts": "5", "MatchAttributes": "language"},
    }


def write(path: Path, document: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return path


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# ---- the stack file ------------------------------------------------------------------------------------------

def test_a_live_stack_is_found_in_a_parent_folder(tmp_path):
    write(tmp_path / ".taskq" / "local-stack.json", stack_document(os.getpid()))
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    lookup = discovery.find_local(cwd=deep, env={})
    assert lookup.path == tmp_path / ".taskq" / "local-stack.json" and lookup.stale_pid is None
    stack = lookup.stack
    assert stack is not None and stack.local and stack.name == "taskqueue-local"
    assert (stack.endpoint_url, stack.region) == ("http://127.0.0.1:4566", "eu-west-1")


def test_the_environment_names_another_file(tmp_path):
    write(tmp_path / ".taskq" / "local-stack.json", stack_document(os.getpid(), endpoint="http://127.0.0.1:1"))
    other = write(tmp_path / "elsewhere.json", stack_document(os.getpid(), endpoint="http://127.0.0.1:2"))
    lookup = discovery.find_local(cwd=tmp_path, env={"TASKQ_LOCAL_STACK_FILE": str(other)})
    assert lookup.stack is not None and lookup.stack.endpoint_url == "http://127.0.0.1:2"
    missing = discovery.find_local(cwd=tmp_path, env={"TASKQ_LOCAL_STACK_FILE": str(tmp_path / "gone.json")})
    assert missing.stack is None and "gone.json, which does not exist" in discovery.no_local_stack_message(missing)


def test_a_file_whose_engine_exited_is_stale(tmp_path):
    pid = dead_pid()
    assert not discovery.pid_alive(pid) and discovery.pid_alive(os.getpid())
    write(tmp_path / ".taskq" / "local-stack.json", stack_document(pid))
    lookup = discovery.find_local(cwd=tmp_path, env={})
    assert lookup.stack is None and lookup.stale_pid == pid
    assert f"pid {pid} has exited" in discovery.no_local_stack_message(lookup)
    assert "make up" in discovery.no_local_stack_message(lookup)


def test_no_file_anywhere(tmp_path):
    lookup = discovery.find_local(cwd=tmp_path, env={})
    assert (lookup.path, lookup.stack, lookup.stale_pid) == (None, None, None)
    message = discovery.no_local_stack_message(lookup)
    assert "no local stack is running" in message and "make up" in message and str(tmp_path) in message


@pytest.mark.parametrize(
    "document, problem",
    [
        ("{not json", "is not valid JSON"),
        ([], "is not a JSON object"),
        ({**stack_document(1), "pid": "12"}, "has no valid 'pid'"),
        ({**stack_document(1), "endpoint_url": ""}, "has no valid 'endpoint_url'"),
        ({**stack_document(1), "outputs": {"AgentTableName": "a"}}, "has no output QueueTableName"),
    ],
)
def test_a_malformed_file_says_what_to_do(tmp_path, document, problem):
    path = write(tmp_path / "stack.json", document)
    with pytest.raises(DiscoveryError) as raised:
        discovery.read_stack_file(path)
    assert problem in str(raised.value) and "make up" in str(raised.value) and str(path) in str(raised.value)


def test_outputs_and_parameters_become_the_settings_variables():
    stack = StackInfo(
        name="s",
        outputs={
            "QueueTableName": "qt", "AgentTableName": "at",
            "ProcessTasksTopicArn": "arn:w", "FailedEventsQueueUrl": "http://q", "DashboardName": "ignored",
        },
        parameters={"QueueShards": "4", "MaxAttempts": "5", "AgentOrder": "LIFO", "LogLevel": "DEBUG"},
    )
    assert stack.env() == {
        "QUEUE_TABLE_NAME": "qt", "AGENT_TABLE_NAME": "at",
        "WORKER_WAKE_UP_TOPIC_ARN": "arn:w", "PROCESS_TASKS_TOPIC_ARN": "arn:w", "FAILED_EVENTS_QUEUE_URL": "http://q",
        "QUEUE_SHARDS": "4", "MAX_ATTEMPTS": "5", "AGENT_ORDER": "LIFO",
    }
    renamed = StackInfo(name="s", outputs={"QueueTableName": "qt", "WorkerWakeUpTopicArn": "arn:new"})
    assert renamed.env()["WORKER_WAKE_UP_TOPIC_ARN"] == "arn:new"


# ---- the commands --------------------------------------------------------------------------------------------

@pytest.fixture
def bare_env(monkeypatch, tmp_path):
    """No AWS credentials, region, profile or names: what a new user has. Runs in an empty folder."""
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_local_without_a_running_stack_says_to_run_make_up(bare_env, capsys):
    status, _, err = run(capsys, "--local", "stats")
    assert status == 1 and err.startswith("taskq: error: no local stack is running") and "`make up`" in err
    write(bare_env / ".taskq" / "local-stack.json", stack_document(dead_pid()))
    status, _, err = run(capsys, "stats", "--local")
    assert status == 1 and "is not running (pid" in err and "`make up`" in err


def test_a_stale_file_is_ignored_with_a_one_line_notice(bare_env, capsys):
    pid = dead_pid()
    path = write(bare_env / ".taskq" / "local-stack.json", stack_document(pid))
    status, _, err = run(capsys, "stats")
    lines = err.strip().splitlines()
    assert status == 1 and len(lines) == 2
    assert lines[0] == f"taskq: note: ignoring {path.resolve()}: the local stack it describes is not running (pid {pid})"
    assert lines[1].startswith("taskq: error: no queue table: pass --stack-name NAME or --table-name NAME")


@pytest.fixture
def local_stack(bare_env) -> Iterator[dict[str, Any]]:
    """A moto server with the queue table, FailedEventsQueue and WorkerWakeUpTopic, and the stack file `make up` writes
    for it (this process's pid: alive)."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    session = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="eu-west-1")
    db = session.client("dynamodb", endpoint_url=endpoint)
    table = "taskqueue-local-QueueTable-discovery"
    create_queue_table(db, table)
    queue_url = session.client("sqs", endpoint_url=endpoint).create_queue(QueueName="taskqueue-local-FailedEvents")["QueueUrl"]
    topic = session.client("sns", endpoint_url=endpoint).create_topic(Name="taskqueue-local-WorkerWakeUpTopic")["TopicArn"]
    document = stack_document(os.getpid(), endpoint, QueueTableName=table, FailedEventsQueueUrl=queue_url,
                              WorkerWakeUpTopicArn=topic)
    document["parameters"] = {"QueueShards": "2"}
    write(bare_env / ".taskq" / "local-stack.json", document)
    try:
        yield {"endpoint": endpoint, "db": db, "table": table, "queue_url": queue_url, "session": session}
    finally:
        db.delete_table(TableName=table)
        session.client("sqs", endpoint_url=endpoint).delete_queue(QueueUrl=queue_url)
        server.stop()


def test_every_name_comes_from_the_local_stack(local_stack, capsys):
    status, out, err = run(capsys, "create", "--count", "3", "--json")
    assert status == 0, err
    created = json.loads(out)["taskIds"]
    items = [i for i in local_stack["db"].scan(TableName=local_stack["table"])["Items"] if "taskStatus" in i]  # tasks
    assert sorted(i["taskId"]["S"] for i in items) == sorted(created)
    assert {i["shard"]["N"] for i in items} <= {"0", "1"}  # QueueShards=2 from the stack's parameters
    status, out, err = run(capsys, "stats", "--json")
    assert status == 0, err
    stats = {s["queue"]: s for s in json.loads(out)["stats"]}
    assert stats["work"]["counts"]["PENDING"] == 3 and json.loads(out)["shedSource"] == "table"
    status, out, _ = run(capsys, "--stack-name", "taskqueue-local", "list", "--queue", "work", "--json")
    assert status == 0 and sorted(t["taskId"] for t in json.loads(out)["tasks"]) == sorted(created)
    status, out, err = run(capsys, "failed-events", "--wait-seconds", "0")
    assert status == 0 and out.strip() == f"FailedEventsQueue is empty ({local_stack['queue_url']})", err


def test_an_explicit_table_name_is_not_taken_from_the_local_stack(local_stack, capsys):
    status, _, err = run(capsys, "--table-name", "other", "stats", "--no-shed")
    # No credentials or region for AWS: the explicit target is not the local stack, and says what is missing.
    assert status == 1 and "taskq: error: " in err and "taskqueue-local" not in err


def test_locally_the_shed_column_counts_shed_tasks_in_the_table(local_stack, capsys):
    """No CloudWatch locally: SHED comes from the table (tasks a reader moved to SHED, kept for the retention)."""
    clock = FakeClock()
    store = TaskStore(local_stack["db"], Settings(queue_table_name=local_stack["table"]), clock)
    store.put_tasks(new_tasks(parse_create_request({"count": 2, "ttlSeconds": 5}, store.settings), clock.now_ms(), store.settings))
    clock.advance(10)
    assert store.candidates("work", 10) == []  # both expired: shed by the reader
    status, out, err = run(capsys, "stats")
    assert status == 0, err
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:3]}
    header = out.splitlines()[0].split()
    assert header[-1] == "SHED" and rows["work"][-1] == "2" and rows["calls"][-1] == "0"
    assert "local stack: counted from the table, no CloudWatch" in out
