"""The local stack's --persist files: a table's items and a queue's messages saved as JSON lines come back the
same in a new stack, every DynamoDB type and binary message attributes included."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from local.engine.persist import StateDir

ITEM = {"taskId": {"S": "t-1"}, "blob": {"B": b"\x00\xffbytes"}, "tags": {"SS": ["a", "b"]}, "sizes": {"NS": ["1", "2.5"]},
        "blobs": {"BS": [b"\x01", b"\x02"]}, "nested": {"M": {"list": {"L": [{"N": "3"}, {"BOOL": True}, {"NULL": True}]}}}}


def make_table(ddb: object, name: str) -> None:
    ddb.create_table(TableName=name, KeySchema=[{"AttributeName": "taskId", "KeyType": "HASH"}],  # type: ignore[attr-defined]
                     AttributeDefinitions=[{"AttributeName": "taskId", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")


@mock_aws
def test_items_and_messages_round_trip_through_the_files(tmp_path: Path) -> None:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    sqs = boto3.client("sqs", region_name="us-east-1")
    make_table(ddb, "before-Queue")
    ddb.put_item(TableName="before-Queue", Item=ITEM)
    url = sqs.create_queue(QueueName="before-Failed")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody='{"requestPayload": {"queue": "work"}}', MessageAttributes={
        "kind": {"DataType": "String", "StringValue": "async"}, "raw": {"DataType": "Binary", "BinaryValue": b"\x00\x01"}})

    state = StateDir(tmp_path / "state")
    assert state.save_tables(ddb, {"QueueTable": "before-Queue"}) == {"QueueTable": 1}
    assert state.save_queues(sqs, {"FailedEventsQueue": url}) == {"FailedEventsQueue": 1}
    lines = (tmp_path / "state" / "dynamodb" / "QueueTable.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["taskId"] == {"S": "t-1"}  # plain DynamoDB JSON, one item a line
    # Saving leaves the message visible: the running stack still has it.
    assert len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0).get("Messages", [])) == 1

    # A new stack (other physical names), the same logical ids: the same item and message.
    make_table(ddb, "after-Queue")
    after_url = sqs.create_queue(QueueName="after-Failed")["QueueUrl"]
    again = StateDir(tmp_path / "state")
    assert again.seed_table(ddb, "QueueTable", "after-Queue") == 1
    assert again.seed_queue(sqs, "FailedEventsQueue", after_url) == 1
    restored = ddb.get_item(TableName="after-Queue", Key={"taskId": {"S": "t-1"}})["Item"]
    assert restored["blob"] == ITEM["blob"] and sorted(restored["blobs"]["BS"]) == ITEM["blobs"]["BS"]
    assert {k: v for k, v in restored.items() if k not in ("blob", "blobs", "tags", "sizes")} == \
        {k: v for k, v in ITEM.items() if k not in ("blob", "blobs", "tags", "sizes")}
    assert sorted(restored["tags"]["SS"]) == ["a", "b"] and sorted(restored["sizes"]["NS"]) == ["1", "2.5"]
    (message,) = sqs.receive_message(QueueUrl=after_url, MessageAttributeNames=["All"])["Messages"]
    assert json.loads(message["Body"]) == {"requestPayload": {"queue": "work"}}
    assert message["MessageAttributes"]["kind"]["StringValue"] == "async"
    assert message["MessageAttributes"]["raw"]["BinaryValue"] == b"\x00\x01"


def test_a_missing_file_restores_nothing_and_a_broken_line_names_the_file(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    assert state.seed_table(None, "QueueTable", "t") == 0  # no file: an empty table, no call made
    broken = tmp_path / "dynamodb" / "QueueTable.jsonl"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"taskId": {"S": "ok"}}\n{not json\n')
    with pytest.raises(ValueError, match=r"QueueTable\.jsonl:2 is not a JSON line .*delete the file"):
        state.seed_table(None, "QueueTable", "t")
