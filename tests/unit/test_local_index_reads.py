"""The emulator's Query and Scan answered from the tables' order (local/emulator/index_reads.py, local/emulator/table_index.py) give
moto's own answer: every page -- Items, Count, ScannedCount, LastEvaluatedKey, or the error -- of random queries and
scans, paged to the end, compared with what moto 5.2.5 itself answers on the same table, after random puts,
updates, deletes, transactions and batches; and the paths that change items behind moto's back (index lag's look
into the past, the item-size limit's undo, an update failing halfway, a replaced container) keep the order right.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.table import Table

from local.emulator.index_reads import patch_index_reads
from local.emulator.moto_patches import patch_comparisons
from local.faults.wsgi_request import get_item, set_item, slot
from tests.support import create_queue_table

NAMES = itertools.count()


class Engines:
    """One in-process moto with the emulator's patches; ``same`` asks a request of it and of moto's own code."""

    def __init__(self) -> None:
        self.undo_reads = patch_index_reads()
        self.undo_comparisons = patch_comparisons()
        self.client = boto3.client("dynamodb", region_name="us-east-1")

    def close(self) -> None:
        self.undo_comparisons()
        self.undo_reads()

    def pages(self, method: str, request: dict[str, Any]) -> list[dict[str, Any]]:
        request = copy.deepcopy(request)
        found: list[dict[str, Any]] = []
        while len(found) < 200:
            try:
                page = getattr(self.client, method)(**request)
            except ClientError as exc:
                return [*found, {"error": exc.response["Error"]}]
            except Exception as exc:  # noqa: BLE001 - moto's own failure (begins_with on a number): the same on both
                return [*found, {"exception": type(exc).__name__, "message": str(exc)}]
            page.pop("ResponseMetadata", None)
            found.append(page)
            if "LastEvaluatedKey" not in page:
                return found
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        raise AssertionError(f"{method} did not end within 200 pages: {request}")

    def motos_pages(self, method: str, request: dict[str, Any]) -> list[dict[str, Any]]:
        """The same request answered by moto's own Table.query / Table.scan and comparisons."""
        fast_query, fast_scan = Table.query, Table.scan
        self.undo_comparisons()
        Table.query, Table.scan = fast_query.__wrapped__, fast_scan.__wrapped__  # type: ignore[attr-defined]
        try:
            return self.pages(method, request)
        finally:
            Table.query, Table.scan = fast_query, fast_scan  # type: ignore[method-assign]
            self.undo_comparisons = patch_comparisons()

    def same(self, method: str, request: dict[str, Any]) -> list[dict[str, Any]]:
        ours, motos = self.pages(method, request), self.motos_pages(method, request)
        assert ours == motos, f"{method} {request}"
        return ours

    def table(self, name: str) -> Any:
        return dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables[name]


@pytest.fixture
def engines() -> Iterator[Engines]:
    with mock_aws():
        engines = Engines()
        try:
            yield engines
        finally:
            engines.close()


# --------------------------------------------------------------------------- the queue table (template.yaml)

SORTS = ["a", "ab", "abc", "abd", "b", "ba", "bz", "c", "\u00e9", "z"]
NUMBERS = ["-3", "1", "2.5", "10", "100"]
PADDING = [0, 0, 10, 150_000]  # 150 KB items: a 1 MB page holds six

task = st.fixed_dictionaries({
    "id": st.integers(0, 15),
    "ready": st.one_of(st.none(), st.tuples(st.sampled_from(["p0", "p1"]), st.sampled_from(SORTS), st.integers(0, 3))),
    "status": st.one_of(st.none(), st.tuples(st.sampled_from(["s0", "s1"]), st.sampled_from(NUMBERS))),
    "ttl": st.one_of(st.none(), st.sampled_from(NUMBERS)),
    "notBefore": st.one_of(st.none(), st.sampled_from([{"N": "3"}, {"B": b"\x01"}, {"S": "x"}])),
    "padding": st.sampled_from(PADDING),
})


