"""The producer client (taskqueue.client) against moto and DynamoDB Local: enqueue, status, wait with a fake clock,
cancel, the same enqueue sent twice, invalid input refused with nothing written, dead letters listed and redriven,
reaching a stack by table name or stack name, and what each enqueue's wake-up did (woken, watched, in flight, paused,
failed and why: a refused permission, no topic known), warned once or raised (strict)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from typing import Any

import boto3
import pytest

from taskqueue.client import Enqueued, TaskQueueClient
from taskqueue.client.discovery import DiscoveryError
from taskqueue.core.errors import ConfigError, InvalidField, TaskNotFound, WaitTimedOut, WakeUpFailed
from taskqueue.core.states import TaskStatus
from taskqueue.services import Services
from taskqueue.store import TaskStore
from taskqueue.store.control import is_control_id
from taskqueue.wakeups.notify import Notifier
from taskqueue.work.worker import Worker
from tests.conftest import TABLE, make_settings
from tests.faults import FaultyClient, on_item


@pytest.fixture
def client(dynamodb, topics, clock) -> TaskQueueClient:
    settings = make_settings(topics, worker_timeout_seconds=180)
    return TaskQueueClient(Services(settings, TaskStore(dynamodb, settings, clock), Notifier(boto3.client("sns"), settings), clock))


def items(dynamodb: Any) -> list[dict[str, Any]]:
    """The task items (not the queues' control items, which the wake-up handshake writes)."""
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
    assert topics.wakeups() == ["work"]  # its worker woken as a producer wakes it (the wake-up handshake)


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
        "Outputs": {"QueueTableName": {"Value": TABLE}, "TriggerTopicArn": {"Value": topics.trigger_arn}},
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


# ---- what happened to the wake-up (issue 28: "the client hides failure") -------------------------------------------

def client_with(dynamodb: Any, topics: Any, clock: Any, *, sns: Any = None, db: Any = None, strict: bool = False,
                with_topics: bool = True) -> TaskQueueClient:
    """A client on the test's table and topics, its SNS or DynamoDB client replaced (a FaultyClient) if given."""
    settings = make_settings(topics if with_topics else None, worker_timeout_seconds=180)
    store = TaskStore(db or dynamodb, settings, clock)
    return TaskQueueClient(Services(settings, store, Notifier(sns or boto3.client("sns"), settings), clock), strict=strict)


def client_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "taskqueue.client" and r.levelno == logging.WARNING]


def test_enqueue_returns_the_id_as_before_and_says_the_queue_was_woken_then_that_a_wake_up_is_in_flight(client, topics):
    task_id = client.enqueue({"order": 42}, task_id="order-42")
    assert isinstance(task_id, str) and task_id == "order-42" and json.dumps({"id": task_id}) == '{"id": "order-42"}'
    assert isinstance(task_id, Enqueued) and task_id.task_id == "order-42" and type(task_id.task_id) is str
    assert (task_id.wakeup, task_id.queue, task_id.created) == ("woken", "work", True)
    assert task_id.wakeup.cause is None and task_id.wakeup.problem is None
    assert client.get(task_id).payload == {"order": 42}  # what user code does with it: unchanged
    again = client.enqueue({"order": 43})
    assert again.wakeup == "in-flight" and again.created
    assert client.enqueue({"order": 42}, task_id="order-42").created is False  # there already: nothing written
    assert topics.wakeups() == ["work"]  # one wake-up for the three


def test_enqueue_says_a_worker_already_watches_the_queue(client, topics, clock):
    assert client.services.store.watch("work", "worker-1", clock.now_ms() + 30_000) is not None
    assert client.enqueue().wakeup == "watched"
    assert client.enqueue_many(count=3).wakeup == "watched"
    assert topics.wakeups() == []


def test_enqueue_says_the_queue_is_paused(client, topics):
    client.services.store.pause("work")
    enqueued = client.enqueue()
    assert enqueued.wakeup == "paused" and not enqueued.wakeup.failed
    assert topics.wakeups() == []


def test_a_refused_publish_is_reported_with_the_permission_and_topic_and_warned_once(dynamodb, topics, clock, caplog):
    refusing = FaultyClient(boto3.client("sns")).fail("publish", "AuthorizationError", "AuthorizationError")
    client = client_with(dynamodb, topics, clock, sns=refusing)
    first, second = client.enqueue({"n": 1}), client.enqueue({"n": 2})
    for enqueued in (first, second):
        assert enqueued.wakeup == "failed" and enqueued.wakeup.failed and enqueued.wakeup.cause == "access-denied"
        problem = enqueued.wakeup.problem
        assert "sns:Publish" in problem and topics.wake_up_arn in problem and "ProducerPolicyArn" in problem, problem
        assert client.get(enqueued).status is TaskStatus.PENDING  # the task is written all the same
    assert refusing.raised == [("publish", "AuthorizationError")] * 2  # the claim was withdrawn: the second tried too
    warnings = client_warnings(caplog)
    assert len(warnings) == 1, warnings  # once, not per enqueue
    assert "access-denied" in warnings[0] and "sns:Publish" in warnings[0] and "about a minute" in warnings[0]
    # CreateTasks' answer carries the same (taskq create --json prints it).
    summary = client_with(dynamodb, topics, clock, sns=FaultyClient(boto3.client("sns")).fail(
        "publish", "AuthorizationError")).enqueue_many(count=2)
    assert summary.as_dict()["wakeup"] == "failed" and summary.as_dict()["wakeupCause"] == "access-denied"
    assert "sns:Publish" in summary.as_dict()["wakeupProblem"]


