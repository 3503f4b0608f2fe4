"""Trigger against moto: one wake-up per queue per invocation, shed counting, partial batch failures."""

import json
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from taskqueue.core.errors import TaskQueueError
from taskqueue.core.handshake import WAKE_IN_FLIGHT_SECONDS
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.services import Services
from taskqueue.wakeups.notify import PUBLISH_ATTEMPTS, Notifier
from tests.support import LambdaContextStub, emitted, load_event, load_function, metric_total, metric_totals

app = load_function("trigger")


def run(event: dict[str, Any], svc: Services) -> dict[str, Any]:
    app.services.cache_clear()
    original = app.services
    app.services = lambda: svc  # the handler's dependencies, handed in
    try:
        return app.lambda_handler(event, LambdaContextStub(function_name="Trigger"))
    finally:
        app.services = original


def stream_record(name: str, index: int, sequence: str, **changes: Any) -> dict[str, Any]:
    """Record ``index`` of events/<name> with a new sequence number and event id, its image fields changed."""
    record = json.loads(json.dumps(load_event(name)["Records"][index]))
    record["dynamodb"]["SequenceNumber"] = sequence
    record["eventID"] = f"event-{sequence}"
    image = record["dynamodb"].get("NewImage") or record["dynamodb"]["OldImage"]
    for field, value in changes.items():
        image[field] = {"S": value}
    return record


def insert(sequence: str, **changes: Any) -> dict[str, Any]:
    return stream_record("trigger-stream-insert.json", 0, sequence, **changes)


def shed(sequence: str, **changes: Any) -> dict[str, Any]:
    return stream_record("trigger-stream-ttl-remove.json", 0, sequence, **changes)


def unreadable(record: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    """``record`` with a value Lambda's deserializer cannot read (an image attribute, or the event name)."""
    if field == "eventName":
        record["eventName"] = value
    else:
        record["dynamodb"]["NewImage"][field] = value
    return record


class SnsDownFor:
    """SNS that refuses wake-ups for some queues while ``down``, and passes the rest to moto."""

    def __init__(self, queues: set[str]) -> None:
        self.real = boto3.client("sns")
        self.queues = queues
        self.down = True
        self.refused = 0

    def publish(self, **kwargs: Any) -> Any:
        if self.down and kwargs["MessageAttributes"]["queue"]["StringValue"] in self.queues:
            self.refused += 1
            raise ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "Publish")
        return self.real.publish(**kwargs)


def test_stream_batch_wakes_each_queue_once(services, topics):
    event = load_event("trigger-stream-insert.json")
    calls = json.loads(json.dumps(event["Records"][0]))
    calls["dynamodb"]["NewImage"]["queue"]["S"] = "calls"
    calls["dynamodb"]["SequenceNumber"] = "222"
    event["Records"].append(calls)
    result = run(event, services)
    assert result == {"batchItemFailures": []}
    assert sorted(topics.wakeups()) == ["calls", "work"]


def test_ttl_removal_of_a_pending_task_counts_as_shed_and_wakes_nobody(services, topics, capsys):
    capsys.readouterr()
    assert run(load_event("trigger-stream-ttl-remove.json"), services) == {"batchItemFailures": []}
    assert metric_totals(capsys.readouterr().out).get("TasksShed") == 1
    assert topics.wakeups() == []


def test_a_malformed_record_is_logged_and_counted_and_does_not_block_the_shard(services, topics, capsys, caplog):
    """A record that can never succeed is not a batch item failure (the stream would retry it 5 times and
    block the shard): it is logged with its eventID and reason and counted as MalformedRecords."""
    event = load_event("trigger-stream-malformed.json")
    event["Records"][2]["dynamodb"]["NewImage"]["queue"]["S"] = "calls"  # both good records must wake their queue
    bad = event["Records"][1]
    capsys.readouterr()
    result = run(event, services)
    out = capsys.readouterr().out
    assert result == {"batchItemFailures": []}
    assert sorted(topics.wakeups()) == ["calls", "work"]
    assert [(n, d["queue"], v) for n, d, v, *_ in emitted(out) if n == "MalformedRecords"] == [("MalformedRecords", "unknown", 1)]
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert errors[0].event_id == bad["eventID"]
    assert "missing queue, taskStatus" in errors[0].reason