def task_item(t: dict[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = {"taskId": {"S": f"t{t['id']:02d}"}, "queue": {"S": "work"}}
    if t["ready"] is not None:
        partition, sort, n = t["ready"]
        item["readyKey"], item["readySort"] = {"S": partition}, {"S": f"{sort}{n}"}
    if t["status"] is not None:
        item["statusKey"], item["statusSort"] = {"S": t["status"][0]}, {"N": t["status"][1]}
    if t["ttl"] is not None:
        item["ttl"] = {"N": t["ttl"]}
    if t["notBefore"] is not None:
        item["notBefore"] = t["notBefore"]
    if t["padding"]:
        item["padding"] = {"S": "x" * t["padding"]}
    return item


def key(n: int) -> dict[str, Any]:
    return {"taskId": {"S": f"t{n:02d}"}}


UPDATES = {
    "move": ("SET readyKey = :k, readySort = :s", {":k": {"S": "p1"}, ":s": {"S": "abz9"}}),
    "leave": ("REMOVE readyKey", {}),
    "status": ("SET statusKey = :k, statusSort = :n", {":k": {"S": "s0"}, ":n": {"N": "7"}}),
    "ttl": ("SET #ttl = :t", {":t": {"N": "2"}}),
    "pad": ("SET padding = :p", {":p": {"S": "y" * 150_000}}),
}

task_op = st.one_of(
    st.tuples(st.just("put"), task),
    st.tuples(st.just("update"), st.integers(0, 15), st.sampled_from(sorted(UPDATES))),
    st.tuples(st.just("delete"), st.integers(0, 15)),
    st.tuples(st.just("transact"), task, st.integers(0, 15), st.integers(0, 15)),
    st.tuples(st.just("batch"), st.lists(task, max_size=4), st.lists(st.integers(0, 15), max_size=3)),
)


def update_request(table: str, n: int, which: str) -> dict[str, Any]:
    expression, values = UPDATES[which]
    request: dict[str, Any] = {"TableName": table, "Key": key(n), "UpdateExpression": expression}
    if values:
        request["ExpressionAttributeValues"] = values
    if "#ttl" in expression:
        request["ExpressionAttributeNames"] = {"#ttl": "ttl"}
    return request


def apply_task_op(client: Any, table: str, op: tuple[Any, ...]) -> None:
    kind = op[0]
    try:
        if kind == "put":
            client.put_item(TableName=table, Item=task_item(op[1]))
        elif kind == "update":
            client.update_item(**update_request(table, op[1], op[2]))
        elif kind == "delete":
            client.delete_item(TableName=table, Key=key(op[1]))
        elif kind == "transact":
            put, updated, deleted = op[1], op[2], op[3]
            if len({put["id"], updated, deleted}) < 3:
                return
            client.transact_write_items(TransactItems=[
                {"Put": {"TableName": table, "Item": task_item(put)}},
                {"Update": update_request(table, updated, "move")},
                {"Delete": {"TableName": table, "Key": key(deleted), "ConditionExpression": "attribute_exists(taskId)"}},
            ])
        elif kind == "batch":
            puts = {t["id"]: t for t in op[1]}
            deletes = [n for n in dict.fromkeys(op[2]) if n not in puts]
            requests = [{"PutRequest": {"Item": task_item(t)}} for t in puts.values()]
            requests += [{"DeleteRequest": {"Key": key(n)}} for n in deletes]
            if requests:
                client.batch_write_item(RequestItems={table: requests})
    except ClientError as exc:  # a cancelled transaction, an item over moto's limit: nothing to compare here
        assert exc.response["Error"]["Code"] in ("TransactionCanceledException", "ValidationException"), exc


def condition(index: str, op: str | None, first: int, second: int) -> tuple[str, dict[str, Any]]:
    """A range key condition of the index and its values."""
    if op is None:
        return "", {}
    if index == "ReadyIndex":
        values = [{"S": SORTS[first % len(SORTS)] + ("" if second % 2 else str(second % 4))},
                  {"S": SORTS[second % len(SORTS)]}]
    else:
        values = [{"N": NUMBERS[first % len(NUMBERS)]}, {"N": NUMBERS[second % len(NUMBERS)]}]
    if op == "BETWEEN":
        low, high = sorted(values, key=lambda v: float(v["N"]) if "N" in v else v["S"])
        return " AND #r BETWEEN :v AND :w", {":v": low, ":w": high}
    if op == "begins_with":
        return " AND begins_with(#r, :v)", {":v": values[0]}
    return f" AND #r {op} :v", {":v": values[0]}


index_query = st.fixed_dictionaries({
    "index": st.sampled_from(["ReadyIndex", "StatusIndex"]),
    "partition": st.sampled_from(["0", "1", "9"]),
    "op": st.sampled_from([None, None, "=", "<", "<=", ">", ">=", "BETWEEN", "begins_with"]),
    "values": st.tuples(st.integers(0, 20), st.integers(0, 20)),
    "forward": st.booleans(),
    "limit": st.sampled_from([None, 1, 2, 5]),
    "filter": st.sampled_from([None, "ttl", "padding", "binary"]),
    "select": st.sampled_from([None, "COUNT", "projection"]),
})

FILTERS = {
    "ttl": ("#ttl > :now", {"#ttl": "ttl"}, {":now": {"N": "2"}}),
    "padding": ("attribute_exists(padding)", {}, {}),  # never projected by either index: nothing passes
    "binary": ("notBefore = :b", {}, {":b": {"B": b"\x01"}}),  # moto's projection turns binaries to bytes
}


def query_request(table: str, q: dict[str, Any]) -> dict[str, Any]:
    hash_name, range_name, prefix = (("readyKey", "readySort", "p") if q["index"] == "ReadyIndex"
                                     else ("statusKey", "statusSort", "s"))
    cond, values = condition(q["index"], q["op"], *q["values"])
    names = {"#h": hash_name, **({"#r": range_name} if cond else {})}
    request: dict[str, Any] = {"TableName": table, "IndexName": q["index"], "KeyConditionExpression": "#h = :h" + cond,
                               "ExpressionAttributeValues": {":h": {"S": prefix + q["partition"]}, **values},
                               "ScanIndexForward": q["forward"]}
    if q["limit"] is not None:
        request["Limit"] = q["limit"]
    if q["filter"] is not None:
        expression, filter_names, filter_values = FILTERS[q["filter"]]
        request["FilterExpression"] = expression
        names.update(filter_names)
        request["ExpressionAttributeValues"].update(filter_values)
    if q["select"] == "COUNT":
        request["Select"] = "COUNT"
    elif q["select"] == "projection":
        request["ProjectionExpression"] = "taskId, #pr"
        names["#pr"] = range_name
    request["ExpressionAttributeNames"] = names
    return request


scan = st.fixed_dictionaries({
    "limit": st.sampled_from([None, 1, 3]),
    "filter": st.booleans(),
    "projection": st.booleans(),
    "segment": st.sampled_from([None, (0, 2), (1, 2)]),
    "count": st.booleans(),
})


def scan_request(table: str, s: dict[str, Any]) -> dict[str, Any]:
    request: dict[str, Any] = {"TableName": table}
    names: dict[str, str] = {}
    if s["limit"] is not None:
        request["Limit"] = s["limit"]
    if s["filter"]:
        request["FilterExpression"] = "#ttl < :c"
        request["ExpressionAttributeValues"] = {":c": {"N": "5"}}
        names["#ttl"] = "ttl"
    if s["count"]:
        request["Select"] = "COUNT"
    elif s["projection"]:
        request["ProjectionExpression"] = "taskId, readyKey"
    if s["segment"] is not None:
        request["Segment"], request["TotalSegments"] = s["segment"]
    if names:
        request["ExpressionAttributeNames"] = names
    return request


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                    HealthCheck.too_slow])
@given(ops=st.lists(task_op, max_size=25), queries=st.lists(index_query, min_size=1, max_size=5),
       scans=st.lists(scan, max_size=2))
