"""The fake DynamoDB's reads of many items: Query, Scan, BatchGetItem, TransactGetItems.

Query and Scan read a table, or a global secondary index (never strongly consistent; as it was ``index_lag_s`` ago
when the fault says so), in key order (Scan: a stable order standing in for DynamoDB's hash order), stop at
``Limit`` items *read* or 1 MB and then return ``LastEvaluatedKey`` (also when nothing more is left, as DynamoDB
does), apply ``FilterExpression`` after that, and bill what they read, rounded up to 4 KB once per request.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping
from typing import Any

from bench.cost_meter import item_size
from sim import ddb_capacity as capacity
from sim.ddb_eval import resolve
from sim.ddb_expressions import FILTER, KEY_CONDITION, PROJECTION
from sim.ddb_state import QUERY_KINDS, READ_KINDS, SCAN_KINDS, Database, Expressions, Invalid, NotFound, request_key
from sim.ddb_tables import HIGH, Key, Partitions, Table
from sim.ddb_values import Item, Value, copy_item, scalar_key, type_of
from sim.faults import Fault

PAGE_BYTES = 1024 * 1024


def _target(table: Table, params: Mapping[str, Any]) -> tuple[str | None, str, str | None]:
    """(index name or None, partition key, sort key) of what a Query or Scan reads."""
    name = params.get("IndexName")
    if name is None:
        return None, table.schema.hash_key, table.schema.range_key
    index = table.schema.index(name)
    if index is None:
        raise Invalid(f"The table does not have the specified index: {name}")
    if params.get("ConsistentRead"):
        raise Invalid("Consistent reads are not supported on global secondary indexes")
    return name, index.hash_key, index.range_key


def _key_conditions(tree: Any, names: Mapping[str, str], values: Mapping[str, Value], hash_key: str,
                    range_key: str | None) -> tuple[Value, Any]:
    """The partition value and the sort key's condition (None, or the tree of one comparison) of a query."""
    parts = []

    def flatten(node: Any) -> None:
        if node[0] == "and":
            flatten(node[1])
            flatten(node[2])
        elif node[0] in ("or", "not"):
            raise Invalid(f"Invalid operator used in KeyConditionExpression: {node[0].upper()}")
        else:
            parts.append(node)

    flatten(tree)
    hash_value, sort = None, None
    for part in parts:
        target = part[2][0] if part[0] == "fn" else part[1] if part[0] == "between" else part[2]
        attribute = resolve(target, names)[0] if target[0] == "path" else None
        if part[0] == "cmp" and part[1] == "=" and attribute == hash_key and part[3][0] == "value":
            if hash_value is not None:
                raise Invalid("KeyConditionExpressions must only contain one condition per key")
            hash_value = values[part[3][1]]
        elif attribute is not None and attribute == range_key and sort is None:
            sort = part
        else:
            raise Invalid("Query key condition not supported")
    if hash_value is None:
        raise Invalid(f"Query condition missed key schema element: {hash_key}")
    return hash_value, sort


def _bounds(places: Any, sort: Any, values: Mapping[str, Value], expected: str) -> tuple[int, int, str | None]:
    """Positions [start, stop) of a sorted partition's places that a sort-key condition selects, and a prefix that
    the places must begin with (begins_with), else None."""
    if sort is None:
        return 0, len(places), None

    def operand(node: Any) -> Any:
        value = values[node[1]] if node[0] == "value" else None
        if value is None or type_of(value) != expected:
            raise Invalid("One or more parameter values were invalid: Condition parameter type does not match schema "
                          "type")
        return scalar_key(value)

    if sort[0] == "between":
        low, high = operand(sort[2]), operand(sort[3])
        if low > high:
            raise Invalid("Invalid KeyConditionExpression: The BETWEEN operator requires upper bound to be greater "
                          f"than or equal to lower bound; lower bound operand: AttributeValue: {{{expected}:{low}}}, "
                          f"upper bound operand: AttributeValue: {{{expected}:{high}}}")
        return places.bisect_left((low,)), places.bisect_left((high, HIGH)), None
    if sort[0] == "fn":
        if sort[1] != "begins_with":
            raise Invalid(f"Invalid KeyConditionExpression: Invalid function name; function: {sort[1]}")
        if expected == "N":
            raise Invalid("Invalid KeyConditionExpression: Incorrect operand type for operator or function; operator "
                          "or function: begins_with, operand type: N")
        prefix = operand(sort[2][1])
        start = places.bisect_left((prefix,))
        stop = start
        while stop < len(places) and places[stop][0][:len(prefix)] == prefix:
            stop += 1
        return start, stop, None
    op, value = sort[1], operand(sort[3])
    if op == "<>":
        raise Invalid("Unsupported operator on KeyConditionExpression: operator: <>")
    low, high = places.bisect_left((value,)), places.bisect_left((value, HIGH))
    return {"=": (low, high), "<": (0, low), "<=": (0, high), ">": (high, len(places)),
            ">=": (low, len(places))}[op] + (None,)


