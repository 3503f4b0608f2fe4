"""The DynamoDB engine of a run is the one asked for, and where moto and DynamoDB Local differ (docs/testing.md).

Each test runs on both engines (``pytest --dynamodb=moto`` and ``--dynamodb=local``) and states what each
engine does: the DynamoDB Local side is what DynamoDB does; the moto side records moto's gap, so a moto
upgrade that closes it shows up here.
"""

import time

import boto3
import pytest
from botocore.exceptions import ClientError

from taskqueue.core.stream import is_ttl_delete
from tests import dynamodb_local
from tests.conftest import TABLE

pytestmark = pytest.mark.dynamodb_engines

KB = 1024


def test_the_dynamodb_client_reaches_the_engine_of_the_run(dynamodb, dynamodb_engine):
    """mock_aws intercepts only AWS hostnames: a client whose endpoint is DynamoDB Local really reaches it."""
    assert TABLE in dynamodb.list_tables()["TableNames"]
    if dynamodb_engine == "local":
        assert dynamodb.meta.endpoint_url == dynamodb_local.endpoint()
        assert dynamodb_local.moto_dynamodb_tables() == []  # moto never saw the table
        assert TABLE in dynamodb_local.client().list_tables()["TableNames"]
        # The product's own clients (boto3.client("dynamodb") with no endpoint) go there as well.
        assert boto3.client("dynamodb").meta.endpoint_url == dynamodb_local.endpoint()
    else:
        assert dynamodb.meta.endpoint_url == "https://dynamodb.us-east-1.amazonaws.com"
        assert any(t.endswith(f"/{TABLE}") for t in dynamodb_local.moto_dynamodb_tables())


def _put(dynamodb, task_id, **attributes):
    dynamodb.put_item(TableName=TABLE, Item={"taskId": {"S": task_id}, **attributes})


def test_a_250kb_update_inside_a_map_of_a_200kb_item(dynamodb, dynamodb_engine):
    """The result would be a 450 KB item: DynamoDB refuses it. moto checks an item's size only when a
    top-level attribute is set, so it applies an update to a nested path whatever the size."""
    _put(dynamodb, "big", payload={"S": "x" * 200 * KB}, result={"M": {}})
    update = dict(
        TableName=TABLE,
        Key={"taskId": {"S": "big"}},
        UpdateExpression="SET #r.#d = :d",
        ExpressionAttributeNames={"#r": "result", "#d": "detail"},
        ExpressionAttributeValues={":d": {"S": "y" * 250 * KB}},
    )
    if dynamodb_engine == "local":
        with pytest.raises(ClientError) as refused:
            dynamodb.update_item(**update)
        assert refused.value.response["Error"]["Code"] == "ValidationException"
        assert "Item size to update has exceeded the maximum allowed size" in str(refused.value)
        item = dynamodb.get_item(TableName=TABLE, Key={"taskId": {"S": "big"}}, ConsistentRead=True)["Item"]
        assert item["result"] == {"M": {}}
    else:
        dynamodb.update_item(**update)  # moto's gap
        item = dynamodb.get_item(TableName=TABLE, Key={"taskId": {"S": "big"}})["Item"]
        assert len(item["result"]["M"]["detail"]["S"]) == 250 * KB


def test_replacing_a_200kb_attribute_with_250kb(dynamodb, dynamodb_engine):
    """The item ends at 250 KB: DynamoDB applies it. moto adds the old value's size to the new one's and
    refuses."""
    _put(dynamodb, "big", payload={"S": "x" * 200 * KB})
    update = dict(
        TableName=TABLE,
        Key={"taskId": {"S": "big"}},
        UpdateExpression="SET payload = :p",
        ExpressionAttributeValues={":p": {"S": "y" * 250 * KB}},
    )
    if dynamodb_engine == "local":
        dynamodb.update_item(**update)
        item = dynamodb.get_item(TableName=TABLE, Key={"taskId": {"S": "big"}}, ConsistentRead=True)["Item"]
        assert item["payload"]["S"] == "y" * 250 * KB
    else:
        with pytest.raises(ClientError, match="Item size to update has exceeded the maximum allowed size"):
            dynamodb.update_item(**update)  # moto's gap


def test_consumed_capacity_of_a_3kb_put(dynamodb, dynamodb_engine):
    """A write unit is 1 KB: DynamoDB charges a 3 KB item 3 units (plus the index writes of a table with
    indexes). moto reports 1 unit per request whatever the size."""
    response = dynamodb.put_item(
        TableName=TABLE, Item={"taskId": {"S": "three-kb"}, "payload": {"S": "x" * 3000}}, ReturnConsumedCapacity="TOTAL"
    )
    units = response["ConsumedCapacity"]["CapacityUnits"]
    assert units == (3.0 if dynamodb_engine == "local" else 1.0)


@pytest.mark.dynamodb_local_only
def test_dynamodb_local_ttl_deletes_only_outside_the_queue_table_and_streams_it_unlike_dynamodb(dynamodb):
    """DynamoDB Local runs TTL on the real clock (moto never deletes): an expired item of a plain table is
    gone within seconds. Two differences from DynamoDB, found here:
    - an expired item of the queue table as template.yaml declares it (two sparse GSIs, a stream) is not
      deleted at all, so load shedding by TTL cannot be exercised on DynamoDB Local;
    - its stream record of a TTL deletion has eventName UNKNOWN_TO_SDK_VERSION and no userIdentity, where
      DynamoDB writes REMOVE with userIdentity {type: Service, principalId: dynamodb.amazonaws.com}, so
      Trigger's shed counting (stream.is_ttl_delete) does not recognise it."""
    ttl_attribute = dynamodb.describe_time_to_live(TableName=TABLE)["TimeToLiveDescription"]["AttributeName"]
    expired = {"N": str(int(time.time()) - 60)}
    _put(dynamodb, "expired", **{ttl_attribute: expired})
    plain = "plain-ttl-table"
    arn = dynamodb.create_table(
        TableName=plain,
        AttributeDefinitions=[{"AttributeName": "taskId", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "taskId", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )["TableDescription"]["LatestStreamArn"]
    dynamodb.update_time_to_live(TableName=plain, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl_attribute})
    dynamodb.put_item(TableName=plain, Item={"taskId": {"S": "expired"}, ttl_attribute: expired})
    dynamodb.put_item(TableName=plain, Item={"taskId": {"S": "alive"}, ttl_attribute: {"N": str(int(time.time()) + 3600)}})

    def present(table: str, key: str) -> bool:
        return "Item" in dynamodb.get_item(TableName=table, Key={"taskId": {"S": key}}, ConsistentRead=True)

    deadline = time.monotonic() + 30
    while present(plain, "expired"):
        assert time.monotonic() < deadline, "DynamoDB Local did not delete the expired item within 30 s"
        time.sleep(0.2)
    assert present(plain, "alive")
    time.sleep(3)  # a few more sweeps
    assert present(TABLE, "expired"), "DynamoDB Local now deletes by TTL on the queue table: update docs/testing.md"

    streams = boto3.client("dynamodbstreams")
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    deletion = [r for r in records if r["dynamodb"]["Keys"]["taskId"]["S"] == "expired" and "OldImage" in r["dynamodb"]]
    assert len(deletion) == 1
    assert deletion[0]["eventName"] == "UNKNOWN_TO_SDK_VERSION" and "userIdentity" not in deletion[0]
    assert not is_ttl_delete(deletion[0]["eventName"], deletion[0].get("userIdentity"))