def test_queue_table_queries_and_scans_answer_as_moto_does(engines: Engines, ops: list[Any], queries: list[Any],
                                                          scans: list[Any]) -> None:
    table = f"tasks-{next(NAMES)}"
    create_queue_table(engines.client, table)
    for op in ops:
        apply_task_op(engines.client, table, op)
    for q in queries:
        engines.same("query", query_request(table, q))
    for s in scans:
        engines.same("scan", scan_request(table, s))


# --------------------------------------------------------------------------- a table with a range key

def make_pairs_table(client: Any, name: str) -> None:
    """Hash and numeric range key; a global index with a numeric range key (ALL), one with a hash key only
    (INCLUDE), and a local index (left to moto)."""
    client.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": t} for n, t in
                              (("pk", "S"), ("sk", "N"), ("grp", "S"), ("score", "N"), ("owner", "S"))],
        GlobalSecondaryIndexes=[
            {"IndexName": "ByGroup", "Projection": {"ProjectionType": "ALL"},
             "KeySchema": [{"AttributeName": "grp", "KeyType": "HASH"}, {"AttributeName": "score", "KeyType": "RANGE"}]},
            {"IndexName": "ByOwner", "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["note"]},
             "KeySchema": [{"AttributeName": "owner", "KeyType": "HASH"}]},
        ],
        LocalSecondaryIndexes=[
            {"IndexName": "ByScore", "Projection": {"ProjectionType": "KEYS_ONLY"},
             "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "score", "KeyType": "RANGE"}]},
        ],
    )