def test_a_refused_update_of_the_queues_control_item_is_reported(dynamodb, topics, clock):
    db = FaultyClient(dynamodb).fail("update_item", "AccessDeniedException", when=on_item("queue#work"))
    enqueued = client_with(dynamodb, topics, clock, db=db).enqueue()
    assert (enqueued.wakeup, enqueued.wakeup.cause) == ("failed", "access-denied")
    assert "dynamodb:UpdateItem" in enqueued.wakeup.problem and "control item" in enqueued.wakeup.problem
    assert topics.wakeups() == []


def test_strict_raises_a_clear_error_after_writing_the_task(dynamodb, topics, clock):
    refusing = FaultyClient(boto3.client("sns")).fail("publish", "AuthorizationError", "AuthorizationError")
    strict = client_with(dynamodb, topics, clock, sns=refusing, strict=True)
    with pytest.raises(WakeUpFailed) as failed:
        strict.enqueue({"n": 1}, task_id="order-7")
    error = failed.value
    assert (error.queue, error.task_ids, error.cause) == ("work", ("order-7",), "access-denied")
    assert "order-7" in str(error) and "sns:Publish" in str(error) and "were written" in str(error)
    assert strict.get("order-7").status is TaskStatus.PENDING  # written: sending it again with the id is safe
    # Per call: a lenient call on a strict client, a strict call on a lenient one.
    assert strict.enqueue(strict=False).wakeup == "failed"
    lenient = client_with(dynamodb, topics, clock, sns=FaultyClient(boto3.client("sns")).fail("publish", "NotFound"))
    with pytest.raises(WakeUpFailed, match="not-found"):
        lenient.enqueue_many(count=2, strict=True)


def test_connected_by_table_name_alone_says_wake_ups_rely_on_the_backstops(aws, dynamodb, topics, tmp_path, caplog):
    env = {"TASKQ_LOCAL_STACK_FILE": str(tmp_path / "none.json"), "AWS_DEFAULT_REGION": "us-east-1"}
    by_table = TaskQueueClient.connect(table_name=TABLE, env=env)
    assert by_table.wake_up_topic_arn is None
    warnings = client_warnings(caplog)
    assert len(warnings) == 1 and "backstops" in warnings[0] and "wake_up_topic_arn" in warnings[0], warnings
    enqueued = by_table.enqueue()
    assert (enqueued.wakeup, enqueued.wakeup.cause) == ("failed", "no-topic")
    assert "WorkerWakeUpTopicArn" in enqueued.wakeup.problem
    assert len(client_warnings(caplog)) == 1  # said at connect; not again per enqueue
    assert by_table.services.store.read_record("work").wake_sent_ms is None  # nothing claimed for nobody
    with pytest.raises(ConfigError, match="strict client must be able to wake workers.*WorkerWakeUpTopicArn"):
        TaskQueueClient.connect(table_name=TABLE, env=env, strict=True)
    # With the topic given, the wake-up goes out.
    with_topic = TaskQueueClient.connect(table_name=TABLE, env=env, wake_up_topic_arn=topics.wake_up_arn, strict=True)
    assert with_topic.wake_up_topic_arn == topics.wake_up_arn
    assert with_topic.enqueue().wakeup == "woken" and topics.wakeups() == ["work"]


def test_user_code_imports_the_client_and_its_report_from_where_the_docs_say(tmp_path):
    """As an application does, in a fresh interpreter outside the repository: the names the README and the client's
    docstring use stay importable from there."""
    code = textwrap.dedent("""
        import inspect
        from taskqueue.client import Enqueued, TaskQueueClient, WakeUp
        from taskqueue.core.errors import TaskQueueError, WakeUpFailed

        params = inspect.signature(TaskQueueClient.connect).parameters
        assert {"stack_name", "table_name", "wake_up_topic_arn", "strict"} <= set(params), sorted(params)
        assert "strict" in inspect.signature(TaskQueueClient.enqueue).parameters
        assert issubclass(Enqueued, str) and issubclass(WakeUp, str) and issubclass(WakeUpFailed, TaskQueueError)
        task_id = Enqueued("order-42", queue="work", created=True, wakeup=WakeUp("woken"))
        assert task_id == "order-42" and task_id.wakeup == "woken"
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
