"""The benchmarks' cost meter (bench/cost_meter.py) on hand-computed cases.

Sizes follow DynamoDB's rules (attribute names + values); the number sizes below are the ones DynamoDB Local
charged for when probed byte by byte (its capacity figures flip from 1 to 2 write units at 1,025 bytes).
The request cases run against moto in process: the meter hooks the client and reads sizes itself, so
moto's own (wrong) ConsumedCapacity plays no part.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from bench.cost_meter import (
    CostMeter,
    IndexDef,
    TableDef,
    index_write_charges,
    item_size,
    number_size,
    read_units,
    value_size,
    write_units,
)

# ---- sizes and units (pure) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "size"),
    [
        ("0", 1),
        ("1", 2),
        ("12", 2),
        ("123", 3),  # 01|23
        ("100", 2),  # 01|00 -> trailing zero pair dropped
        ("86400", 3),  # 08|64|00
        ("1795348800000", 6),  # 01|79|53|48|80|00|00 (epoch ms)
        ("1795348812345", 8),
        ("1.5", 3),  # 01.50
        ("0.001", 2),  # .00|10
        ("-1", 3),  # + 1 byte for the sign
        ("123456789012345678901234567890", 16),
    ],
)
def test_number_sizes_are_base_100_pairs_aligned_on_the_decimal_point(number: str, size: int) -> None:
    assert number_size(number) == size


def test_value_sizes_of_every_type() -> None:
    assert value_size({"S": "é"}) == 2  # UTF-8 bytes
    assert value_size({"B": b"abc"}) == 3
    assert value_size({"BOOL": True}) == 1
    assert value_size({"NULL": True}) == 1
    assert value_size({"SS": ["a", "bb"]}) == 3
    assert value_size({"NS": ["1", "22"]}) == 4
    assert value_size({"L": []}) == 3
    assert value_size({"L": [{"S": "a"}, {"S": "bb"}]}) == 3 + (1 + 1) + (1 + 2)
    assert value_size({"M": {"x": {"S": "a"}}}) == 3 + 1 + 1 + 1


def test_item_size_counts_names_and_values() -> None:
    assert item_size({"pk": {"S": "a"}, "data": {"S": "x" * 1529}}) == 3 + 1533 == 1536


def test_units_round_up_per_1_kb_and_4_kb() -> None:
    assert write_units(1) == 1 and write_units(1024) == 1 and write_units(1025) == 2 and write_units(1536) == 2
    assert read_units(0, consistent=False) == 0.5  # the minimum of a read
    assert read_units(9 * 1024, consistent=False) == 1.5  # 9 KB -> 12 KB -> 3 units, halved
    assert read_units(9 * 1024, consistent=True) == 3.0


def test_a_keys_only_entry_is_the_keys_alone_and_a_moved_entry_is_two_writes() -> None:
    table = TableDef("t", "pk", None, (IndexDef("byStatus", "status", "at", "KEYS_ONLY"),))
    old = {"pk": {"S": "task-1"}, "status": {"S": "PENDING"}, "at": {"N": "1700000000000"}, "payload": {"S": "y" * 2000}}
    new = dict(old, status={"S": "TAKEN"})
    created = index_write_charges(table, None, old)
    assert [(c.index, c.partition, c.units) for c in created] == [("byStatus", "PENDING", 1)]
    moved = index_write_charges(table, old, new)
    assert [(c.partition, c.units) for c in moved] == [("PENDING", 1), ("TAKEN", 1)]
    # A change that touches no key and no projected attribute writes nothing to a KEYS_ONLY index.
    assert index_write_charges(table, old, dict(old, payload={"S": "z"})) == []


# ---- requests, through the hooks --------------------------------------------------------------------


def _create(client: Any, name: str, indexes: list[dict[str, Any]] | None = None, range_key: bool = False) -> None:
    attributes = [{"AttributeName": "pk", "AttributeType": "S"}]
    schema = [{"AttributeName": "pk", "KeyType": "HASH"}]
    if range_key:
        attributes.append({"AttributeName": "sk", "AttributeType": "S"})
        schema.append({"AttributeName": "sk", "KeyType": "RANGE"})
    kwargs: dict[str, Any] = {}
    if indexes:
        attributes += [{"AttributeName": "status", "AttributeType": "S"}, {"AttributeName": "at", "AttributeType": "N"}]
        kwargs["GlobalSecondaryIndexes"] = indexes
    client.create_table(TableName=name, AttributeDefinitions=attributes, KeySchema=schema,
                        BillingMode="PAY_PER_REQUEST", **kwargs)


KEYS_ONLY_INDEX = {
    "IndexName": "byStatus",
    "KeySchema": [{"AttributeName": "status", "KeyType": "HASH"}, {"AttributeName": "at", "KeyType": "RANGE"}],
    "Projection": {"ProjectionType": "KEYS_ONLY"},
}


@pytest.fixture
def meter() -> Iterator[tuple[CostMeter, Any]]:
    with mock_aws():
        reader = boto3.client("dynamodb", region_name="us-east-1")
        client = boto3.client("dynamodb", region_name="us-east-1")
        _create(reader, "plain")
        _create(reader, "indexed", [KEYS_ONLY_INDEX])
        _create(reader, "sorted", range_key=True)
        cost = CostMeter(reader)
        cost.attach(client)
        yield cost, client


def test_putting_a_1_5_kb_item_costs_2_write_units(meter: tuple[CostMeter, Any]) -> None:
    cost, client = meter
    client.put_item(TableName="plain", Item={"pk": {"S": "a"}, "data": {"S": "x" * 1529}})  # 1,536 bytes
    assert cost.totals.write_units == 2
    assert cost.totals.requests["PutItem"] == 1


def test_a_keys_only_index_entry_costs_one_unit_whatever_the_item_size(meter: tuple[CostMeter, Any]) -> None:
    cost, client = meter
    # 8 (pk) + 13 (status) + 5 (at: 2 + 3) + 2,007 (payload) = 2,033 bytes: 2 table units; entry 26 bytes: 1 unit.
    client.put_item(TableName="indexed", Item={"pk": {"S": "task-1"}, "status": {"S": "PENDING"},
                                              "at": {"N": "1700000000000"}, "payload": {"S": "y" * 2000}})
    assert cost.totals.by_target[("write", "indexed", None)] == 2
    assert cost.totals.by_target[("write", "indexed", "byStatus")] == 1
    assert cost.totals.write_units == 3
    assert cost.totals.by_partition[("write", "indexed", "byStatus", "PENDING")] == 1


def test_an_update_that_moves_the_index_entry_is_a_delete_and_a_put(meter: tuple[CostMeter, Any]) -> None:
    cost, client = meter
    client.put_item(TableName="indexed", Item={"pk": {"S": "task-1"}, "status": {"S": "PENDING"},
                                              "at": {"N": "1700000000000"}, "payload": {"S": "y" * 2000}})
    cost.reset()
    client.update_item(TableName="indexed", Key={"pk": {"S": "task-1"}}, UpdateExpression="SET #s = :t",
                       ExpressionAttributeNames={"#s": "status"}, ExpressionAttributeValues={":t": {"S": "TAKEN"}})
    # Table: the larger of 2,033 and 2,031 bytes -> 2; index: delete from PENDING (1) + put into TAKEN (1).
    assert cost.totals.by_target[("write", "indexed", None)] == 2
    assert cost.totals.by_partition[("write", "indexed", "byStatus", "PENDING")] == 1
    assert cost.totals.by_partition[("write", "indexed", "byStatus", "TAKEN")] == 1
    assert cost.totals.write_units == 4


def test_a_transaction_of_3_items_costs_twice_each_item(meter: tuple[CostMeter, Any]) -> None:
    cost, client = meter
    client.transact_write_items(TransactItems=[
        {"Put": {"TableName": "plain", "Item": {"pk": {"S": f"t{i}"}, "v": {"S": "small"}}}} for i in range(3)
    ])
    assert cost.totals.write_units == 3 * 2
    assert cost.totals.requests["TransactWriteItems"] == 1


def test_a_cancelled_transaction_is_billed_too(meter: tuple[CostMeter, Any]) -> None:
    cost, client = meter
    with pytest.raises(ClientError):
        client.transact_write_items(TransactItems=[
            {"Put": {"TableName": "plain", "Item": {"pk": {"S": "x"}}}},
            {"Update": {"TableName": "plain", "Key": {"pk": {"S": "missing"}}, "UpdateExpression": "SET v = :v",
                        "ConditionExpression": "attribute_exists(pk)", "ExpressionAttributeValues": {":v": {"S": "1"}}}},
        ])
    assert cost.totals.cancelled_transactions == 1
    assert cost.totals.write_units == 2 * 2


def test_a_failed_conditional_update_costs_the_existing_item_and_no_index_write(meter: tuple[CostMeter, Any]) -> None:
    cost, client = meter
    client.put_item(TableName="indexed", Item={"pk": {"S": "task-1"}, "status": {"S": "PENDING"},
                                              "at": {"N": "1700000000000"}, "payload": {"S": "y" * 2000}})
    cost.reset()
    with pytest.raises(ClientError) as raised:
        client.update_item(TableName="indexed", Key={"pk": {"S": "task-1"}}, UpdateExpression="SET #s = :t",
                           ConditionExpression="#s = :from", ExpressionAttributeNames={"#s": "status"},
                           ExpressionAttributeValues={":t": {"S": "TAKEN"}, ":from": {"S": "DONE"}})
    assert raised.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    assert cost.totals.failed_conditions == 1
    assert cost.totals.write_units == 2  # the 2,033-byte item, no index writes
    assert cost.totals.by_target[("write", "indexed", "byStatus")] == 0


def test_a_failed_conditional_put_of_a_new_item_costs_at_least_one_unit(meter: tuple[CostMeter, Any]) -> None:
    cost, client = meter
    client.put_item(TableName="plain", Item={"pk": {"S": "a"}})
    cost.reset()
    with pytest.raises(ClientError):
        client.put_item(TableName="plain", Item={"pk": {"S": "a"}}, ConditionExpression="attribute_not_exists(pk)")
    assert cost.totals.write_units == 1


def _nine_kb(client: Any) -> None:
    for i in range(9):  # 9 items of exactly 1,024 bytes: pk "p" 3 + sk "s<i>" 4 + "d" 1 + 1,016
        client.put_item(TableName="sorted", Item={"pk": {"S": "p"}, "sk": {"S": f"s{i}"}, "d": {"S": "z" * 1016}})


def test_an_eventually_consistent_query_of_9_kb_costs_1_5_read_units(meter: tuple[CostMeter, Any]) -> None:
    cost, client = meter
    _nine_kb(client)
    cost.reset()
    response = client.query(TableName="sorted", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "p"}})
    assert response["Count"] == 9
    assert cost.totals.read_units == 1.5  # 9,216 bytes -> 12 KB -> 3 units, halved
    assert cost.totals.by_partition[("read", "sorted", None, "p")] == 1.5


def test_a_count_or_projected_query_costs_what_it_read_not_what_it_returned(meter: tuple[CostMeter, Any]) -> None:
    cost, client = meter
    _nine_kb(client)
    cost.reset()
    client.query(TableName="sorted", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "p"}},
                 Select="COUNT", ConsistentRead=True)
    client.query(TableName="sorted", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "p"}},
                 ProjectionExpression="sk")
    assert cost.totals.read_units == 3.0 + 1.5


def test_a_query_that_finds_nothing_costs_the_minimum(meter: tuple[CostMeter, Any]) -> None:
    cost, client = meter
    client.query(TableName="sorted", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "none"}})
    client.get_item(TableName="plain", Key={"pk": {"S": "none"}}, ConsistentRead=True)
    assert cost.totals.read_units == 0.5 + 1.0


def test_batch_writes_are_billed_item_by_item(meter: tuple[CostMeter, Any]) -> None:
    cost, client = meter
    client.batch_write_item(RequestItems={"plain": [
        {"PutRequest": {"Item": {"pk": {"S": f"b{i}"}, "d": {"S": "q" * (600 * i)}}}} for i in range(4)
    ]})
    # 0, 600, 1,200 and 1,800 bytes of padding: 1 + 1 + 2 + 2 units (not the 4 KB total rounded once).
    assert cost.totals.write_units == 6