pair = st.fixed_dictionaries({
    "pk": st.sampled_from(["a", "b"]), "sk": st.integers(-2, 6),
    "grp": st.one_of(st.none(), st.sampled_from(["g0", "g1"])), "score": st.sampled_from(NUMBERS),
    "owner": st.one_of(st.none(), st.sampled_from(["o0", "o1"])), "note": st.sampled_from(["", "n", "note"]),
})


def pair_item(p: dict[str, Any]) -> dict[str, Any]:
    item = {"pk": {"S": p["pk"]}, "sk": {"N": str(p["sk"])}, "score": {"N": p["score"]}, "note": {"S": p["note"]}}
    if p["grp"] is not None:
        item["grp"] = {"S": p["grp"]}
    if p["owner"] is not None:
        item["owner"] = {"S": p["owner"]}
    return item


pair_op = st.one_of(
    st.tuples(st.just("put"), pair),
    st.tuples(st.just("regroup"), pair),
    st.tuples(st.just("ungroup"), pair),
    st.tuples(st.just("delete"), pair),
)

pair_query = st.fixed_dictionaries({
    "target": st.sampled_from(["table", "ByGroup", "ByOwner", "ByScore"]),
    "partition": st.sampled_from(["a", "b", "g0", "g1", "o0", "o1"]),
    "op": st.sampled_from([None, "=", "<", ">=", "BETWEEN"]),
    "values": st.tuples(st.integers(-3, 7), st.integers(-3, 7)),
    "forward": st.booleans(),
    "limit": st.sampled_from([None, 1, 2]),
    "filter": st.booleans(),
    "count": st.booleans(),
})


def pair_request(table: str, q: dict[str, Any]) -> dict[str, Any]:
    hash_name, range_name = {"table": ("pk", "sk"), "ByGroup": ("grp", "score"), "ByOwner": ("owner", None),
                             "ByScore": ("pk", "score")}[q["target"]]
    names = {"#h": hash_name}
    values: dict[str, Any] = {":h": {"S": q["partition"]}}
    expression = "#h = :h"
    if q["op"] is not None and range_name is not None:
        names["#r"] = range_name
        low, high = sorted(q["values"])
        values[":v"] = {"N": str(low)}
        if q["op"] == "BETWEEN":
            values[":w"] = {"N": str(high)}
            expression += " AND #r BETWEEN :v AND :w"
        else:
            expression += f" AND #r {q['op']} :v"
    request: dict[str, Any] = {"TableName": table, "KeyConditionExpression": expression,
                               "ScanIndexForward": q["forward"]}
    if q["target"] != "table":
        request["IndexName"] = q["target"]
    if q["limit"] is not None:
        request["Limit"] = q["limit"]
    if q["filter"]:
        request["FilterExpression"] = "note <> :empty"
        values[":empty"] = {"S": ""}
    if q["count"]:
        request["Select"] = "COUNT"
    request["ExpressionAttributeNames"], request["ExpressionAttributeValues"] = names, values
    return request


def apply_pair_op(client: Any, table: str, op: tuple[str, dict[str, Any]]) -> None:
    kind, p = op
    item_key = {"pk": {"S": p["pk"]}, "sk": {"N": str(p["sk"])}}
    if kind == "put":
        client.put_item(TableName=table, Item=pair_item(p))
    elif kind == "regroup":
        client.update_item(TableName=table, Key=item_key, UpdateExpression="SET grp = :g, score = :s, #o = :o",
                           ExpressionAttributeNames={"#o": "owner"},
                           ExpressionAttributeValues={":g": {"S": p["grp"] or "g1"}, ":s": {"N": p["score"]},
                                                      ":o": {"S": p["owner"] or "o0"}})
    elif kind == "ungroup":
        client.update_item(TableName=table, Key=item_key, UpdateExpression="REMOVE grp, #o",
                           ExpressionAttributeNames={"#o": "owner"})
    else:
        client.delete_item(TableName=table, Key=item_key)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                    HealthCheck.too_slow])