@pytest.mark.parametrize(
    ("record", "queue"),
    [
        (insert("2", queue=""), "unknown"),
        (insert("2", taskStatus="LIMBO"), "work"),
        (shed("2", taskStatus="NOT-A-STATE"), "work"),
        (insert("2", queue="not-configured"), "unknown"),
        (unreadable(insert("2"), "priority", {"N": "not-a-number"}), "work"),
        (unreadable(insert("2"), "priority", {"XS": "no such type"}), "work"),
        (unreadable(insert("2"), "eventName", "UPSERT"), "work"),
    ],
)
def test_records_that_can_never_succeed_are_counted_per_queue_not_retried(services, topics, capsys, record, queue):
    capsys.readouterr()
    result = run({"Records": [insert("1"), record, insert("3", queue="calls")]}, services)
    out = capsys.readouterr().out
    assert result == {"batchItemFailures": []}
    assert sorted(topics.wakeups()) == ["calls", "work"]
    assert [(n, d["queue"], v) for n, d, v, *_ in emitted(out) if n == "MalformedRecords"] == [("MalformedRecords", queue, 1)]
    assert metric_total(out, "TasksShed") == 0


def test_after_a_failed_record_no_later_record_takes_effect_and_a_retried_shed_counts_once(services, topics, capsys):
    """Publish fails for record 2 of 4; records 3-4 are TTL sheds. The stream retries from record 2, so 3-4
    must not take effect now (they are reported failed too) and count exactly once when re-delivered."""
    sns = SnsDownFor({"calls"})
    flaky = Services(services.settings, services.store, Notifier(sns, services.settings, sleep=services.clock.sleep), services.clock)
    batch = [insert("1"), insert("2", queue="calls"), shed("3"), shed("4", queue="calls")]
    capsys.readouterr()

    first = run({"Records": batch}, flaky)
    out = capsys.readouterr().out
    assert first == {"batchItemFailures": [{"itemIdentifier": s} for s in ("2", "3", "4")]}
    assert sns.refused == PUBLISH_ATTEMPTS  # the Notifier tried it again before giving the record up
    assert topics.wakeups() == ["work"]
    shed_first = metric_total(out, "TasksShed")

    # The event source mapping re-delivers from the first failed record; SNS is back.
    sns.down = False
    again = run({"Records": batch[1:]}, flaky)
    out = capsys.readouterr().out
    assert again == {"batchItemFailures": []}
    assert topics.wakeups() == ["calls"]
    assert shed_first + metric_total(out, "TasksShed") == 2
    assert metric_total(out, "TasksShed", queue="work") == 1 and metric_total(out, "TasksShed", queue="calls") == 1
    assert metric_total(out, "MalformedRecords") == 0


def test_failed_publish_is_reported_as_batch_item_failure(services, topics):
    class FailingSns:
        def publish(self, **kwargs):
            raise ClientError({"Error": {"Code": "InternalError", "Message": "SNS is down"}}, "Publish")

    broken = Services(services.settings, services.store, Notifier(FailingSns(), services.settings, sleep=services.clock.sleep), services.clock)
    event = load_event("trigger-stream-insert.json")
    result = run(event, broken)
    # Every record that needed the wake-up is reported, so the stream retries them: nothing is swallowed.
    assert result["batchItemFailures"] == [
        {"itemIdentifier": r["dynamodb"]["SequenceNumber"]} for r in event["Records"]
    ]


def test_tail_call_wakes_the_named_queue(services, topics):
    assert run(load_event("trigger-sns-tail-call.json"), services) == {"woken": ["work"]}
    assert topics.wakeups() == ["work"]


def two_queue_tail_call() -> dict[str, Any]:
    event = load_event("trigger-sns-tail-call.json")
    calls = json.loads(json.dumps(event["Records"][0]))
    calls["Sns"]["MessageAttributes"]["queue"]["Value"] = "calls"
    calls["Sns"]["Message"] = json.dumps({"queue": "calls", "reason": "tail-call"})
    event["Records"].append(calls)
    return event


def test_a_tail_call_whose_wake_up_cannot_be_published_fails_the_invocation_after_trying_every_queue(services, topics):
    """Lambda retries a failed asynchronous invocation (EventInvokeConfig MaximumRetryAttempts 2): the tail call
    is delivered again instead of stranding the queue until the safety net. The other queue is still woken."""
    sns = SnsDownFor({"work"})
    flaky = Services(services.settings, services.store, Notifier(sns, services.settings, sleep=services.clock.sleep), services.clock)
    with pytest.raises(TaskQueueError, match=r"could not wake 1 of 2 queue\(s\) \(woken: \['calls'\]\).*work"):
        run(two_queue_tail_call(), flaky)
    assert sns.refused == PUBLISH_ATTEMPTS
    assert topics.wakeups() == ["calls"]
    # Lambda's retry, SNS back: both queues woken (a second wake-up of "calls" is harmless).
    sns.down = False
    assert run(two_queue_tail_call(), flaky) == {"woken": ["work", "calls"]}
    assert sorted(topics.wakeups()) == ["calls", "work"]


