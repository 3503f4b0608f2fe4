"""`taskq failed-events` against moto: list FailedEventsQueue without deleting, redrive asynchronous-invocation
failures (CreateTasks idempotently), explain stream batches, delete one handled message."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from taskq import failed_events
from taskq.main import main
from taskqueue.core.model import derived_task_ids
from taskqueue.services import Services
from taskqueue.store import StoreError, TaskStore
from tests.conftest import TABLE
from tests.faults import FaultyClient
from tests.support import load_function

create_tasks = load_function("create_tasks")

CREATE_TASKS_ARN = "arn:aws:lambda:us-east-1:123456789012:function:taskqueue-CreateTasksFunction-AbC123:$LATEST"
TRIGGER_ARN = "arn:aws:lambda:us-east-1:123456789012:function:taskqueue-TriggerFunction-XyZ789"
STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/taskqueue-QueueTable-1A2B/stream/2026-11-22T00:00:00.000"


@pytest.fixture(autouse=True)
def no_local_stack(tmp_path, monkeypatch):
    """A local stack someone runs in this checkout (`make up`) must not become these tests' target."""
    monkeypatch.setenv("TASKQ_LOCAL_STACK_FILE", str(tmp_path / "no-local-stack.json"))



def async_failure(payload: Any, request_id: str = "e4b46cbf-b738-5d16-9fbe-b32bd40a4c8a",
                  function_arn: str = CREATE_TASKS_ARN) -> dict[str, Any]:
    """What Lambda sends to an on-failure destination after an asynchronous invocation's retries."""
    return {
        "version": "1.0",
        "timestamp": "2026-11-22T12:00:05.568Z",
        "requestContext": {"requestId": request_id, "functionArn": function_arn,
                           "condition": "RetriesExhausted", "approximateInvokeCount": 3},
        "requestPayload": payload,
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "responsePayload": {"errorMessage": "DynamoDB is throttling 'taskqueue-QueueTable-1A2B' even after retries",
                            "errorType": "StoreError", "requestId": request_id, "stackTrace": []},
    }


def stream_failure() -> dict[str, Any]:
    """What Lambda sends to a DynamoDB event source's on-failure destination once a batch's retries are used up."""
    return {
        "requestContext": {"requestId": "316aa6d0-8154-xmpl-9af7-85d5f4a6bc81", "functionArn": TRIGGER_ARN,
                           "condition": "RetryAttemptsExhausted", "approximateInvokeCount": 6},
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "version": "1.0",
        "timestamp": "2026-11-22T12:13:49.717Z",
        "DDBStreamBatchInfo": {
            "shardId": "shardId-00000001573689847184-864758bb",
            "startSequenceNumber": "800000000003126276362",
            "endSequenceNumber": "800000000003126276370",
            "approximateArrivalOfFirstRecord": "2026-11-22T12:13:19Z",
            "approximateArrivalOfLastRecord": "2026-11-22T12:13:21Z",
            "batchSize": 3,
            "streamArn": STREAM_ARN,
        },
    }


class FakeLambda:
    """Lambda's Invoke, recorded (moto runs functions in Docker); ``then`` runs the invoked event like Lambda would."""

    def __init__(self, then: Any = None, status: int = 202) -> None:
        self.invokes: list[dict[str, Any]] = []
        self.then = then
        self.status = status

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        self.invokes.append({**kwargs, "Payload": json.loads(kwargs["Payload"])})
        if self.then is not None:
            self.then(self.invokes[-1]["Payload"])
        return {"StatusCode": self.status}


@pytest.fixture
def queue(aws) -> str:
    return boto3.client("sqs").create_queue(QueueName="taskqueue-FailedEventsQueue-1")["QueueUrl"]


@pytest.fixture
def lam(monkeypatch) -> FakeLambda:
    fake = FakeLambda()
    real = failed_events.FailedEventsTarget.client
    monkeypatch.setattr(failed_events.FailedEventsTarget, "client",
                        lambda self, service: fake if service == "lambda" else real(self, service))
    return fake


def task_count(dynamodb: Any) -> int:
    """Task items only: the queues' records are not tasks."""
    return dynamodb.scan(TableName=TABLE, Select="COUNT", FilterExpression="attribute_exists(taskStatus)")["Count"]


