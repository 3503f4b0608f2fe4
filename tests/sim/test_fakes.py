"""The fakes' faults, streams, TTL, capacity and the SNS and Scheduler fakes, with the product's own code where it
reacts to them."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from sim.dynamodb import FakeDynamoDB
from sim.faults import Fault, Request
from sim.kernel import Kernel
from sim.scheduler import FakeScheduler, input_of
from sim.sns import FakeSNS, sns_event
from taskqueue.core import wake_schedule
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.settings import Settings
from taskqueue.store import StoreError, TaskStore
from taskqueue.store.dynamo import is_retryable
from taskqueue.wakeups.notify import Notifier

TABLE = "sim-queue"
SETTINGS = Settings(queue_table_name=TABLE, retry_base_seconds=0.0, worker_wake_up_topic_arn="arn:wake")


def _once(operation: str, fault: Fault) -> Any:
    """A fault hook that hits the first request of ``operation`` only."""
    hit: list[Request] = []

    def hook(request: Request) -> Fault | None:
        if request.operation == operation and not hit:
            hit.append(request)
            return fault
        return None

    return hook


def _run(kernel: Kernel, fn: Any) -> Any:
    invocation = kernel.invoke(fn, "main")
    kernel.run()
    return invocation.future.result()


def _with_tasks(count: int = 1, kernel: Kernel | None = None) -> tuple[FakeDynamoDB, TaskStore]:
    db = FakeDynamoDB.from_template({"QueueTable": TABLE}, kernel)
    store = TaskStore(db, SETTINGS, kernel.clock if kernel else None)
    now = kernel.clock.now_ms() if kernel else 1_795_348_800_000
    body = {"queue": "work", "count": count, "ttlSeconds": 600, "payload": {}}
    store.put_tasks(new_tasks(parse_create_request(body, SETTINGS), now, SETTINGS))
    return db, store


def test_throttling_past_the_sdks_retries_reaches_the_store_as_a_retryable_error() -> None:
    kernel = Kernel(1)
    db, store = _with_tasks(kernel=kernel)
    db.faults = _once("UpdateItem", Fault(error="ThrottlingException", before_s=2.0))
    candidate = store.candidates("work", 1)[0]
    with pytest.raises(StoreError) as refused:
        _run(kernel, lambda: store.claim(candidate, "w1"))
    assert is_retryable(refused.value) and kernel.now >= 2.0
    assert db.items(TABLE)[0]["taskStatus"]["S"] == "PENDING"


def test_a_lost_answer_leaves_the_write_applied() -> None:
    kernel = Kernel(2)
    db, store = _with_tasks(kernel=kernel)
    db.faults = _once("UpdateItem", Fault(error="InternalServerError", applied=True))
    candidate = store.candidates("work", 1)[0]
    with pytest.raises(StoreError):
        _run(kernel, lambda: store.claim(candidate, "w1"))
    assert db.items(TABLE)[0]["taskStatus"]["S"] == "TAKEN"


def test_a_request_the_sdk_sent_again_after_a_lost_answer_fails_its_own_condition() -> None:
    kernel = Kernel(3)
    db, store = _with_tasks(kernel=kernel)
    db.faults = _once("UpdateItem", Fault(retried=True))
    candidate = store.candidates("work", 1)[0]
    assert _run(kernel, lambda: store.claim(candidate, "w1")) is None  # the claim "lost"...
    assert db.items(TABLE)[0]["leaseOwner"]["S"] == "w1"  # ...to itself


def test_a_transport_timeout_is_a_botocore_error_not_a_client_error() -> None:
    db, _ = _with_tasks()
    db.faults = _once("GetItem", Fault(error="ReadTimeoutError"))
    with pytest.raises(ReadTimeoutError):
        db.get_item(TableName=TABLE, Key={"taskId": {"S": "x"}})


def test_a_slow_request_answers_after_its_latency() -> None:
    kernel = Kernel(4)
    db, store = _with_tasks(kernel=kernel)
    db.faults = _once("Query", Fault(after_s=60.0))
    found = _run(kernel, lambda: store.candidates("work", 1))
    assert len(found) == 1 and 60.0 <= kernel.now < 60.1


def test_a_lagging_index_shows_the_table_as_it_was() -> None:
    kernel = Kernel(5)
    db = FakeDynamoDB.from_template({"QueueTable": TABLE}, kernel)
    db.keep_index_history(30)
    store = TaskStore(db, SETTINGS, kernel.clock)

    def scenario() -> tuple[int, int]:
        body = {"queue": "work", "count": 2, "ttlSeconds": 600, "payload": {}}
        store.put_tasks(new_tasks(parse_create_request(body, SETTINGS), kernel.clock.now_ms(), SETTINGS))
        kernel.sleep(5)
        db.faults = lambda request: Fault(index_lag_s=10) if request.operation == "Query" else None
        lagging = len(store.candidates("work", 5, shed=False))
        db.faults = None
        return lagging, len(store.candidates("work", 5, shed=False))

    assert _run(kernel, scenario) == (0, 2)


def test_unprocessed_batch_items_are_written_by_the_stores_own_retry() -> None:
    db = FakeDynamoDB.from_template({"QueueTable": TABLE})
    db.faults = _once("BatchWriteItem", Fault(unprocessed=1.0))
    store = TaskStore(db, SETTINGS)
    body = {"queue": "work", "count": 5, "ttlSeconds": 600, "payload": {}}
    store.put_tasks(new_tasks(parse_create_request(body, SETTINGS), 1_795_348_800_000, SETTINGS))
    assert len(db.items(TABLE)) == 5 and db.capacity.totals.requests["BatchWriteItem"] == 2


def test_a_transaction_meeting_another_is_cancelled_naming_one_item() -> None:
    db = FakeDynamoDB.from_template({"QueueTable": TABLE}, rng=__import__("random").Random(1))
    db.faults = _once("TransactWriteItems", Fault(error="TransactionConflictException"))
    items = [{"Put": {"TableName": TABLE, "Item": {"taskId": {"S": f"t{i}"}}}} for i in range(3)]
    with pytest.raises(ClientError) as cancelled:
        db.transact_write_items(TransactItems=items)
    codes = [r["Code"] for r in cancelled.value.response["CancellationReasons"]]
    assert cancelled.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert sorted(codes) == ["None", "None", "TransactionConflict"] and db.items(TABLE) == []


def test_streams_record_changes_as_lambda_delivers_them_and_ttl_deletions_as_the_service() -> None:
    kernel = Kernel(6)
    db, store = _with_tasks(2, kernel)
    task_id = db.items(TABLE)[0]["taskId"]["S"]
    db.update_item(TableName=TABLE, Key={"taskId": {"S": task_id}}, UpdateExpression="SET priority = :p",
                   ExpressionAttributeValues={":p": {"N": "0"}})  # changes nothing: no record
    db.update_item(TableName=TABLE, Key={"taskId": {"S": task_id}}, UpdateExpression="SET priority = :p",
                   ExpressionAttributeValues={":p": {"N": "4"}})
    swept = db.sweep(now_s=1_795_348_800 + 3600)
    records = db.streams[TABLE].since(0)
    assert [r["eventName"] for r in records] == ["INSERT", "INSERT", "MODIFY", "REMOVE", "REMOVE"] and swept == 2
    modify = records[2]["dynamodb"]
    assert modify["OldImage"]["priority"] == {"N": "0"} and modify["NewImage"]["priority"] == {"N": "4"}
    assert modify["Keys"] == {"taskId": {"S": task_id}} and modify["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert records[3]["userIdentity"] == {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    assert "userIdentity" not in records[0] and records[0]["eventSourceARN"].endswith(f"table/{TABLE}/stream/"
                                                                                    "2026-11-22T00:00:00.000")
    assert [int(r["dynamodb"]["SequenceNumber"]) for r in records] == sorted(int(r["dynamodb"]["SequenceNumber"])
                                                                             for r in records)
    assert records[0]["dynamodb"]["ApproximateCreationDateTime"] == 1_795_348_800.0
    assert all(db.streams[TABLE].shard_of(r, 10) == db.streams[TABLE].shard_of(records[2], 10)
               for r in records if r["dynamodb"]["Keys"]["taskId"]["S"] == task_id)


def test_capacity_follows_dynamodbs_billing() -> None:
    db = FakeDynamoDB.from_template({"QueueTable": TABLE})
    put = db.put_item(TableName=TABLE, Item={"taskId": {"S": "three-kb"}, "payload": {"S": "x" * 3000}},
                      ReturnConsumedCapacity="TOTAL")
    assert put["ConsumedCapacity"]["CapacityUnits"] == 3.0  # as DynamoDB Local (tests/integration/test_dynamodb_engines.py)
    with pytest.raises(ClientError):
        db.put_item(TableName=TABLE, Item={"taskId": {"S": "three-kb"}}, ConditionExpression="attribute_not_exists(taskId)")
    totals = db.capacity.totals
    assert totals.write_units == 6.0 and totals.failed_conditions == 1  # a failed condition still costs its units
    read = db.get_item(TableName=TABLE, Key={"taskId": {"S": "three-kb"}}, ReturnConsumedCapacity="TOTAL")
    assert read["ConsumedCapacity"]["CapacityUnits"] == 0.5  # eventually consistent: half a unit per 4 KB
    db.transact_write_items(TransactItems=[{"Put": {"TableName": TABLE, "Item": {"taskId": {"S": "small"}}}}],
                            ReturnConsumedCapacity="TOTAL")
    assert db.capacity.totals.write_units == 8.0  # a transaction's item twice


def test_the_notifier_publishes_through_the_fake_sns_and_retries_a_throttled_publish() -> None:
    kernel = Kernel(7)
    sns = FakeSNS(kernel, topics=["arn:wake"])
    sns.faults = _once("Publish", Fault(error="Throttled"))
    notifier = Notifier(sns, SETTINGS, sleep=kernel.sleep)
    _run(kernel, lambda: notifier.publish_wakeup("work", "test"))
    (message,) = sns.take()
    assert message.topic_arn == "arn:wake" and message.attribute("queue") == "work" and notifier.retries == 1
    assert sns_event([message])["Records"][0]["Sns"]["MessageAttributes"]["queue"] == {"Type": "String", "Value": "work"}
    assert sns.take() == []


def test_the_scheduler_fake_answers_as_scheduler_and_fires_when_due() -> None:
    kernel = Kernel(8)
    scheduler = FakeScheduler(kernel)
    at = wake_schedule.at_expression(kernel.clock.now_ms() + 30_000)
    args = {"Name": "stack-wake-work", "GroupName": "default", "ScheduleExpression": at,
            "FlexibleTimeWindow": {"Mode": "OFF"}, "ActionAfterCompletion": "DELETE", "State": "ENABLED",
            "Target": {"Arn": "arn:trigger-fn", "RoleArn": "arn:role", "Input": '{"wakeQueue": "work"}'}}
    scheduler.create_schedule(**args)
    with pytest.raises(ClientError) as taken:
        scheduler.create_schedule(**args)
    assert taken.value.response["Error"]["Code"] == "ConflictException"
    with pytest.raises(ClientError) as missing:
        scheduler.update_schedule(**{**args, "Name": "other"})
    assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert scheduler.get_schedule(Name="stack-wake-work")["ScheduleExpression"] == at
    assert scheduler.due(kernel.clock.now_ms()) == []
    kernel.run(until=30)
    (fired,) = scheduler.due()
    assert input_of(fired) == {"wakeQueue": "work"} and scheduler.schedules == {}