@given(ops=st.lists(pair_op, max_size=25), queries=st.lists(pair_query, min_size=1, max_size=5),
       scans=st.lists(scan, max_size=2))
def test_range_key_table_queries_and_scans_answer_as_moto_does(engines: Engines, ops: list[Any], queries: list[Any],
                                                              scans: list[Any]) -> None:
    table = f"pairs-{next(NAMES)}"
    make_pairs_table(engines.client, table)
    for op in ops:
        apply_pair_op(engines.client, table, op)
    for q in queries:
        engines.same("query", pair_request(table, q))
    for s in scans:
        request = scan_request(table, s)
        request.pop("FilterExpression", None), request.pop("ExpressionAttributeValues", None)
        request.pop("ExpressionAttributeNames", None)
        if "ProjectionExpression" in request:
            request["ProjectionExpression"] = "pk, grp"
        engines.same("scan", request)


# --------------------------------------------------------------------------- what changes items behind moto's back

def ready_count(engines: Engines, table: str, partition: str) -> list[dict[str, Any]]:
    return engines.same("query", {"TableName": table, "IndexName": "ReadyIndex", "Select": "COUNT",
                                  "KeyConditionExpression": "readyKey = :k", "FilterExpression": "#ttl > :now",
                                  "ExpressionAttributeNames": {"#ttl": "ttl"},
                                  "ExpressionAttributeValues": {":k": {"S": partition}, ":now": {"N": "5"}}})


def fill(engines: Engines, table: str, n: int, padding: int = 0) -> None:
    for i in range(n):
        item = task_item({"id": i, "ready": ("p0", SORTS[i % len(SORTS)], i % 4), "status": None,
                          "ttl": NUMBERS[i % len(NUMBERS)], "notBefore": None, "padding": padding})
        item["taskId"] = {"S": f"t{i:04d}"}
        engines.client.put_item(TableName=table, Item=item)


def test_a_count_of_a_partition_many_megabytes_long_pages_as_moto_pages(engines: Engines) -> None:
    table = f"tasks-{next(NAMES)}"
    create_queue_table(engines.client, table)
    fill(engines, table, 40, padding=150_000)  # 6 MB: seven pages of at most 1 MB of items read
    pages = ready_count(engines, table, "p0")
    assert len(pages) == 7 and sum(p["ScannedCount"] for p in pages) == 40
    assert sum(p["Count"] for p in pages) == sum(1 for i in range(40) if float(NUMBERS[i % len(NUMBERS)]) > 5)


def test_items_put_back_as_they_were_by_index_lag_are_what_the_index_answers(engines: Engines) -> None:
    """local/faults/index_lag.py shows a lagged read the table of N seconds ago by putting earlier items in place with
    wsgi_request.set_item (no moto call), answering, and putting the current ones back."""
    table = f"tasks-{next(NAMES)}"
    create_queue_table(engines.client, table)
    fill(engines, table, 12)
    moto_table = engines.table(table)
    where = slot(moto_table, {"taskId": {"S": "t0003"}})
    before = copy.deepcopy(get_item(moto_table, where))
    engines.client.update_item(**update_request(table, 0, "leave") | {"Key": {"taskId": {"S": "t0003"}}})
    engines.client.delete_item(TableName=table, Key={"taskId": {"S": "t0004"}})
    now = ready_count(engines, table, "p0")
    current = get_item(moto_table, where)
    set_item(moto_table, where, before)  # the lagged read's view: t0003 still in p0
    assert ready_count(engines, table, "p0") != now
    set_item(moto_table, where, current)
    assert ready_count(engines, table, "p0") == now


def test_an_update_that_fails_halfway_is_indexed_as_it_stands(engines: Engines) -> None:
    """moto applies an update's actions one by one and raises when the item outgrows its 405,000 bytes, leaving the
    first actions applied: the index follows the item as it stands, not as it was."""
    table = f"tasks-{next(NAMES)}"
    create_queue_table(engines.client, table)
    fill(engines, table, 3, padding=300_000)
    with pytest.raises(ClientError):
        engines.client.update_item(TableName=table, Key={"taskId": {"S": "t0001"}},
                                   UpdateExpression="SET readyKey = :k, extra = :big",
                                   ExpressionAttributeValues={":k": {"S": "p1"}, ":big": {"S": "z" * 200_000}})
    moved = ready_count(engines, table, "p1")
    assert moved[0]["ScannedCount"] == 1, "moto left the first action applied"


