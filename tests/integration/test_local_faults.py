"""The faults the local engine injects (local/faults/faults.py), each checked on the serialized moto server: refused
requests (per SDK call and per request, exempt clients, seeds), conflicts in transactions, SNS publishes, index
lag, and DynamoDB's item-size limit."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from local.emulator.server import Emulator
from local.faults.faults import Faults
from local.faults.item_size import LIMIT_BYTES, item_size


@pytest.fixture(scope="module")
def server() -> Iterator[Emulator]:
    with Emulator() as running:
        yield running


def new_table(server: Emulator) -> str:
    name = f"faults-{uuid.uuid4().hex[:8]}"
    server.client(faults=False).create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}, {"AttributeName": "g", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[{"IndexName": "ByGroup", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                                 "Projection": {"ProjectionType": "ALL"}}],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
    return name


def code_of(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return exc.value.response["Error"]["Code"]


def test_a_call_refused_per_call_is_refused_on_every_retry_and_reaches_the_code(server):
    server.set_faults(Faults(dynamodb_errors={"share": 1.0, "codes": ["ProvisionedThroughputExceededException"],
                                              "per": "call", "operations": ["GetItem"]}))
    table = new_table(server)
    client = server.client(max_attempts=1)  # botocore: 1 retry, 2 attempts
    with pytest.raises(ClientError) as refused:
        client.get_item(TableName=table, Key={"id": {"S": "a"}})
    assert code_of(refused) == "ProvisionedThroughputExceededException"
    assert "injected by the local engine's faults" in refused.value.response["Error"]["Message"]
    client.put_item(TableName=table, Item={"id": {"S": "a"}})  # another operation: untouched
    errors = server.fault_report()["errors"]
    name = "dynamodb:GetItem:ProvisionedThroughputExceededException"
    assert errors["refused_requests"] == {name: 2} and errors["refused_calls"] == {name: 1}
    assert errors["refused_last_attempts"] == {name: 1}


def test_an_exempt_client_is_never_refused(server):
    server.set_faults(Faults(dynamodb_errors={"share": 1.0, "per": "request"}))
    table = new_table(server)
    checker = server.client(faults=False)
    checker.put_item(TableName=table, Item={"id": {"S": "a"}})
    assert checker.get_item(TableName=table, Key={"id": {"S": "a"}})["Item"]
    with pytest.raises(ClientError):
        server.client(max_attempts=0).get_item(TableName=table, Key={"id": {"S": "a"}})


def refusal_pattern(server: Emulator, seed: int, table: str) -> list[bool]:
    server.set_faults(Faults(seed=seed, dynamodb_errors={"share": 0.3, "per": "request", "codes": ["ThrottlingException"],
                                                         "operations": ["GetItem"]}))
    client = server.client(max_attempts=0)
    pattern = []
    for _ in range(40):
        try:
            client.get_item(TableName=table, Key={"id": {"S": "a"}})
            pattern.append(False)
        except ClientError:
            pattern.append(True)
    return pattern


def test_the_same_seed_gives_the_same_faults_to_the_same_requests(server):
    table = new_table(server)
    first, again, other = (refusal_pattern(server, seed, table) for seed in (5, 5, 6))
    assert first == again and first != other
    assert 4 <= sum(first) <= 20  # about 30 %


def test_a_burst_refuses_consecutive_requests(server):
    server.set_faults(Faults(seed=1, dynamodb_errors={"share": 0.05, "per": "request", "burst": 5, "operations": ["GetItem"]}))
    table = new_table(server)
    client = server.client(max_attempts=0)
    pattern = []
    for _ in range(200):
        try:
            client.get_item(TableName=table, Key={"id": {"S": "a"}})
            pattern.append("-")
        except ClientError:
            pattern.append("x")
    runs = [len(r) for r in "".join(pattern).split("-") if r]
    assert runs and all(n % 5 == 0 for n in runs), "".join(pattern)


def test_a_conflict_in_a_transaction_is_answered_as_dynamodb_answers_it_and_nothing_is_written(server):
    server.set_faults(Faults(dynamodb_errors={"share": 1.0, "codes": ["TransactionConflictException"],
                                              "operations": ["TransactWriteItems", "UpdateItem"]}))
    table = new_table(server)
    client = server.client(max_attempts=0)
    with pytest.raises(ClientError) as cancelled:
        client.transact_write_items(TransactItems=[
            {"Put": {"TableName": table, "Item": {"id": {"S": "a"}}}},
            {"Put": {"TableName": table, "Item": {"id": {"S": "b"}}}}])
    assert code_of(cancelled) == "TransactionCanceledException"
    reasons = [r["Code"] for r in cancelled.value.response["CancellationReasons"]]
    assert sorted(reasons) == ["None", "TransactionConflict"]
    with pytest.raises(ClientError) as conflict:
        client.update_item(TableName=table, Key={"id": {"S": "a"}}, UpdateExpression="SET v = :v",
                           ExpressionAttributeValues={":v": {"N": "1"}})
    assert code_of(conflict) == "TransactionConflictException"
    assert server.client(faults=False).scan(TableName=table)["Count"] == 0


def test_sns_publishes_are_refused_and_other_sns_calls_are_not(server):
    server.set_faults(Faults(sns_publish_errors={"share": 1.0}))
    sns = server.client("sns", max_attempts=0)
    arn = sns.create_topic(Name=f"t-{uuid.uuid4().hex[:6]}")["TopicArn"]
    with pytest.raises(ClientError) as refused:
        sns.publish(TopicArn=arn, Message="m")
    assert code_of(refused) == "KMSThrottling"
    server.client("sns", faults=False).publish(TopicArn=arn, Message="m")
    assert server.fault_report()["errors"]["refused_calls"] == {"sns:Publish:KMSThrottling": 1}


def group(client: Any, table: str) -> list[tuple[str, str]]:
    items = client.query(TableName=table, IndexName="ByGroup", KeyConditionExpression="g = :g",
                         ExpressionAttributeValues={":g": {"S": "x"}})["Items"]
    return sorted((i["id"]["S"], i.get("v", {}).get("S", "")) for i in items)


def test_an_index_shows_writes_late_and_still_returns_the_stale_entry_of_a_changed_item(server):
    lag = 0.6
    server.set_faults(Faults(index_lag=lag))
    table = new_table(server)
    client = server.client()
    client.put_item(TableName=table, Item={"id": {"S": "a"}, "g": {"S": "x"}, "v": {"S": "old"}})
    assert group(client, table) == []  # written, not in the index yet
    assert client.get_item(TableName=table, Key={"id": {"S": "a"}}, ConsistentRead=True)["Item"]  # the table has it
    time.sleep(lag + 0.1)
    assert group(client, table) == [("a", "old")]
    # Claimed meanwhile: out of the index on the table, but the index still returns it, as it was.
    client.update_item(TableName=table, Key={"id": {"S": "a"}}, UpdateExpression="SET v = :v REMOVE g",
                       ExpressionAttributeValues={":v": {"S": "new"}})
    client.put_item(TableName=table, Item={"id": {"S": "b"}, "g": {"S": "x"}})
    assert group(client, table) == [("a", "old")]
    time.sleep(lag + 0.1)
    assert group(client, table) == [("b", "")]
    assert server.fault_report()["index_lag"]["lagged_reads"] == 4


def test_items_over_400_kb_are_refused_as_dynamodb_refuses_them_and_nothing_is_applied(server):
    server.set_faults(Faults(item_size_limit=True))
    table = new_table(server)
    client = server.client(max_attempts=0)
    checker = server.client(faults=False)
    exact = {"id": {"S": "a"}, "p": {"S": "x" * (LIMIT_BYTES - 2 - 1 - 1)}}
    assert item_size(exact) == LIMIT_BYTES
    client.put_item(TableName=table, Item=exact)  # exactly 400 KB: accepted
    with pytest.raises(ClientError) as too_big:
        client.put_item(TableName=table, Item={"id": {"S": "b"}, "p": {"S": "x" * LIMIT_BYTES}})
    assert code_of(too_big) == "ValidationException"
    assert too_big.value.response["Error"]["Message"] == "Item size has exceeded the maximum allowed size"
    with pytest.raises(ClientError):
        client.batch_write_item(RequestItems={table: [
            {"PutRequest": {"Item": {"id": {"S": "c"}}}},
            {"PutRequest": {"Item": {"id": {"S": "d"}, "p": {"S": "x" * LIMIT_BYTES}}}}]})
    client.put_item(TableName=table, Item={"id": {"S": "e"}, "p": {"S": "x" * 300_000}})
    stream_before = stream_length(server, table)
    with pytest.raises(ClientError) as update:
        client.update_item(TableName=table, Key={"id": {"S": "e"}}, UpdateExpression="SET q = :q, r = :r",
                           ExpressionAttributeValues={":q": {"S": "small"}, ":r": {"S": "y" * 120_000}})
    assert update.value.response["Error"]["Message"] == "Item size to update has exceeded the maximum allowed size"
    with pytest.raises(ClientError) as transaction:
        client.transact_write_items(TransactItems=[
            {"Put": {"TableName": table, "Item": {"id": {"S": "f"}}}},
            {"Update": {"TableName": table, "Key": {"id": {"S": "e"}}, "UpdateExpression": "SET r = :r",
                        "ExpressionAttributeValues": {":r": {"S": "y" * 120_000}}}}])
    assert code_of(transaction) == "TransactionCanceledException"
    assert [r["Code"] for r in transaction.value.response["CancellationReasons"]] == ["None", "ValidationError"]
    assert sorted(i["id"]["S"] for i in checker.scan(TableName=table)["Items"]) == ["a", "e"]
    assert sorted(checker.get_item(TableName=table, Key={"id": {"S": "e"}})["Item"]) == ["id", "p"]  # no partial update
    assert stream_length(server, table) == stream_before  # and no stream record of the refused writes
    assert server.fault_report()["item_size"] == {"refused_PutItem": 1, "refused_BatchWriteItem": 1,
                                                  "refused_UpdateItem": 1, "refused_TransactWriteItems": 1}


def stream_length(server: Emulator, table: str) -> int:
    streams = server.client("dynamodbstreams", faults=False)
    arn = server.client(faults=False).describe_table(TableName=table)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    return len(streams.get_records(ShardIterator=iterator, Limit=1000)["Records"])


def test_a_setting_that_cannot_be_used_is_refused_and_the_old_one_stays(server):
    server.set_faults(Faults(index_lag=0.2))
    with pytest.raises(ValueError, match="share must be from 0 to 1"):
        server.set_faults({"dynamodb_errors": [{"share": 2}]})
    assert server.fault_report()["config"]["index_lag"] == 0.2
    server.set_faults(Faults())
    assert server.fault_report()["config"]["index_lag"] == 0.0
