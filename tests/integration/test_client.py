"""The producer client (taskqueue.client) against moto and DynamoDB Local: enqueue, status, wait with a fake clock,
cancel, the same enqueue sent twice, invalid input refused with nothing written, dead letters listed and redriven,
reaching a stack by table name or stack name; an enqueue writes its tasks and nothing else (the table's stream starts
the worker)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import boto3
import pytest

from taskqueue.client import TaskQueueClient, WakeUp
from taskqueue.client.discovery import DiscoveryError
from taskqueue.core.errors import InvalidField, TaskNotFound, WaitTimedOut
from taskqueue.core.states import TaskStatus
from taskqueue.services import Services
from taskqueue.store import TaskStore
from taskqueue.store.control import is_control_id
from taskqueue.wakeups.notify import Notifier
from taskqueue.work.worker import Worker
from tests.conftest import TABLE, make_settings


@pytest.fixture
def client(dynamodb, topics, clock) -> TaskQueueClient:
    settings = make_settings(topics, worker_timeout_seconds=180)
    return TaskQueueClient(Services(settings, TaskStore(dynamodb, settings, clock), Notifier(boto3.client("sns"), settings), clock))


def items(dynamodb: Any) -> list[dict[str, Any]]:
    """The task items (not the queues' control items)."""
    return [i for i in dynamodb.scan(TableName=TABLE, ConsistentRead=True)["Items"] if not is_control_id(i["taskId"]["S"])]


def run_worker(client: TaskQueueClient, runner) -> None:
    Worker(client.services.store, runner, capacity=1, owner="w1", clock=client.services.clock).run("work", 60, 170)


def test_an_enqueued_task_is_pending_with_what_was_asked(client):
    task_id = client.enqueue({"order": 42}, priority=7, ttl_seconds=600, max_attempts=5, run_seconds=30)
    task = client.get(task_id)
    assert (task.status, task.priority, task.max_attempts, task.run_seconds, task.payload) == (
        TaskStatus.PENDING, 7, 5, 30, {"order": 42})
    assert task.ttl == client.services.clock.now_ms() // 1000 + 600
    delayed = client.get(client.enqueue(delay_seconds=30))
    assert delayed.not_before_ms == client.services.clock.now_ms() + 30_000


def test_the_same_enqueue_sent_again_creates_nothing_new(client, dynamodb):
    first = client.enqueue({"n": 1}, task_id="order-42")
    again = client.enqueue({"n": 2}, task_id="order-42")  # a retry after a timeout, say
    assert first == again == "order-42"
    assert len(items(dynamodb)) == 1 and client.get("order-42").payload == {"n": 1}
    summary = client.enqueue_many({"n": 3}, task_ids=["order-42", "order-43"])
    assert (summary.created, summary.already_existed) == (1, 1)


@pytest.mark.parametrize(("call", "field"), [
    (lambda c: c.enqueue(priority=1000), "priority"),
    (lambda c: c.enqueue(queue="nope"), ""),
    (lambda c: c.enqueue(run_seconds=900), "runSeconds"),  # longer than ProcessTasks' 180 s Timeout leaves
    (lambda c: c.enqueue(delay_seconds=60, ttl_seconds=60), "delaySeconds"),
    (lambda c: c.enqueue_many(count=2, task_ids=["a"]), "count"),
    (lambda c: c.create({"queue": "work", "colour": "red"}), "colour"),
    (lambda c: c.enqueue({"preferences": {"language": 5}}, queue="calls"), "payload.preferences"),  # never matches
])
def test_invalid_input_is_refused_as_createtasks_refuses_it_and_nothing_is_written(client, dynamodb, call, field):
    with pytest.raises(Exception) as refused:
        call(client)
    assert not items(dynamodb)
    if field:
        assert isinstance(refused.value, InvalidField) and refused.value.field == field, refused.value


def test_status_attempts_result_and_last_error_come_back(client):
    done, failed = client.enqueue({"ok": True}), client.enqueue({"ok": False}, max_attempts=1)

    def runner(task):
        if not task.payload["ok"]:
            raise RuntimeError("the legacy system said no")
        return {"answer": 42}

    run_worker(client, runner)
    task = client.get(done)
    assert (task.status, task.attempts, task.result, task.last_error) == (TaskStatus.SUCCESS, 1, {"answer": 42}, None)
    task = client.get(failed)
    assert task.status is TaskStatus.FAILURE and "the legacy system said no" in task.last_error
    with pytest.raises(TaskNotFound):
        client.get("never-made")


def test_wait_returns_the_finished_task_and_times_out_on_the_clock_it_is_given(client):
    task_id = client.enqueue()
    clock = client.services.clock
    started = clock.monotonic()
    with pytest.raises(WaitTimedOut, match=f"task {task_id} is still PENDING after 30 s") as timed_out:
        client.wait(task_id, timeout=30)
    assert timed_out.value.task.status is TaskStatus.PENDING
    assert clock.monotonic() - started == pytest.approx(30)  # slept on the fake clock: the test took no 30 s
    run_worker(client, lambda task: {"ok": 1})
    assert client.wait(task_id, timeout=0).result == {"ok": 1}


def test_wait_sees_the_task_finish_while_it_waits(client):
    task_id = client.enqueue()
    clock = client.services.clock
    sleep = clock.sleep
    naps: list[float] = []
    working = []  # the worker's own pauses (it runs on the same clock) are not the client's

    def nap(seconds: float) -> None:  # the worker finishes the task during the third pause
        if working:
            sleep(seconds)
            return
        naps.append(seconds)
        sleep(seconds)
        if len(naps) == 3:
            working.append(True)
            run_worker(client, lambda task: {"ok": 2})
            working.clear()

    clock.sleep = nap
    assert client.wait(task_id, timeout=60).status is TaskStatus.SUCCESS
    assert naps == [0.5, 1.0, 2.0]  # reads less often as it waits


def test_cancel_takes_a_pending_task_out_and_it_shows_as_a_dead_letter_to_redrive(client, topics):
    task_id = client.enqueue({"x": 1})
    assert client.cancel(task_id).status is TaskStatus.CANCELLED
    assert [t.task_id for t in client.dead_letters("work", "CANCELLED")] == [task_id]
    assert client.dead_letters("work") == []
    redriven = client.redrive(task_id)
    assert redriven.status is TaskStatus.PENDING and redriven.attempts == 0
    assert topics.wakeups() == []  # nothing published: the redrive's write reaches the table's stream


def test_failed_tasks_are_listed_as_dead_letters_and_only_dead_letter_states_are_asked_for(client):
    task_id = client.enqueue(max_attempts=1)
    run_worker(client, lambda task: (_ for _ in ()).throw(RuntimeError("no")))
    assert [t.task_id for t in client.dead_letters()] == [task_id]
    with pytest.raises(Exception, match="not a dead-letter state"):
        client.dead_letters("work", "PENDING")


def test_connect_by_table_name_and_by_stack_name(aws, dynamodb, topics, tmp_path):
    env = {"TASKQ_LOCAL_STACK_FILE": str(tmp_path / "none.json"), "AWS_DEFAULT_REGION": "us-east-1"}
    by_table = TaskQueueClient.connect(table_name=TABLE, env=env)
    task_id = by_table.enqueue({"via": "table"})
    cfn = boto3.client("cloudformation")
    cfn.create_stack(StackName="taskqueue", TemplateBody=json.dumps({
        "Parameters": {"ProcessTasksTimeout": {"Type": "String", "Default": "900"}},
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {"QueueTableName": {"Value": TABLE}},
    }))
    by_stack = TaskQueueClient.connect(stack_name="taskqueue", env=env)
    assert by_stack.get(task_id).payload == {"via": "table"}
    # The stack's parameters reach the settings: ProcessTasks' 900 s Timeout allows a 5-minute task.
    assert by_stack.settings.worker_timeout_seconds == 900
    assert by_stack.get(by_stack.enqueue(run_seconds=300)).run_seconds == 300
    with pytest.raises(DiscoveryError, match="no queue table"):
        TaskQueueClient.connect(env=env)
    with pytest.raises(DiscoveryError, match="cannot read stack 'nope'"):
        TaskQueueClient.connect(stack_name="nope", env=env)


# ---- a producer writes its tasks and nothing else ------------------------------------------------------------------

def test_an_enqueue_writes_the_task_alone_and_says_the_stream_starts_the_worker(client, topics, dynamodb):
    task_id = client.enqueue({"n": 1})
    assert (task_id.wakeup, task_id.queue, task_id.created) == (WakeUp.STREAM, "work", True)
    assert client.enqueue_many(count=3).as_dict()["wakeup"] == "stream"
    assert topics.wakeups() == []  # nothing published
    items = dynamodb.scan(TableName=TABLE)["Items"]
    assert all(not item["taskId"]["S"].startswith("queue#") for item in items)  # no control item written


def test_user_code_imports_the_client_and_its_report_from_where_the_docs_say(tmp_path):
    """As an application does, in a fresh interpreter outside the repository: the names the README and the client's
    docstring use stay importable from there."""
    code = textwrap.dedent("""
        import inspect
        from taskqueue.client import Enqueued, TaskQueueClient, WakeUp
        from taskqueue.core.errors import TaskQueueError

        params = inspect.signature(TaskQueueClient.connect).parameters
        assert {"stack_name", "table_name"} <= set(params), sorted(params)
        assert issubclass(Enqueued, str) and issubclass(WakeUp, str) and issubclass(TaskQueueError, Exception)
        task_id = Enqueued("order-42", queue="work", created=True, wakeup=WakeUp("stream"))
        assert task_id == "order-42" and task_id.wakeup == "stream"
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
