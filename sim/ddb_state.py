"""The fake DynamoDB's state (tables, streams, capacity, virtual time) and the request checks every operation shares.

``Database.store`` is the one way an item changes: the table and its indexes follow, the stream gets its record,
and a write that leaves the item as it was changes nothing (no index write, no stream record). The checks raise
``Invalid`` (ValidationException) with DynamoDB's own wording, so the product meets the refusals it would meet.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bench.cost_meter import item_size
from sim.ddb_capacity import Capacity
from sim.ddb_eval import EvalError, check_literals, condition, project_paths, projection, update
from sim.ddb_expressions import CONDITION, FILTER, KEY_CONDITION, PROJECTION, UPDATE, Parsed, parse
from sim.ddb_streams import StreamLog
from sim.ddb_tables import Key, Table
from sim.ddb_values import (
    MAX_HASH_KEY_BYTES,
    MAX_ITEM_BYTES,
    MAX_RANGE_KEY_BYTES,
    Invalid,
    Item,
    Value,
    check_value,
    incoming_value,
    items_equal,
    type_of,
)

__all__ = ["Database", "NotFound", "ConditionFailed", "Cancelled", "Expressions", "EvalError", "Invalid"]


class NotFound(Exception):
    """ResourceNotFoundException: no such table or index."""


class ConditionFailed(Exception):
    """ConditionalCheckFailedException; ``item``: the item as it was, when the request asked for it."""

    def __init__(self, item: Item | None) -> None:
        super().__init__("The conditional request failed")
        self.item = item


class Cancelled(Exception):
    """TransactionCanceledException with one reason per item ({"Code": "None"} for the items not at fault)."""

    def __init__(self, reasons: list[dict[str, Any]]) -> None:
        codes = ", ".join(r["Code"] for r in reasons)
        super().__init__(f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]")
        self.reasons = reasons


class Database:
    def __init__(self, now_us: Callable[[], int], epoch_ms: Callable[[], int]) -> None:
        self.tables: dict[str, Table] = {}
        self.streams: dict[str, StreamLog] = {}
        self.capacity = Capacity()
        self.sequence = 0
        self.now_us = now_us
        self.epoch_ms = epoch_ms

    def table(self, name: Any) -> Table:
        table = self.tables.get(name) if isinstance(name, str) else None
        if table is None:
            raise NotFound(f"Requested resource not found: Table: {name} not found")
        return table

    def store(self, table: Table, key: Key, old: Item | None, new: Item | None, *, ttl: bool = False) -> bool:
        """Write ``new`` (None: delete) over ``old``; False when nothing changed."""
        if old is None and new is None:
            return False
        if old is not None and new is not None and items_equal(old, new):
            return False
        table.write(key, old, new, self.now_us())
        log = self.streams.get(table.schema.name)
        if log is not None:
            self.sequence += 1
            log.append(self.sequence, self.epoch_ms() / 1000, old, new, ttl=ttl)
        return True


# ---- keys and items -----------------------------------------------------------------------------------------


def request_key(table: Table, key: Any) -> tuple[Key, Item]:
    """A request's Key: exactly the table's key attributes, of their types."""
    schema = table.schema
    if not isinstance(key, Mapping) or set(key) != set(schema.key_names):
        raise Invalid("The provided key element does not match the schema")
    for name in schema.key_names:
        _check_key_value(table, name, key[name])
    copy = {name: incoming_value(key[name]) for name in schema.key_names}
    return table.key_of(copy), copy


def _check_key_value(table: Table, name: str, value: Any) -> None:
    check_value(value, name)
    expected = table.schema.types.get(name)
    actual = type_of(value)
    if actual != expected:
        raise Invalid(f"One or more parameter values were invalid: Type mismatch for key {name} expected: {expected} "
                      f"actual: {actual}")
    data = value[actual]
    if actual in ("S", "B") and len(data) == 0:
        raise Invalid("One or more parameter values are not valid. The AttributeValue for a key attribute cannot "
                      f"contain an empty {'string' if actual == 'S' else 'binary'} value. Key: {name}")
    size = len(data.encode("utf-8")) if actual == "S" else len(data) if actual == "B" else 0
    if name == table.schema.hash_key and size > MAX_HASH_KEY_BYTES:
        raise Invalid("One or more parameter values were invalid: Size of hashkey has exceeded the maximum size "
                      f"limit of{MAX_HASH_KEY_BYTES} bytes")
    if name == table.schema.range_key and size > MAX_RANGE_KEY_BYTES:
        raise Invalid("One or more parameter values were invalid: Aggregated size of all range keys has exceeded the "
                      f"size limit of {MAX_RANGE_KEY_BYTES} bytes")


def check_new_item(table: Table, item: Mapping[str, Value], *, update: bool = False) -> None:
    """An item about to be written: its key, its index keys, its size (values were checked on the way in)."""
    schema = table.schema
    for name in schema.key_names:
        if name not in item:
            raise Invalid(f"One or more parameter values were invalid: Missing the key {name} in the item")
        _check_key_value(table, name, item[name])
    for index in schema.indexes:
        for name in index.key_names:
            value = item.get(name)
            if value is None:
                continue
            expected, actual = schema.types.get(name), type_of(value)
            if actual != expected:
                raise Invalid(f"One or more parameter values were invalid: Type mismatch for Index Key {name} "
                              f"Expected: {expected} Actual: {actual} IndexName: {index.name}")
            if actual in ("S", "B") and len(value[actual]) == 0:
                raise Invalid("One or more parameter values are not valid. A value specified for a secondary index "
                              "key is not supported. The AttributeValue for a key attribute cannot contain an empty "
                              f"string value. IndexName: {index.name}, IndexKey: {name}")
    if item_size(item) > MAX_ITEM_BYTES:
        raise Invalid("Item size to update has exceeded the maximum allowed size" if update
                      else "Item size has exceeded the maximum allowed size")


def incoming_item(table: Table, item: Any) -> Item:
    """A PutItem's (or Put's) Item, checked and copied."""
    if not isinstance(item, Mapping):
        raise Invalid("One or more parameter values were invalid: Item must be a map")
    for name, value in item.items():
        check_value(value, name)
    copy = {name: incoming_value(value) for name, value in item.items()}
    check_new_item(table, copy)
    return copy


# ---- expressions ------------------------------------------------------------------------------------------


class _Shape:
    """What a request's expressions and names decide, whatever its values: parsed and compiled once per distinct
    (expressions, names) and reused (the product sends a few hundred shapes, millions of times)."""

    def __init__(self, parsed: dict[str, Parsed], names: Mapping[str, str], key_names: tuple[str, ...]) -> None:
        self.parsed = parsed
        used_names = set().union(*(p.names for p in parsed.values())) if parsed else set()
        self.used_values = frozenset(set().union(*(p.values for p in parsed.values()))) if parsed else frozenset()
        for name in sorted(used_names):
            if name not in names:
                raise Invalid(f"Invalid {self.kind_using(name)}: An expression attribute name used in the document "
                              f"path is not defined; attribute name: {name}")
        unused = sorted(set(names) - used_names)
        if unused:
            raise Invalid(f"Value provided in ExpressionAttributeNames unused in expressions: keys: {{{', '.join(unused)}}}")
        # Compiled now: what DynamoDB refuses in an expression itself is refused before any item is read.
        self.checks = {kind: condition(p, names) for kind, p in parsed.items() if kind in (CONDITION, FILTER)}
        self.plan = update(parsed[UPDATE], names) if UPDATE in parsed else None
        self.projector = projection(parsed[PROJECTION], names) if PROJECTION in parsed else None
        if self.plan is not None:
            for name in key_names:
                if name in self.plan.top_names:
                    raise Invalid(f"One or more parameter values were invalid: Cannot update attribute {name}. This "
                                  "attribute is part of the key")

    def kind_using(self, placeholder: str) -> str:
        for kind, parsed in self.parsed.items():
            if placeholder in parsed.names or placeholder in parsed.values:
                return kind
        return "Expression"


_shapes: dict[Any, _Shape] = {}


def _shape(params: Mapping[str, Any], kinds: tuple[str, ...], key_names: tuple[str, ...]) -> _Shape:
    names = params.get("ExpressionAttributeNames")
    key = (kinds, tuple(params.get(k) for k in kinds), tuple(sorted(names.items())) if names else (), key_names)
    found = _shapes.get(key)
    if found is None:
        parsed = {kind: parse(kind, params[kind]) for kind in kinds if params.get(kind) is not None}
        if names is not None and not parsed:
            raise Invalid("ExpressionAttributeNames can only be specified when using expressions")
        if names is not None and not names:
            raise Invalid("ExpressionAttributeNames must not be empty")
        if len(_shapes) > 20_000:
            _shapes.clear()
        found = _shapes[key] = _Shape(parsed, names or {}, key_names)
    return found


class Expressions:
    """A request's expressions parsed, its placeholders checked both ways (every one used is defined, every one
    defined is used), its values checked and copied."""

    def __init__(self, params: Mapping[str, Any], kinds: tuple[str, ...], key_names: tuple[str, ...] = ()) -> None:
        shape = _shape(params, kinds, key_names)
        self.parsed = shape.parsed
        self.names: Mapping[str, str] = params.get("ExpressionAttributeNames") or {}
        values = params.get("ExpressionAttributeValues")
        if values is not None and not self.parsed:
            raise Invalid("ExpressionAttributeValues can only be specified when using expressions")
        if values is not None and not values:
            raise Invalid("ExpressionAttributeValues must not be empty")
        values = values or {}
        if shape.used_values.difference(values):
            missing = sorted(shape.used_values.difference(values))[0]
            raise Invalid(f"Invalid {shape.kind_using(missing)}: An expression attribute value used in expression "
                          f"is not defined; attribute value: {missing}")
        if len(values) != len(shape.used_values):
            unused = sorted(set(values) - shape.used_values)
            raise Invalid(f"Value provided in ExpressionAttributeValues unused in expressions: keys: {{{', '.join(unused)}}}")
        self.values: dict[str, Value] = {}
        for name, value in values.items():
            check_value(value, name)
            self.values[name] = incoming_value(value)
        self._checks = shape.checks
        for kind in self._checks:
            check_literals(self.parsed[kind].tree, self.values)
        self._plan = shape.plan
        self._projector = shape.projector

    def holds(self, kind: str, item: Mapping[str, Value] | None) -> bool:
        """Does the condition (or filter) ``kind`` hold for ``item`` (None: no item)? True without one."""
        check = self._checks.get(kind)
        return True if check is None else check(item or {}, self.values)

    def updated(self, item: Mapping[str, Value]) -> Item:
        """The item after the UpdateExpression."""
        return dict(item) if self._plan is None else self._plan.apply(item, self.values)

    def updated_parts(self, item: Mapping[str, Value] | None) -> Item:
        """The parts of ``item`` the UpdateExpression names (UPDATED_OLD, UPDATED_NEW)."""
        if self._plan is None or item is None:
            return {}
        return project_paths(item, self._plan.paths)

    def project(self, item: Mapping[str, Value]) -> Mapping[str, Value]:
        return self._projector(item) if self._projector is not None else item


ITEM_KINDS = (CONDITION, UPDATE)
READ_KINDS = (PROJECTION,)
QUERY_KINDS = (KEY_CONDITION, FILTER, PROJECTION)
SCAN_KINDS = (FILTER, PROJECTION)