def _start_place(table: Table, index: str | None, start: Mapping[str, Value] | None) -> tuple[Any, Key] | None:
    if not start:
        return None
    try:
        key = table.key_of(start)
        if index is None:
            sort_name = table.schema.range_key
        else:
            sort_name = table.indexes[index].schema.range_key
        return (scalar_key(start[sort_name]) if sort_name else None, key)
    except (KeyError, Invalid):
        raise Invalid("The provided starting key is invalid: The provided key element does not match the schema") from None


def query(db: Database, params: Mapping[str, Any], fault: Fault | None) -> dict[str, Any]:
    table = db.table(params.get("TableName"))
    index, hash_key, range_key = _target(table, params)
    expressions = Expressions(params, QUERY_KINDS)
    if KEY_CONDITION not in expressions.parsed:
        raise Invalid("Either the KeyConditions or KeyConditionExpression parameter must be specified in the request.")
    hash_value, sort = _key_conditions(expressions.parsed[KEY_CONDITION].tree, expressions.names, expressions.values,
                                       hash_key, range_key)
    if type_of(hash_value) != table.schema.types.get(hash_key):
        raise Invalid("One or more parameter values were invalid: Condition parameter type does not match schema type")
    forward = params.get("ScanIndexForward", True)
    start = _start_place(table, index, params.get("ExclusiveStartKey"))
    if index is None and range_key is None:
        key = (scalar_key(hash_value),)
        found = table.items.get(key)
        rows: Iterator[tuple[Key, Item]] = iter([(key, found)] if found is not None and start is None else [])
    else:
        lag_us = int((fault.index_lag_s if fault is not None and index else 0) * 1_000_000)
        view = table.partitions(index, db.now_us() - lag_us if lag_us else None)
        places = view.lists.get(scalar_key(hash_value))
        rows = _sorted_rows(table, index, view, places, sort, expressions.values,
                            table.schema.types.get(range_key or "", "S"), start, forward)
    end = _range_end(sort, expressions.values, forward)
    last_possible = None if end is None or range_key is None else (
        lambda row: scalar_key(row[range_key]) == end)  # type: ignore[index]
    return _page(db, "Query", table, index, params, expressions, rows, str(next(iter(hash_value.values()))),
                 last_possible)


def _range_end(sort: Any, values: Mapping[str, Value], forward: bool) -> Any:
    """The inclusive bound a query's sort condition ends at in its direction (<= going up, >= going down, BETWEEN
    either way): a page that stops on it has nothing after it, and DynamoDB returns no LastEvaluatedKey."""
    if sort is None:
        return None
    if sort[0] == "between":
        node = sort[3] if forward else sort[2]
    elif sort[0] == "cmp" and sort[1] == ("<=" if forward else ">="):
        node = sort[3]
    else:
        return None
    return scalar_key(values[node[1]]) if node[0] == "value" else None


def _sorted_rows(table: Table, index: str | None, view: Partitions, places: Any, sort: Any,
                 values: Mapping[str, Value], sort_type: str, start: tuple[Any, Key] | None,
                 forward: bool) -> Iterator[tuple[Key, Item]]:
    if not places:
        return
    low, high, _ = _bounds(places, sort, values, sort_type)
    if start is not None:
        if forward:
            low = max(low, places.bisect_right(start))
        else:
            high = min(high, places.bisect_left(start))
    positions = range(low, high) if forward else range(high - 1, low - 1, -1)
    rows = view.rows if index is not None else table.items
    for position in positions:
        _, key = places[position]
        yield key, rows[key]


def _page(db: Database, operation: str, table: Table, index: str | None, params: Mapping[str, Any],
          expressions: Expressions, rows: Iterator[tuple[Key, Item]], partition: str,
          last_possible: Any = None) -> dict[str, Any]:
    limit = params.get("Limit")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise Invalid("1 validation error detected: Value at 'limit' failed to satisfy constraint: Member must have "
                      "value greater than or equal to 1")
    select = params.get("Select")
    if select == "COUNT" and PROJECTION in expressions.parsed:
        raise Invalid("Cannot specify the ProjectionExpression when choosing to get COUNT")
    if select == "ALL_ATTRIBUTES" and index is not None and table.indexes[index].schema.projection != "ALL":
        raise Invalid("One or more parameter values were invalid: Select type ALL_ATTRIBUTES is not supported for "
                      f"global secondary index {index} because its projection type is not ALL")
    items: list[Item] = []
    scanned = size = 0
    last: Item | None = None
    exhausted = True
    for _key, row in rows:
        scanned += 1
        size += item_size(row)
        if expressions.holds(FILTER, row):
            items.append(row)
        if (limit is not None and scanned >= limit) or size >= PAGE_BYTES:
            last, exhausted = row, last_possible is not None and last_possible(row)
            break
    charge = capacity.read_page(table.cost, index, partition, size, bool(params.get("ConsistentRead")))
    charges = db.capacity.book(operation, [charge])
    response: dict[str, Any] = {"Count": len(items), "ScannedCount": scanned}
    if select != "COUNT":
        response["Items"] = [copy_item(expressions.project(item)) for item in items]
    if not exhausted and last is not None:
        names = table.schema.key_names + (table.indexes[index].schema.key_names if index else ())
        response["LastEvaluatedKey"] = copy_item({n: last[n] for n in dict.fromkeys(names)})
    entries = capacity.consumed(charges, params.get("ReturnConsumedCapacity"))
    if entries is not None:
        response["ConsumedCapacity"] = entries[0]
    return response