def test_a_table_whose_items_were_replaced_is_indexed_again(engines: Engines) -> None:
    table = f"tasks-{next(NAMES)}"
    create_queue_table(engines.client, table)
    fill(engines, table, 8)
    ready_count(engines, table, "p0")
    moto_table = engines.table(table)
    moto_table.items = copy.deepcopy(moto_table.items)  # as a restore from backup does: plain dicts
    engines.client.delete_item(TableName=table, Key={"taskId": {"S": "t0002"}})
    assert ready_count(engines, table, "p0")[0]["ScannedCount"] == 7


def test_a_global_index_added_to_a_table_is_answered_from_its_items(engines: Engines) -> None:
    table = f"pairs-{next(NAMES)}"
    make_pairs_table(engines.client, table)
    for sk in range(5):
        engines.client.put_item(TableName=table, Item={"pk": {"S": "a"}, "sk": {"N": str(sk)}, "score": {"N": "1"},
                                                       "note": {"S": "n" if sk % 2 else "m"}})
    engines.same("query", {"TableName": table, "KeyConditionExpression": "pk = :p",
                           "ExpressionAttributeValues": {":p": {"S": "a"}}})
    engines.client.update_table(TableName=table, AttributeDefinitions=[{"AttributeName": "note", "AttributeType": "S"}],
                                GlobalSecondaryIndexUpdates=[{"Create": {
                                    "IndexName": "ByNote", "Projection": {"ProjectionType": "KEYS_ONLY"},
                                    "KeySchema": [{"AttributeName": "note", "KeyType": "HASH"}]}}])
    pages = engines.same("query", {"TableName": table, "IndexName": "ByNote", "KeyConditionExpression": "note = :n",
                                   "ExpressionAttributeValues": {":n": {"S": "n"}}})
    assert pages[0]["Count"] == 2


def test_reads_this_module_leaves_to_moto_answer_as_moto_does(engines: Engines) -> None:
    table = f"pairs-{next(NAMES)}"
    make_pairs_table(engines.client, table)
    for sk in range(6):
        engines.client.put_item(TableName=table, Item=pair_item({"pk": "a", "sk": sk, "grp": "g0", "score": "1",
                                                                 "owner": None, "note": "n"}))
    engines.same("query", {"TableName": table, "KeyConditions": {
        "pk": {"ComparisonOperator": "EQ", "AttributeValueList": [{"S": "a"}]}},
        "QueryFilter": {"score": {"ComparisonOperator": "EQ", "AttributeValueList": [{"N": "1"}]}}})
    engines.same("scan", {"TableName": table, "IndexName": "ByGroup", "Limit": 2})
    engines.same("scan", {"TableName": table, "ScanFilter": {
        "sk": {"ComparisonOperator": "GT", "AttributeValueList": [{"N": "2"}]}}})
    engines.same("query", {"TableName": table, "IndexName": "ByGroup", "ConsistentRead": True,
                           "KeyConditionExpression": "grp = :g", "ExpressionAttributeValues": {":g": {"S": "g0"}}})
    engines.same("query", {"TableName": table, "IndexName": "Nope", "KeyConditionExpression": "grp = :g",
                           "ExpressionAttributeValues": {":g": {"S": "g0"}}})


def test_the_boards_counts_walk_no_table(engines: Engines, monkeypatch: pytest.MonkeyPatch) -> None:
    """TaskStore.depth (the board's queues page) on a queue of 300 tasks: its COUNT queries never sort or walk the
    table (moto's Table.all_items / sorted_items), which is what made a 100,000-task page never answer."""
    from taskqueue.core.clock import SystemClock
    from taskqueue.core.model import new_tasks, parse_create_request
    from taskqueue.core.settings import Settings
    from taskqueue.store import TaskStore

    table = f"tasks-{next(NAMES)}"
    create_queue_table(engines.client, table)
    settings = Settings(queue_table_name=table)
    store = TaskStore(engines.client, settings, SystemClock())
    store.pause("work")
    request = parse_create_request({"queue": "work", "count": 300, "payload": {"n": 1}}, settings)
    store.put_tasks(new_tasks(request, 1_700_000_000_000, settings))

    def walked(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the table was walked")

    monkeypatch.setattr(Table, "all_items", walked)
    monkeypatch.setattr(Table, "sorted_items", walked)
    depth = store.depth("work", now_ms=1_700_000_000_000)
    assert depth.pending == 300
