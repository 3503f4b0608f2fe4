"""The fake DynamoDB's writes and single-item reads: PutItem, UpdateItem, DeleteItem, GetItem, BatchWriteItem,
TransactWriteItems. Each takes the ``Database``, the request's parameters and the fault (``sim.faults.Fault`` or
None) and returns the response boto3 would, or raises the ``ddb_state`` error DynamoDB would answer with.

Billing (``sim.ddb_capacity``): a write costs its item's write units (the larger of before and after) also when its
condition fails, transactions twice, index writes only when the write succeeded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim import ddb_capacity as capacity
from sim.ddb_expressions import CONDITION, UPDATE
from sim.ddb_state import (
    ITEM_KINDS,
    READ_KINDS,
    Cancelled,
    ConditionFailed,
    Database,
    Expressions,
    Invalid,
    check_new_item,
    incoming_item,
    request_key,
)
from sim.ddb_tables import Key, Table
from sim.ddb_values import Item, copy_item
from sim.faults import Fault

_CHECK_FAILED = "The conditional request failed"


def _with_capacity(response: dict[str, Any], charges: list[Any], params: Mapping[str, Any], many: bool = False
                   ) -> dict[str, Any]:
    entries = capacity.consumed(charges, params.get("ReturnConsumedCapacity"))
    if entries is not None:
        response["ConsumedCapacity"] = entries if many else entries[0]
    return response


def _refuse(db: Database, operation: str, table: Table, old: Item | None, params: Mapping[str, Any],
            attempted: Item | None = None) -> ConditionFailed:
    db.capacity.book(operation, capacity.write(table.cost, old, None, succeeded=False, attempted=attempted))
    db.capacity.totals.failed_conditions += 1
    wants_old = params.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
    return ConditionFailed(copy_item(old) if wants_old and old is not None else None)


def _return_values(params: Mapping[str, Any], allowed: tuple[str, ...]) -> str:
    mode = params.get("ReturnValues", "NONE")
    if mode not in allowed:
        raise Invalid("Return values set to invalid value")
    return str(mode)


def put_item(db: Database, params: Mapping[str, Any], fault: Fault | None) -> dict[str, Any]:
    table = db.table(params.get("TableName"))
    expressions = Expressions(params, (CONDITION,))
    mode = _return_values(params, ("NONE", "ALL_OLD"))
    item = incoming_item(table, params.get("Item"))
    key = table.key_of(item)
    old = table.items.get(key)
    if not expressions.holds(CONDITION, old):
        raise _refuse(db, "PutItem", table, old, params, attempted=item)
    db.store(table, key, old, item)
    charges = db.capacity.book("PutItem", capacity.write(table.cost, old, item))
    response: dict[str, Any] = {}
    if mode == "ALL_OLD" and old is not None:
        response["Attributes"] = copy_item(old)
    return _with_capacity(response, charges, params)


def update_item(db: Database, params: Mapping[str, Any], fault: Fault | None) -> dict[str, Any]:
    table = db.table(params.get("TableName"))
    key, key_item = request_key(table, params.get("Key"))
    expressions = Expressions(params, ITEM_KINDS, table.schema.key_names)
    mode = _return_values(params, ("NONE", "ALL_OLD", "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW"))
    old = table.items.get(key)
    if not expressions.holds(CONDITION, old):
        raise _refuse(db, "UpdateItem", table, old, params)
    new = expressions.updated(old if old is not None else key_item)
    check_new_item(table, new, update=True)
    db.store(table, key, old, new)
    charges = db.capacity.book("UpdateItem", capacity.write(table.cost, old, new))
    response: dict[str, Any] = {}
    returned: Mapping[str, Any] | None = None
    if mode == "ALL_NEW":
        returned = new
    elif mode == "ALL_OLD":
        returned = old
    elif mode == "UPDATED_NEW":
        returned = expressions.updated_parts(new)
    elif mode == "UPDATED_OLD":
        returned = expressions.updated_parts(old)
    if returned:
        response["Attributes"] = copy_item(returned)
    return _with_capacity(response, charges, params)


def delete_item(db: Database, params: Mapping[str, Any], fault: Fault | None) -> dict[str, Any]:
    table = db.table(params.get("TableName"))
    key, _ = request_key(table, params.get("Key"))
    expressions = Expressions(params, (CONDITION,))
    mode = _return_values(params, ("NONE", "ALL_OLD"))
    old = table.items.get(key)
    if not expressions.holds(CONDITION, old):
        raise _refuse(db, "DeleteItem", table, old, params)
    db.store(table, key, old, None)
    charges = db.capacity.book("DeleteItem", capacity.write(table.cost, old, None))
    response: dict[str, Any] = {}
    if mode == "ALL_OLD" and old is not None:
        response["Attributes"] = copy_item(old)
    return _with_capacity(response, charges, params)


def get_item(db: Database, params: Mapping[str, Any], fault: Fault | None) -> dict[str, Any]:
    table = db.table(params.get("TableName"))
    key, key_item = request_key(table, params.get("Key"))
    expressions = Expressions(params, READ_KINDS)
    item = table.items.get(key)
    charges = db.capacity.book("GetItem", [capacity.read_item(table.cost, key_item, item,
                                                              bool(params.get("ConsistentRead")))])
    response: dict[str, Any] = {}
    if item is not None:
        response["Item"] = copy_item(expressions.project(item))
    return _with_capacity(response, charges, params)


def batch_write_item(db: Database, params: Mapping[str, Any], fault: Fault | None, rng: Any) -> dict[str, Any]:
    requests = params.get("RequestItems")
    if not isinstance(requests, Mapping) or not requests:
        raise Invalid("1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Member must "
                      "have length greater than or equal to 1")
    planned: list[tuple[str, Table, Key, Item | None, dict[str, Any]]] = []
    seen: set[tuple[str, Key]] = set()
    for name, entries in requests.items():
        table = db.table(name)
        for entry in entries:
            if set(entry) == {"PutRequest"}:
                item: Item | None = incoming_item(table, entry["PutRequest"].get("Item"))
                key = table.key_of(item)  # type: ignore[arg-type]
            elif set(entry) == {"DeleteRequest"}:
                key, _ = request_key(table, entry["DeleteRequest"].get("Key"))
                item = None
            else:
                raise Invalid("Supplied AttributeValue has more than one datatypes set, must contain exactly one of "
                              "the supported datatypes")
            if (name, key) in seen:
                raise Invalid("Provided list of item keys contains duplicates")
            seen.add((name, key))
            planned.append((name, table, key, item, entry))
    if len(planned) > 25:
        raise Invalid("Too many items requested for the BatchWriteItem call")
    unprocessed: dict[str, list[dict[str, Any]]] = {}
    charges = []
    for name, table, key, item, entry in planned:
        if fault is not None and fault.unprocessed and rng.random() < fault.unprocessed:
            unprocessed.setdefault(name, []).append(entry)
            continue
        old = table.items.get(key)
        db.store(table, key, old, item)
        charges += capacity.write(table.cost, old, item)
    db.capacity.book("BatchWriteItem", charges)
    return _with_capacity({"UnprocessedItems": unprocessed}, charges, params, many=True)


_TRANSACT_KINDS = {"ConditionCheck": (CONDITION,), "Put": (CONDITION,), "Delete": (CONDITION,), "Update": ITEM_KINDS}


def transact_write_items(db: Database, params: Mapping[str, Any], fault: Fault | None) -> dict[str, Any]:
    entries = params.get("TransactItems")
    if not isinstance(entries, list) or not 1 <= len(entries) <= 100:
        raise Invalid("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member "
                      "must have length less than or equal to 100, Member must have length greater than or equal to 1")
    planned = []
    seen: set[tuple[str, Key]] = set()
    for entry in entries:
        if not isinstance(entry, Mapping) or len(entry) != 1 or next(iter(entry)) not in _TRANSACT_KINDS:
            raise Invalid("TransactItems can only contain one of Check, Put, Update or Delete")
        ((kind, body),) = entry.items()
        table = db.table(body.get("TableName"))
        expressions = Expressions(body, _TRANSACT_KINDS[kind], table.schema.key_names)
        if kind == "Put":
            item = incoming_item(table, body.get("Item"))
            key, key_item = table.key_of(item), table.key_item(item)
        else:
            key, key_item = request_key(table, body.get("Key"))
            item = None
        if kind == "ConditionCheck" and CONDITION not in expressions.parsed:
            raise Invalid("The ConditionExpression is required for a ConditionCheck")
        if kind == "Update" and UPDATE not in expressions.parsed:
            raise Invalid("1 validation error detected: Value null at 'transactItems.update.updateExpression' failed "
                          "to satisfy constraint: Member must not be null")
        if (table.schema.name, key) in seen:
            raise Invalid("Transaction request cannot include multiple operations on one item")
        seen.add((table.schema.name, key))
        planned.append((kind, body, table, key, key_item, item, expressions))
    reasons: list[dict[str, Any]] = []
    outcomes: list[tuple[Table, Key, Item | None, Item | None, str]] = []
    for kind, body, table, key, key_item, item, expressions in planned:
        old = table.items.get(key)
        if not expressions.holds(CONDITION, old):
            reason = {"Code": "ConditionalCheckFailed", "Message": _CHECK_FAILED}
            if body.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and old is not None:
                reason["Item"] = copy_item(old)
            reasons.append(reason)
            outcomes.append((table, key, old, item, kind))
            continue
        try:
            if kind == "Update":
                new = expressions.updated(old if old is not None else key_item)
                check_new_item(table, new, update=True)
            else:
                new = item if kind == "Put" else (None if kind == "Delete" else old)
        except Invalid as exc:
            reasons.append({"Code": "ValidationError", "Message": str(exc)})
            outcomes.append((table, key, old, item, kind))
            continue
        reasons.append({"Code": "None"})
        outcomes.append((table, key, old, new, kind))
    if any(r["Code"] != "None" for r in reasons):
        charges = []
        for table, _key, old, item, kind in outcomes:
            attempted = item if kind == "Put" else None
            charges += capacity.write(table.cost, old, None, succeeded=False, attempted=attempted, factor=2)
        db.capacity.book("TransactWriteItems", charges)
        db.capacity.totals.cancelled_transactions += 1
        raise Cancelled(reasons)
    charges = []
    for table, key, old, new, kind in outcomes:
        if kind == "ConditionCheck":
            charges += capacity.write(table.cost, old, None, succeeded=False, factor=2)
            continue
        db.store(table, key, old, new)
        charges += capacity.write(table.cost, old, new, factor=2)
    db.capacity.book("TransactWriteItems", charges)
    return _with_capacity({}, charges, params, many=True)