def test_a_tail_call_survives_publishes_refused_a_few_times(services, topics):
    class RefusesTwice:
        def __init__(self) -> None:
            self.real = boto3.client("sns")
            self.calls = 0

        def publish(self, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls <= 2:
                raise ClientError({"Error": {"Code": "KMSThrottling", "Message": "slow down"}}, "Publish")
            return self.real.publish(**kwargs)

    sns = RefusesTwice()
    flaky = Services(services.settings, services.store, Notifier(sns, services.settings, sleep=services.clock.sleep), services.clock)
    assert run(load_event("trigger-sns-tail-call.json"), flaky) == {"woken": ["work"]}
    assert sns.calls == 3 and flaky.notifier.retries == 2
    assert topics.wakeups() == ["work"]


def test_safety_net_wakes_only_queues_with_claimable_tasks(services, topics, clock):
    assert run(load_event("trigger-safety-net.json"), services) == {"woken": []}
    tasks = new_tasks(parse_create_request({"queue": "calls"}, services.settings), clock.now_ms(), services.settings)
    services.store.put_tasks(tasks)
    assert run(load_event("trigger-safety-net.json"), services) == {"woken": ["calls"]}
    assert topics.wakeups() == ["calls"]


def test_safety_net_sheds_expired_entries_hiding_live_work_and_counts_them_once(services, topics, clock, capsys):
    expired = new_tasks(parse_create_request({"queue": "calls", "count": 30, "ttlSeconds": 5}, services.settings),
                        clock.now_ms(), services.settings)
    services.store.put_tasks(expired)
    clock.advance(1)
    live = new_tasks(parse_create_request({"queue": "calls"}, services.settings), clock.now_ms(), services.settings)
    services.store.put_tasks(live)
    clock.advance(10)  # DynamoDB's TTL has not deleted the 30 expired calls: they sit at the FIFO head
    capsys.readouterr()
    assert run(load_event("trigger-safety-net.json"), services) == {"woken": ["calls"]}
    shed = [(v, d) for name, d, v, *_ in emitted(capsys.readouterr().out) if name == "TasksShed"]
    assert shed == [(30, {"service": "taskqueue", "queue": "calls"})]
    assert {services.store.get(t.task_id).status.value for t in expired} == {"SHED"}
    # Its wake-up is trusted while it may still be on its way (WAKE_IN_FLIGHT_SECONDS); then the net wakes again.
    assert run(load_event("trigger-safety-net.json"), services) == {"woken": []}
    clock.advance(WAKE_IN_FLIGHT_SECONDS)
    assert run(load_event("trigger-safety-net.json"), services) == {"woken": ["calls"]}
    assert [n for n, *_ in emitted(capsys.readouterr().out)].count("TasksShed") == 0  # counted once


def test_unknown_event_is_refused_with_what_it_accepts(services):
    with pytest.raises(Exception, match="stream batch, an SNS notification or a scheduled event"):
        run({"hello": "world"}, services)


def test_stream_records_from_moto_shape_are_handled(services, topics, dynamodb, clock):
    """A real INSERT read from the table's stream (converted the way Lambda delivers it) wakes the queue."""
    tasks = new_tasks(parse_create_request({}, services.settings), clock.now_ms(), services.settings)
    services.store.put_tasks(tasks)
    streams = boto3.client("dynamodbstreams")
    arn = dynamodb.describe_table(TableName=services.settings.queue_table_name)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    for record in records:
        record["eventSourceARN"] = arn
        record["dynamodb"]["ApproximateCreationDateTime"] = int(record["dynamodb"]["ApproximateCreationDateTime"].timestamp())
    assert run({"Records": records}, services) == {"batchItemFailures": []}
    assert topics.wakeups() == ["work"]


def test_an_invocation_that_dies_after_its_batch_counts_no_shed_and_its_retry_counts_each_once(services, topics, capsys, monkeypatch):
    """The stream retries a whole batch whose invocation failed (a timeout, a crash after the records were
    handled): a shed counted before the failure would be counted again by the retry."""
    real = app.process_partial_response

    def dies_after_the_batch(**kwargs):
        real(**kwargs)
        raise TimeoutError("Task timed out")

    batch = [shed("1"), shed("2", queue="calls"), insert("3")]
    capsys.readouterr()
    monkeypatch.setattr(app, "process_partial_response", dies_after_the_batch)
    with pytest.raises(TimeoutError):
        run({"Records": batch}, services)
    assert metric_total(capsys.readouterr().out, "TasksShed") == 0

    monkeypatch.setattr(app, "process_partial_response", real)
    assert run({"Records": batch}, services) == {"batchItemFailures": []}
    out = capsys.readouterr().out
    assert metric_total(out, "TasksShed", queue="work") == 1 and metric_total(out, "TasksShed", queue="calls") == 1