def scan(db: Database, params: Mapping[str, Any], fault: Fault | None) -> dict[str, Any]:
    table = db.table(params.get("TableName"))
    index, _, _ = _target(table, params)
    expressions = Expressions(params, SCAN_KINDS)
    segment, segments = params.get("Segment"), params.get("TotalSegments")
    if (segment is None) != (segments is None) or (segments is not None and not 0 <= segment < segments):
        raise Invalid("The Segment parameter is required but was not present in the request when parameter "
                      "TotalSegments is present" if segment is None else "Segment must be less than TotalSegments")
    if index is None:
        ordered = list(table.scan_order())
    else:
        lag_us = int((fault.index_lag_s if fault is not None else 0) * 1_000_000)
        view = table.partitions(index, db.now_us() - lag_us if lag_us else None)
        ordered = [(key, view.rows[key]) for partition in sorted(view.lists, key=lambda p: (type(p).__name__, p))
                   for _, key in view.lists[partition]]
    if segments is not None:
        ordered = [(k, r) for k, r in ordered if zlib.crc32(repr(k[0]).encode()) % segments == segment]
    start = params.get("ExclusiveStartKey")
    if start:
        first = table.key_of(start)
        at = next((i for i, (k, _) in enumerate(ordered) if k == first), None)
        if at is None:
            raise Invalid("The provided starting key is invalid")
        ordered = ordered[at + 1:]
    return _page(db, "Scan", table, index, params, expressions, iter(ordered), "*")


def batch_get_item(db: Database, params: Mapping[str, Any], fault: Fault | None, rng: Any) -> dict[str, Any]:
    requests = params.get("RequestItems")
    if not isinstance(requests, Mapping) or not requests:
        raise Invalid("1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Member must "
                      "have length greater than or equal to 1")
    if sum(len(spec.get("Keys") or []) for spec in requests.values()) > 100:
        raise Invalid("Too many items requested for the BatchGetItem call")
    planned = []
    for name, spec in requests.items():
        table = db.table(name)
        expressions = Expressions(spec, READ_KINDS)
        keys = [request_key(table, key) for key in spec.get("Keys") or []]
        if len({k for k, _ in keys}) != len(keys):
            raise Invalid("Provided list of item keys contains duplicates")
        planned.append((name, spec, table, expressions, keys))
    responses: dict[str, list[Item]] = {}
    unprocessed: dict[str, dict[str, Any]] = {}
    charges = []
    for name, spec, table, expressions, keys in planned:
        found = responses.setdefault(name, [])
        for key, key_item in keys:
            if fault is not None and fault.unprocessed and rng.random() < fault.unprocessed:
                left = unprocessed.setdefault(name, {**{k: v for k, v in spec.items() if k != "Keys"}, "Keys": []})
                left["Keys"].append(copy_item(key_item))
                continue
            item = table.items.get(key)
            charges.append(capacity.read_item(table.cost, key_item, item, bool(spec.get("ConsistentRead"))))
            if item is not None:
                found.append(copy_item(expressions.project(item)))
        rng.shuffle(found)  # DynamoDB returns a batch's items in no particular order
    db.capacity.book("BatchGetItem", charges)
    response: dict[str, Any] = {"Responses": responses, "UnprocessedKeys": unprocessed}
    entries = capacity.consumed(charges, params.get("ReturnConsumedCapacity"))
    if entries is not None:
        response["ConsumedCapacity"] = entries
    return response


def transact_get_items(db: Database, params: Mapping[str, Any], fault: Fault | None) -> dict[str, Any]:
    entries = params.get("TransactItems")
    if not isinstance(entries, list) or not 1 <= len(entries) <= 100:
        raise Invalid("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member "
                      "must have length less than or equal to 100, Member must have length greater than or equal to 1")
    planned = []
    for entry in entries:
        if set(entry) != {"Get"}:
            raise Invalid("TransactGetItems can only contain Get operations")
        body = entry["Get"]
        table = db.table(body.get("TableName"))
        planned.append((table, Expressions(body, READ_KINDS), request_key(table, body.get("Key"))))
    results, charges = [], []
    for table, expressions, (key, key_item) in planned:
        item = table.items.get(key)
        charges.append(capacity.read_item(table.cost, key_item, item, True, factor=2))
        results.append({"Item": copy_item(expressions.project(item))} if item is not None else {})
    db.capacity.book("TransactGetItems", charges)
    response: dict[str, Any] = {"Responses": results}
    consumed = capacity.consumed(charges, params.get("ReturnConsumedCapacity"))
    if consumed is not None:
        response["ConsumedCapacity"] = consumed
    return response


__all__ = ["query", "scan", "batch_get_item", "transact_get_items", "NotFound"]
