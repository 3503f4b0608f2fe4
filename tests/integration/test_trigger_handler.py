"""Trigger against moto: one wake-up per queue per invocation, shed counting, partial batch failures."""

import json
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from taskqueue.model import new_tasks, parse_create_request
from taskqueue.notify import Notifier
from taskqueue.services import Services
from tests.support import LambdaContextStub, load_event, load_function

app = load_function("trigger")


def run(event: dict[str, Any], svc: Services) -> dict[str, Any]:
    app.services.cache_clear()
    original = app.services
    app.services = lambda: svc  # the handler's dependencies, handed in
    try:
        return app.lambda_handler(event, LambdaContextStub(function_name="Trigger"))
    finally:
        app.services = original


def emitted_metrics(capsys) -> dict[str, float]:
    """Sum of every EMF metric printed to stdout (Powertools flushes metrics as JSON lines)."""
    totals: dict[str, float] = {}
    for line in capsys.readouterr().out.splitlines():
        try:
            blob = json.loads(line)
        except ValueError:
            continue
        if "_aws" not in blob:
            continue
        for definition in blob["_aws"]["CloudWatchMetrics"]:
            for metric in definition["Metrics"]:
                value = blob[metric["Name"]]
                totals[metric["Name"]] = totals.get(metric["Name"], 0) + (sum(value) if isinstance(value, list) else value)
    return totals


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
    assert emitted_metrics(capsys).get("TasksShed") == 1
    assert topics.wakeups() == []


def test_malformed_record_is_reported_and_good_records_still_wake(services, topics):
    event = load_event("trigger-stream-malformed.json")
    result = run(event, services)
    bad_sequence = event["Records"][1]["dynamodb"]["SequenceNumber"]
    assert result == {"batchItemFailures": [{"itemIdentifier": bad_sequence}]}
    assert topics.wakeups() == ["work"]


def test_failed_publish_is_reported_as_batch_item_failure(services, topics):
    class FailingSns:
        def publish(self, **kwargs):
            raise ClientError({"Error": {"Code": "InternalError", "Message": "SNS is down"}}, "Publish")

    broken = Services(services.settings, services.store, Notifier(FailingSns(), services.settings), services.clock)
    event = load_event("trigger-stream-insert.json")
    result = run(event, broken)
    # Every record that needed the wake-up is reported, so the stream retries them: nothing is swallowed.
    assert result["batchItemFailures"] == [
        {"itemIdentifier": r["dynamodb"]["SequenceNumber"]} for r in event["Records"]
    ]


def test_tail_call_wakes_the_named_queue(services, topics):
    assert run(load_event("trigger-sns-tail-call.json"), services) == {"woken": ["work"]}
    assert topics.wakeups() == ["work"]


def test_safety_net_wakes_only_queues_with_claimable_tasks(services, topics, clock):
    assert run(load_event("trigger-safety-net.json"), services) == {"woken": []}
    tasks = new_tasks(parse_create_request({"queue": "calls"}, services.settings), clock.now_ms(), services.settings)
    services.store.put_tasks(tasks)
    assert run(load_event("trigger-safety-net.json"), services) == {"woken": ["calls"]}
    assert topics.wakeups() == ["calls"]


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
