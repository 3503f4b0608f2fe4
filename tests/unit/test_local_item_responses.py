"""DynamoDB's item answers written directly (``local/emulator/item_responses.py``) are byte for byte what moto's
serializer writes -- every operation it takes, every attribute type, consumed capacity TOTAL and INDEXES, return
values, pages, unprocessed keys -- and what it does not take goes to moto's serializer unchanged."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from moto.core.responses import ActionResult
from moto.server import DomainDispatcherApplication, create_backend_app
from werkzeug.test import Client

from local.emulator import item_responses
from local.emulator.item_responses import OUTPUTS, patch_item_responses
from tests.unit.test_local_stream_records import item_attributes

AUTH = "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=x"
TABLE = "answers"


@pytest.fixture
def server() -> Iterator[Client]:
    """moto as it is (tests/conftest.py patches in-process moto for every test: undone here, put back after)."""
    from tests import conftest

    conftest.UNDO_ITEM_RESPONSES()
    try:
        with mock_aws():
            create_table(boto3.client("dynamodb", region_name="us-east-1"))
            yield Client(DomainDispatcherApplication(create_backend_app))
    finally:
        conftest.UNDO_ITEM_RESPONSES = patch_item_responses()


def create_table(client: Any) -> None:
    client.create_table(
        TableName=TABLE, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": t} for n, t in (("pk", "S"), ("sk", "N"), ("g", "S"))],
        GlobalSecondaryIndexes=[{"IndexName": "ByG", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                                 "Projection": {"ProjectionType": "ALL"}}])


def call(server: Client, operation: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    wire = json.dumps(body, default=lambda raw: base64.b64encode(raw).decode())  # binaries, as boto3 sends them
    response = server.post("/", data=wire, headers={
        "Host": "dynamodb.us-east-1.amazonaws.com", "X-Amz-Target": f"DynamoDB_20120810.{operation}",
        "Content-Type": "application/x-amz-json-1.0", "Authorization": AUTH})
    headers = {k: v for k, v in response.headers.items() if k.lower() not in ("x-amzn-requestid", "date")}
    return response.status_code, headers, response.get_data()


def both(server: Client, operation: str, body: dict[str, Any], monkeypatch: pytest.MonkeyPatch, *,
         direct: bool = True) -> tuple[Any, Any]:
    """moto's answer, then the patched one (which, when ``direct``, must not touch moto's serializer). The request
    must be one that reads, or writes the same thing twice."""
    motos = call(server, operation, body)
    undo = patch_item_responses()
    try:
        with monkeypatch.context() as patched:
            if direct:
                patched.setattr(ActionResult, "execute_result", lambda *a, **k: pytest.fail("moto's serializer ran"))
            ours = call(server, operation, body)
    finally:
        undo()
    return motos, ours


def key(n: int) -> dict[str, Any]:
    return {"pk": {"S": "p"}, "sk": {"N": str(n)}}


CAPACITY = st.sampled_from([{}, {"ReturnConsumedCapacity": "TOTAL"}, {"ReturnConsumedCapacity": "INDEXES"},
                            {"ReturnConsumedCapacity": "NONE"}])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=st.lists(item_attributes, min_size=1, max_size=4), capacity=CAPACITY,
       returns=st.sampled_from(["NONE", "ALL_OLD", "ALL_NEW", "UPDATED_OLD", "UPDATED_NEW"]),
       limit=st.sampled_from([None, 1, 2]), index=st.booleans())
def test_each_item_answer_is_written_as_motos_serializer_writes_it(server: Client, monkeypatch: pytest.MonkeyPatch,
                                                                  items: list[dict[str, Any]], capacity: dict[str, str],
                                                                  returns: str, limit: int | None, index: bool) -> None:
    for n, attributes in enumerate(items):
        call(server, "PutItem", {"TableName": TABLE, "Item": {**attributes, **key(n), "g": {"S": "x"}}})
    put_returns = "ALL_OLD" if returns == "ALL_OLD" else "NONE"
    requests = [
        ("GetItem", {"TableName": TABLE, "Key": key(0), **capacity}),
        ("GetItem", {"TableName": TABLE, "Key": key(99), **capacity}),
        ("PutItem", {"TableName": TABLE, "Item": {**items[0], **key(0), "g": {"S": "x"}}, "ReturnValues": put_returns,
                     **capacity}),
        ("UpdateItem", {"TableName": TABLE, "Key": key(0), "UpdateExpression": "SET g = :g",
                        "ExpressionAttributeValues": {":g": {"S": "x"}}, "ReturnValues": returns, **capacity}),
        ("Query", {"TableName": TABLE, "KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "p"}},
                   **({"Limit": limit} if limit else {}), **capacity}),
        ("Query", {"TableName": TABLE, "KeyConditionExpression": "pk = :p", "Select": "COUNT",
                   "ExpressionAttributeValues": {":p": {"S": "p"}}, **capacity}),
        ("Scan", {"TableName": TABLE, **({"Limit": limit} if limit else {}), **({"IndexName": "ByG"} if index else {}),
                  **capacity}),
        ("BatchGetItem", {"RequestItems": {TABLE: {"Keys": [key(n) for n in range(len(items))] + [key(99)]}}, **capacity}),
        ("BatchWriteItem", {"RequestItems": {TABLE: [{"PutRequest": {"Item": {**items[-1], **key(len(items) - 1),
                                                                             "g": {"S": "x"}}}}]}, **capacity}),
        ("TransactWriteItems", {"TransactItems": [{"Put": {"TableName": TABLE, "Item": {**items[0], **key(0),
                                                                                      "g": {"S": "x"}}}}], **capacity}),
        ("DeleteItem", {"TableName": TABLE, "Key": key(98), "ReturnValues": "ALL_OLD", **capacity}),
    ]
    if index:
        requests.append(("Query", {"TableName": TABLE, "IndexName": "ByG", "KeyConditionExpression": "g = :g",
                                   "ExpressionAttributeValues": {":g": {"S": "x"}}, **capacity}))
    for operation, body in requests:
        motos, ours = both(server, operation, body, monkeypatch)
        assert motos[0] == 200, (operation, motos)
        assert ours == motos, operation


def test_a_deleted_items_old_attributes_and_every_operation_of_the_table_are_covered(
        server: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    call(server, "PutItem", {"TableName": TABLE, "Item": {**key(1), "b": {"B": "AAE="}, "n": {"N": "1.50"}}})
    motos = call(server, "DeleteItem", {"TableName": TABLE, "Key": key(1), "ReturnValues": "ALL_OLD"})
    call(server, "PutItem", {"TableName": TABLE, "Item": {**key(1), "b": {"B": "AAE="}, "n": {"N": "1.50"}}})
    undo = patch_item_responses()
    try:
        ours = call(server, "DeleteItem", {"TableName": TABLE, "Key": key(1), "ReturnValues": "ALL_OLD"})
    finally:
        undo()
    assert json.loads(motos[2])["Attributes"]["b"] == {"B": "AAE="}
    assert ours == motos
    assert set(OUTPUTS) == {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem",
                            "BatchWriteItem", "TransactWriteItems"}


def test_errors_and_other_operations_go_through_motos_serializer_unchanged(server: Client,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    used: list[str] = []
    real = item_responses.direct_body
    monkeypatch.setattr(item_responses, "direct_body", lambda op, result: used.append(op) or real(op, result))
    for operation, body in [
        ("DescribeTable", {"TableName": TABLE}),
        ("ListTables", {}),
        ("GetItem", {"TableName": "no-such-table", "Key": key(0)}),
        ("PutItem", {"TableName": TABLE, "Item": key(0), "ConditionExpression": "attribute_exists(pk)"}),
        ("UpdateItem", {"TableName": TABLE, "Key": key(0), "UpdateExpression": "SET"}),
    ]:
        motos, ours = both(server, operation, body, monkeypatch, direct=False)
        assert ours[0] == motos[0]
        mine, theirs = json.loads(ours[2]), json.loads(motos[2])
        if operation == "DescribeTable":  # the same table either way
            assert mine == theirs
        else:
            assert ours == motos, operation
    assert used == ["DescribeTable", "ListTables"]  # errors never reach it; other operations it declines


def test_what_the_direct_path_does_not_know_is_left_to_moto() -> None:
    assert item_responses.direct_body("GetItem", {"Item": {"a": {"X": "1"}}}) is None  # no such attribute type
    assert item_responses.direct_body("PutItem", {"ItemCollectionMetrics": {"t": []}}) is None  # it writes only {}
    assert item_responses.direct_body("DescribeTable", {"Table": {}}) is None
    assert item_responses.direct_body("GetItem", {"Item": {"a": {"S": "1"}}, "ConsumedCapacity": None}) == \
        '{"Item": {"a": {"S": "1"}}}'