def send(url: str, body: Any) -> str:
    text = body if isinstance(body, str) else json.dumps(body)
    return boto3.client("sqs").send_message(QueueUrl=url, MessageBody=text)["MessageId"]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(["failed-events", "--wait-seconds", "0", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def listed(capsys, url: str) -> dict[str, dict[str, Any]]:
    status, out, err = run(capsys, "--queue-url", url, "--json")
    assert status == 0, err
    return {m["id"]: m for m in json.loads(out)["messages"]}


def test_lists_every_kind_of_message_and_leaves_them_in_the_queue(queue, capsys):
    created = send(queue, async_failure({"queue": "work", "count": 15}))
    batch = send(queue, stream_failure())
    odd = send(queue, "not json")
    messages = listed(capsys, queue)
    assert set(messages) == {created, batch, odd}
    a = messages[created]
    assert (a["source"], a["function"], a["condition"], a["attempts"]) == (
        "async", "taskqueue-CreateTasksFunction-AbC123", "RetriesExhausted", 3)
    assert a["event"] == {"queue": "work", "count": 15} and a["requestId"] == "e4b46cbf-b738-5d16-9fbe-b32bd40a4c8a"
    assert a["error"] == "Unhandled: StoreError: DynamoDB is throttling 'taskqueue-QueueTable-1A2B' even after retries"
    s = messages[batch]
    assert (s["source"], s["function"], s["error"]) == ("stream", "taskqueue-TriggerFunction-XyZ789", "Unhandled")
    assert s["batch"]["shardId"] == "shardId-00000001573689847184-864758bb" and s["batch"]["batchSize"] == 3
    assert "--sequence-number 800000000003126276362" in s["readRecords"][0]
    assert messages[odd]["source"] == "unknown" and messages[odd]["body"] == "not json"
    # Read, not consumed: visible again at once, to this command and any other reader.
    assert set(listed(capsys, queue)) == {created, batch, odd}
    attributes = boto3.client("sqs").get_queue_attributes(QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages"])
    assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "3"


def test_text_output_names_source_function_error_and_the_event_or_batch(queue, capsys):
    send(queue, async_failure({"queue": "work", "count": 15}))
    send(queue, stream_failure())
    status, out, _ = run(capsys, "--queue-url", queue)
    assert status == 0 and out.startswith("2 message(s) in FailedEventsQueue:")
    assert "source    asynchronous invocation (RetriesExhausted after 3 attempt(s))" in out
    assert "function  taskqueue-CreateTasksFunction-AbC123" in out
    assert 'event     {"queue": "work", "count": 15}' in out
    assert "source    stream batch (RetryAttemptsExhausted after 6 attempt(s))" in out
    assert ("batch     3 record(s) of table taskqueue-QueueTable-1A2B, shard shardId-00000001573689847184-864758bb, "
            "sequence 800000000003126276362 .. 800000000003126276370") in out
    assert "aws dynamodbstreams get-shard-iterator" in out
    assert "taskq failed-events --redrive" in out and "Stream batches cannot be invoked again" in out


def test_an_event_that_expired_unrun_says_so(queue, capsys):
    record = async_failure({"queue": "work"})
    record["requestContext"]["condition"] = "EventAgeExceeded"
    del record["responseContext"], record["responsePayload"]
    message = send(queue, record)
    assert listed(capsys, queue)[message]["error"].startswith("EventAgeExceeded: never run")


def test_empty_queue(queue, capsys):
    status, out, _ = run(capsys, "--queue-url", queue)
    assert status == 0 and out.strip() == f"FailedEventsQueue is empty ({queue})"


def test_delete_removes_one_handled_message(queue, capsys):
    keep = send(queue, stream_failure())
    gone = send(queue, stream_failure())
    status, out, _ = run(capsys, "--queue-url", queue, "--delete", gone)
    assert status == 0 and out.strip() == f"deleted {gone} (stream batch, taskqueue-TriggerFunction-XyZ789)"
    assert set(listed(capsys, queue)) == {keep}
    status, _, err = run(capsys, "--queue-url", queue, "--delete", gone)
    assert status == 1 and err.startswith(f"taskq: error: no message '{gone}'")


def test_redrive_invokes_asynchronous_failures_again_and_keeps_stream_batches(queue, lam, capsys):
    other = "arn:aws:lambda:us-east-1:123456789012:function:some-other-function"
    plain = send(queue, async_failure({"anything": 1}, function_arn=other))
    batch = send(queue, stream_failure())
    status, out, _ = run(capsys, "--queue-url", queue, "--redrive")
    assert status == 0
    assert lam.invokes == [{"FunctionName": other, "InvocationType": "Event", "Payload": {"anything": 1}}]
    assert f"redriven {plain}: some-other-function invoked again (asynchronously); message deleted" in out
    assert f"kept {batch} (stream): a stream batch cannot be invoked again" in out
    assert set(listed(capsys, queue)) == {batch}
    # Asked for by id, a stream batch is refused with the reason, and stays.
    status, out, _ = run(capsys, "--queue-url", queue, "--redrive", batch)
    assert status == 1 and f"kept {batch}" in out and set(listed(capsys, queue)) == {batch}
    status, _, err = run(capsys, "--queue-url", queue, "--redrive", "no-such-id")
    assert status == 1 and "no message 'no-such-id'" in err


def test_a_refused_invoke_keeps_the_message(queue, lam, capsys):
    lam.status = 500
    message = send(queue, async_failure({"queue": "work"}, function_arn="arn:aws:lambda:us-east-1:1:function:f"))
    status, out, _ = run(capsys, "--queue-url", queue, "--redrive", message)
    assert status == 1 and f"kept {message} (async): invoke failed, message kept" in out
    assert set(listed(capsys, queue)) == {message}


def test_redriving_create_tasks_creates_only_what_the_failed_invocation_did_not(queue, lam, services, dynamodb, settings, clock, capsys):
    """The schedule's invocation wrote 25 of 60 tasks, then failed past its retries. Redriven, CreateTasks gets
    the ids that invocation derived from its request id: the 35 missing tasks are created, none twice."""
    faulty = FaultyClient(dynamodb)
    failing = Services(settings, TaskStore(faulty, settings, clock), services.notifier, clock)
    faulty.fail("batch_write_item", "", "ThrottlingException")
    with pytest.raises(StoreError):
        create_tasks.handle({"queue": "work", "count": 60}, failing, "sched-req-7")
    assert task_count(dynamodb) == 25
    message = send(queue, async_failure({"queue": "work", "count": 60}, request_id="sched-req-7"))
    results: list[dict[str, Any]] = []
    # Lambda runs the redriven event as a new invocation, with a new request id.
    lam.then = lambda payload: results.append(create_tasks.handle(payload, services, "redrive-req-1"))
    status, out, _ = run(capsys, "--queue-url", queue, "--redrive", message, "--json")
    assert status == 0
    (sent,) = lam.invokes
    assert sent["FunctionName"] == CREATE_TASKS_ARN and sent["InvocationType"] == "Event"
    assert sent["Payload"] == {"queue": "work", "count": 60, "taskIds": list(derived_task_ids(60, "sched-req-7"))}
    assert (results[0]["created"], results[0]["alreadyExisted"]) == (35, 25)
    assert task_count(dynamodb) == 60
    assert json.loads(out)["redriven"][0]["id"] == message and listed(capsys, queue) == {}


def test_queue_from_the_stack_output(queue, capsys):
    cfn = boto3.client("cloudformation")
    body = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {"FailedEventsQueueUrl": {"Value": queue},
                    "CreateTasksFunctionName": {"Value": "taskqueue-CreateTasksFunction-AbC123"}},
    }
    cfn.create_stack(StackName="taskqueue", TemplateBody=json.dumps(body))
    message = send(queue, stream_failure())
    status, out, _ = run(capsys, "--stack-name", "taskqueue", "--json")
    assert status == 0 and [m["id"] for m in json.loads(out)["messages"]] == [message]
    cfn.create_stack(StackName="older", TemplateBody=json.dumps({"Resources": body["Resources"]}))
    status, _, err = run(capsys, "--stack-name", "older")
    assert status == 1 and "stack 'older' has no output FailedEventsQueueUrl" in err


def test_without_a_queue_says_what_to_pass(aws, capsys, monkeypatch):
    monkeypatch.delenv("FAILED_EVENTS_QUEUE_URL", raising=False)
    monkeypatch.delenv("TASKQ_STACK_NAME", raising=False)
    status, _, err = run(capsys)
    assert status == 1 and "pass --stack-name NAME or --queue-url URL" in err
