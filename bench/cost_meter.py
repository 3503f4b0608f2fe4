"""A cost meter: DynamoDB's billing rules applied to every request a boto3 client sends.

Attach it to any number of DynamoDB clients (``meter.attach(client)``); it hooks botocore's events
(``before-parameter-build``, ``before-call``, ``after-call``, ``after-call-error``) and, for each request,
charges what DynamoDB bills (on-demand request units = provisioned capacity units):

- **Item size** as DynamoDB counts it: attribute name bytes + value bytes. Strings and binaries by their
  UTF-8 / raw length; numbers by their base-100 digit pairs aligned on the decimal point, leading and
  trailing zero pairs dropped, + 1 byte (+ 1 more if negative); booleans and nulls 1 byte; lists and maps
  3 bytes + 1 byte per element (+ each map key's name); sets the sum of their elements. Checked byte for byte
  against DynamoDB Local's capacity figures (docs/benchmarks.md).
- **Writes**: 1 unit per started 1 KB of the larger of the item before and after (PutItem, UpdateItem), of
  the deleted item (DeleteItem, at least 1). BatchWriteItem item by item. A **failed conditional write** is
  billed too: the larger of the existing item and the item put (PutItem), the existing item (UpdateItem,
  DeleteItem), at least 1 unit; it writes no index.
- **Transactions**: every item of a TransactWriteItems twice (prepare + commit), also when the transaction
  is cancelled; TransactGetItems 2 units per started 4 KB per item. Index entries a committed transaction
  changes are ordinary (1x) index writes: DynamoDB propagates them after the transaction.
- **Global secondary indexes**, from the table's own definitions (DescribeTable): an entry is the table
  key + index key + projected attributes (KEYS_ONLY, INCLUDE, ALL); a write that creates an entry puts
  it, one that removes it deletes it, one that changes its key deletes the old and puts the new (2 writes),
  one that changes only projected attributes rewrites it; each by its own size in started 1 KB.
- **Reads**: GetItem 1 unit per started 4 KB (half if eventually consistent; a missing item still costs
  the minimum); BatchGetItem per key; Query and Scan by the total size of what was *read* (before any
  filter or projection, counted or not), rounded up to 4 KB once per request, halved if eventually
  consistent, with the minimum for a request that reads nothing ("Queries that do not return results
  consume the minimum number of read capacity units", Query API reference).

How it knows the sizes: under one lock (so no other metered request runs in between), it reads the items
a write touches before the write and after it, with its own un-hooked client (``reader``), and re-reads a
Query/Scan page without filter, projection or ``Select=COUNT`` when the response does not show what was
read. Those reads are the meter's and are never billed. So every client that writes the tables being
measured must be attached to the same meter.

Every charge is also booked to its *partition* (table or index, and the partition key value), which is
what the scale model needs (``by_partition``).

``cross_check=True`` adds ``ReturnConsumedCapacity=INDEXES`` to every request and keeps, per request, the
meter's figures next to the engine's (``comparisons``): on DynamoDB Local that checks the meter.

Over 400 lines: DynamoDB's billing rules for every operation sit together, one rule per request kind;
split, the rules would drift apart from the item-size arithmetic they share.
"""

from __future__ import annotations

import base64
import functools
import math
import re
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096

Item = Mapping[str, Mapping[str, Any]]


# ==== sizes and units (pure) ==========================================================================


@functools.lru_cache(maxsize=65536)  # the simulation (sim/) sizes every item it writes: the same numbers again and again
def number_size(text: str) -> int:
    """Bytes DynamoDB counts for a number's value: its base-100 digit pairs, aligned on the decimal point,
    without leading or trailing zero pairs, + 1 byte, + 1 byte if negative ("0" is 1 byte)."""
    value = Decimal(str(text).strip())
    if value == 0:
        return 1
    negative = value < 0
    plain = format(value.copy_abs(), "f")
    integer, _, fraction = plain.partition(".")
    integer = integer.lstrip("0")
    if len(integer) % 2:
        integer = "0" + integer
    if len(fraction) % 2:
        fraction += "0"
    digits = integer + fraction
    pairs = [digits[i : i + 2] for i in range(0, len(digits), 2)]
    while pairs and pairs[0] == "00":
        pairs.pop(0)
    while pairs and pairs[-1] == "00":
        pairs.pop()
    return len(pairs) + 1 + (1 if negative else 0)


def value_size(value: Mapping[str, Any]) -> int:
    """Bytes of one attribute value in DynamoDB's typed form ({"S": ...}, {"N": ...}, {"L": [...]}, ...)."""
    (kind, data), = value.items()
    if kind == "S":
        return len(data.encode("utf-8"))
    if kind == "N":
        return number_size(data)
    if kind == "B":
        return len(_raw_bytes(data))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode("utf-8")) for s in data)
    if kind == "NS":
        return sum(number_size(n) for n in data)
    if kind == "BS":
        return sum(len(_raw_bytes(b)) for b in data)
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in data)
    if kind == "M":
        return 3 + sum(1 + len(k.encode("utf-8")) + value_size(v) for k, v in data.items())
    raise ValueError(f"unknown DynamoDB attribute type {kind!r}")


def _raw_bytes(data: Any) -> bytes:
    if isinstance(data, (bytes, bytearray)):
        return bytes(data)
    return base64.b64decode(data)


def item_size(item: Item | None) -> int:
    """Bytes of an item: every attribute's name (UTF-8) plus its value. (Strings and numbers, most of an item, are
    sized inline: the simulation, sim/, sizes every item it writes.)"""
    if not item:
        return 0
    total = 0
    for name, value in item.items():
        total += len(name) if name.isascii() else len(name.encode("utf-8"))
        text = value.get("S")
        if text is not None:
            total += len(text) if text.isascii() else len(text.encode("utf-8"))
            continue
        number = value.get("N")
        total += number_size(number) if number is not None else value_size(value)
    return total


def write_units(size: int) -> int:
    """Write units for ``size`` bytes: one per started 1 KB, at least one."""
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def read_units(size: int, consistent: bool) -> float:
    """Read units for ``size`` bytes read at once: one per started 4 KB (at least one), half if eventually
    consistent."""
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2


# ==== tables and indexes ==============================================================================


@dataclass(frozen=True)
class IndexDef:
    name: str
    hash_key: str
    range_key: str | None
    projection: str  # ALL | KEYS_ONLY | INCLUDE
    non_key: tuple[str, ...] = ()

    @property
    def key_names(self) -> tuple[str, ...]:
        return (self.hash_key,) + ((self.range_key,) if self.range_key else ())


@dataclass(frozen=True)
class TableDef:
    name: str
    hash_key: str
    range_key: str | None
    indexes: tuple[IndexDef, ...] = ()

    @property
    def key_names(self) -> tuple[str, ...]:
        return (self.hash_key,) + ((self.range_key,) if self.range_key else ())

    def key_of(self, item: Item) -> dict[str, Any]:
        return {k: item[k] for k in self.key_names}

    def index(self, name: str) -> IndexDef:
        for index in self.indexes:
            if index.name == name:
                return index
        raise KeyError(f"table {self.name} has no index {name}")

    @classmethod
    def from_description(cls, table: Mapping[str, Any]) -> TableDef:
        """From DescribeTable's ``Table`` (or CreateTable's parameters: the same keys)."""
        def keys(schema: Iterable[Mapping[str, str]]) -> tuple[str, str | None]:
            found = {k["KeyType"]: k["AttributeName"] for k in schema}
            return found["HASH"], found.get("RANGE")

        hash_key, range_key = keys(table["KeySchema"])
        indexes = []
        for gsi in table.get("GlobalSecondaryIndexes", []) or []:
            h, r = keys(gsi["KeySchema"])
            projection = gsi.get("Projection", {})
            indexes.append(
                IndexDef(gsi["IndexName"], h, r, projection.get("ProjectionType", "ALL"),
                         tuple(projection.get("NonKeyAttributes", []) or ()))
            )
        return cls(table["TableName"], hash_key, range_key, tuple(indexes))


def index_entry(table: TableDef, index: IndexDef, item: Item | None) -> dict[str, Any] | None:
    """The entry ``item`` has in ``index`` (table key + index key + projected attributes), or None when the
    item lacks the index's key attributes (sparse index) or does not exist."""
    if not item or index.hash_key not in item or (index.range_key and index.range_key not in item):
        return None
    if index.projection == "ALL":
        return dict(item)
    names = set(table.key_names) | {index.hash_key} | ({index.range_key} if index.range_key else set())
    if index.projection == "INCLUDE":
        names |= set(index.non_key)
    return {k: v for k, v in item.items() if k in names}


@dataclass(frozen=True)
class Charge:
    """Units booked to one partition: ``kind`` "write" or "read"; ``index`` None for the table itself."""

    kind: str
    table: str
    index: str | None
    partition: str
    units: float


def _partition_value(value: Mapping[str, Any] | None) -> str:
    if not value:
        return "?"
    (_, data), = value.items()
    return str(data)


def index_write_charges(table: TableDef, old: Item | None, new: Item | None) -> list[Charge]:
    """Index writes of a change of one item from ``old`` to ``new`` (None = absent), per index partition."""
    charges: list[Charge] = []
    for index in table.indexes:
        before = index_entry(table, index, old)
        after = index_entry(table, index, new)
        if before is None and after is None:
            continue
        key_names = (index.hash_key,) + ((index.range_key,) if index.range_key else ())
        if before is not None and after is not None:
            same_key = all(before[k] == after[k] for k in key_names)
            if same_key:
                if before != after:  # projected attributes changed: the entry is rewritten in place
                    size = max(item_size(before), item_size(after))
                    charges.append(Charge("write", table.name, index.name,
                                          _partition_value(after[index.hash_key]), write_units(size)))
                continue
        if before is not None:  # removed, or moved: delete the old entry
            charges.append(Charge("write", table.name, index.name, _partition_value(before[index.hash_key]),
                                  write_units(item_size(before))))
        if after is not None:  # created, or moved: put the new entry
            charges.append(Charge("write", table.name, index.name, _partition_value(after[index.hash_key]),
                                  write_units(item_size(after))))
    return charges


def write_charges(table: TableDef, old: Item | None, new: Item | None, *, succeeded: bool = True,
                  attempted: Item | None = None, factor: int = 1, indexes: bool = True) -> list[Charge]:
    """Everything one item write is billed: the table write (the larger of before and after; a failed
    condition bills the existing item, or the item a PutItem tried to write if larger; at least 1 unit),
    times ``factor`` (2 in a transaction), and, when it succeeded, its index writes (1x)."""
    item_for_key = new or old or attempted or {}
    partition = _partition_value(item_for_key.get(table.hash_key)) if item_for_key else "?"
    if succeeded:
        size = max(item_size(old), item_size(new))
    else:
        size = max(item_size(old), item_size(attempted))
    charges = [Charge("write", table.name, None, partition, factor * write_units(size))]
    if succeeded and indexes:
        charges += index_write_charges(table, old, new)
    return charges


# ==== the meter ========================================================================================


@dataclass
class Comparison:
    """The meter's figures next to the engine's ConsumedCapacity for one request (cross-check mode)."""

    operation: str
    meter: dict[str, float]
    engine: dict[str, float]
    found_nothing: bool = False  # a read that found no item (or a BatchGetItem key that was missing)

    @property
    def agrees(self) -> bool:
        names = set(self.meter) | set(self.engine)
        return all(abs(self.meter.get(n, 0.0) - self.engine.get(n, 0.0)) < 1e-9 for n in names)


@dataclass
class Totals:
    write_units: float = 0.0
    read_units: float = 0.0
    requests: Counter = field(default_factory=Counter)
    failed_conditions: int = 0
    cancelled_transactions: int = 0
    by_target: Counter = field(default_factory=Counter)  # (kind, table, index) -> units
    by_partition: Counter = field(default_factory=Counter)  # (kind, table, index, partition) -> units

    @property
    def request_count(self) -> int:
        return sum(self.requests.values())

    def book(self, operation: str, charges: Iterable[Charge]) -> None:
        self.requests[operation] += 1
        for charge in charges:
            if charge.kind == "write":
                self.write_units += charge.units
            else:
                self.read_units += charge.units
            self.by_target[(charge.kind, charge.table, charge.index)] += charge.units
            self.by_partition[(charge.kind, charge.table, charge.index, charge.partition)] += charge.units


_WRITE_OPS = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
_READ_OPS = {"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"}
_CONTEXT_KEY = "bench_cost_meter"


class CostMeter:
    def __init__(self, reader: Any, *, cross_check: bool = False, tables: Mapping[str, TableDef] | None = None) -> None:
        """``reader``: an un-hooked DynamoDB client of the same endpoint, used for the meter's own reads."""
        self._reader = reader
        self._tables: dict[str, TableDef] = dict(tables or {})
        self._lock = threading.RLock()
        self._state = threading.local()
        self.cross_check = cross_check
        self.totals = Totals()
        self.comparisons: list[Comparison] = []
        self.paused = False
        self._found_nothing = False

    # ---- attaching ------------------------------------------------------------------------------------

    def attach(self, client: Any) -> Any:
        events = client.meta.events
        events.register("before-parameter-build.dynamodb", self._before_parameter_build, unique_id=f"meter-bpb-{id(self)}")
        events.register("before-call.dynamodb", self._before_call, unique_id=f"meter-bc-{id(self)}")
        events.register("after-call.dynamodb", self._after_call, unique_id=f"meter-ac-{id(self)}")
        events.register("after-call-error.dynamodb", self._after_error, unique_id=f"meter-ace-{id(self)}")
        return client

    def reset(self) -> Totals:
        """Start a new measurement; returns the totals so far."""
        with self._lock:
            done, self.totals = self.totals, Totals()
            self.comparisons = []
            return done

    def snapshot(self) -> Totals:
        """A copy of the totals so far (the measurement goes on)."""
        with self._lock:
            t = self.totals
            return Totals(t.write_units, t.read_units, Counter(t.requests), t.failed_conditions,
                          t.cancelled_transactions, Counter(t.by_target), Counter(t.by_partition))

    def table(self, name: str) -> TableDef:
        if name not in self._tables:
            self._tables[name] = TableDef.from_description(self._reader.describe_table(TableName=name)["Table"])
        return self._tables[name]

    # ---- botocore hooks ---------------------------------------------------------------------------------

    def _before_parameter_build(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        op = model.name
        if op not in _WRITE_OPS | _READ_OPS or self.paused:
            return
        if self.cross_check and op not in ("TransactGetItems",):
            params.setdefault("ReturnConsumedCapacity", "INDEXES")
        context[_CONTEXT_KEY] = {"op": op, "params": params}

    def _before_call(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        state = context.get(_CONTEXT_KEY)
        if state is None:
            return
        self._lock.acquire()
        state["locked"] = True
        try:
            state["before"] = self._read_before(state["op"], state["params"])
        except Exception:
            self._lock.release()
            state["locked"] = False
            raise

    def _after_error(self, context: dict[str, Any], **_: Any) -> None:
        state = context.get(_CONTEXT_KEY)
        if state and state.pop("locked", False):
            self._lock.release()

    def _after_call(self, http_response: Any, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        state = context.get(_CONTEXT_KEY)
        if state is None or not state.get("locked"):
            return
        try:
            charges = self._bill(state["op"], state["params"], state.get("before"), http_response.status_code, parsed)
            self._book(state["op"], charges, parsed, http_response.status_code)
        finally:
            state["locked"] = False
            self._lock.release()

    # ---- reading what a write touches ---------------------------------------------------------------

    def _get(self, table: str, key: Mapping[str, Any]) -> dict[str, Any] | None:
        response = self._reader.get_item(TableName=table, Key=dict(key), ConsistentRead=True)
        return response.get("Item")

    def _key_for(self, table: str, op: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """The key of the item a request (or a transaction entry of kind ``op``) writes."""
        tdef = self.table(table)
        source = body["Item"] if op in ("Put", "PutItem") else body["Key"]
        return tdef.key_of(source)

    def _read_before(self, op: str, params: Mapping[str, Any]) -> Any:
        if op in ("PutItem", "UpdateItem", "DeleteItem"):
            table = params["TableName"]
            return self._get(table, self._key_for(table, op, params))
        if op == "BatchWriteItem":
            found = {}
            for table, requests in params["RequestItems"].items():
                for request in requests:
                    if "PutRequest" in request:
                        key = self.table(table).key_of(request["PutRequest"]["Item"])
                    else:
                        key = dict(request["DeleteRequest"]["Key"])
                    found[(table, _key_text(key))] = self._get(table, key)
            return found
        if op == "TransactWriteItems":
            found = []
            for entry in params["TransactItems"]:
                (kind, body), = entry.items()
                key = self._key_for(body["TableName"], kind, body)
                found.append(self._get(body["TableName"], key))
            return found
        return None

    # ---- billing -----------------------------------------------------------------------------------------

    def _bill(self, op: str, params: Mapping[str, Any], before: Any, status: int, parsed: Mapping[str, Any]) -> list[Charge]:
        self._found_nothing = False
        error = (parsed.get("Error") or {}).get("Code", "") if status >= 300 else ""
        if op in ("PutItem", "UpdateItem", "DeleteItem"):
            table = self.table(params["TableName"])
            attempted = params.get("Item") if op == "PutItem" else None
            if error == "ConditionalCheckFailedException":
                self.totals.failed_conditions += 1
                return write_charges(table, before, None, succeeded=False, attempted=attempted)
            if error:
                return []
            if op == "PutItem":
                new = dict(params["Item"])
            elif op == "DeleteItem":
                new = None
            elif params.get("ReturnValues") == "ALL_NEW" and "Attributes" in parsed:
                new = dict(parsed["Attributes"])
            else:
                new = self._get(table.name, self._key_for(table.name, "Key", params))
            return write_charges(table, before, new)
        if op == "BatchWriteItem":
            if error:
                return []
            unprocessed = {
                (t, _key_text(self._request_key(t, r)))
                for t, rs in (parsed.get("UnprocessedItems") or {}).items() for r in rs
            }
            charges: list[Charge] = []
            for table_name, requests in params["RequestItems"].items():
                table = self.table(table_name)
                for request in requests:
                    key = _key_text(self._request_key(table_name, request))
                    if (table_name, key) in unprocessed:
                        continue
                    old = before.get((table_name, key))
                    new = dict(request["PutRequest"]["Item"]) if "PutRequest" in request else None
                    charges += write_charges(table, old, new)
            return charges
        if op == "TransactWriteItems":
            return self._bill_transaction(params, before, error)
        if error:
            return []
        if op == "GetItem":
            table = self.table(params["TableName"])
            item = parsed.get("Item")
            self._found_nothing = item is None
            if item is not None and params.get("ProjectionExpression"):
                item = self._get(table.name, params["Key"])
            units = read_units(item_size(item), bool(params.get("ConsistentRead")))
            return [Charge("read", table.name, None, _partition_value(params["Key"].get(table.hash_key)), units)]
        if op == "BatchGetItem":
            charges = []
            unprocessed = parsed.get("UnprocessedKeys") or {}
            for table_name, spec in params["RequestItems"].items():
                table = self.table(table_name)
                left = {_key_text(k) for k in (unprocessed.get(table_name) or {}).get("Keys", [])}
                returned = {_key_text(table.key_of(i)): i for i in (parsed.get("Responses") or {}).get(table_name, [])}
                for key in spec["Keys"]:
                    text = _key_text(key)
                    if text in left:
                        continue
                    item = returned.get(text)
                    self._found_nothing |= item is None
                    if item is not None and spec.get("ProjectionExpression"):
                        item = self._get(table_name, key)
                    units = read_units(item_size(item), bool(spec.get("ConsistentRead")))
                    charges.append(Charge("read", table_name, None, _partition_value(key.get(table.hash_key)), units))
            return charges
        if op == "TransactGetItems":
            charges = []
            for entry, response in zip(params["TransactItems"], parsed.get("Responses") or [{}] * len(params["TransactItems"])):
                body = entry["Get"]
                table = self.table(body["TableName"])
                item = (response or {}).get("Item")
                if item is not None and body.get("ProjectionExpression"):
                    item = self._get(table.name, body["Key"])
                units = 2 * read_units(item_size(item), True)
                charges.append(Charge("read", table.name, None, _partition_value(body["Key"].get(table.hash_key)), units))
            return charges
        if op in ("Query", "Scan"):
            return self._bill_page(op, params, parsed)
        return []

    def _request_key(self, table: str, request: Mapping[str, Any]) -> dict[str, Any]:
        if "PutRequest" in request:
            return self.table(table).key_of(request["PutRequest"]["Item"])
        return dict(request["DeleteRequest"]["Key"])

    def _bill_transaction(self, params: Mapping[str, Any], before: list[Any], error: str) -> list[Charge]:
        """Every item twice (prepare + commit), committed or cancelled; index writes only when committed."""
        if error == "TransactionCanceledException":
            self.totals.cancelled_transactions += 1
        elif error:
            return []  # refused before it ran (validation, throttling): nothing billed
        charges: list[Charge] = []
        for entry, old in zip(params["TransactItems"], before):
            (kind, body), = entry.items()
            table = self.table(body["TableName"])
            if error or kind == "ConditionCheck":
                attempted = body.get("Item") if kind == "Put" else None
                charges += write_charges(table, old, None, succeeded=False, attempted=attempted, factor=2)
                continue
            if kind == "Put":
                new = dict(body["Item"])
            elif kind == "Delete":
                new = None
            else:
                new = self._get(table.name, self._key_for(table.name, kind, body))
            charges += write_charges(table, old, new, factor=2)
        return charges

    def _bill_page(self, op: str, params: Mapping[str, Any], parsed: Mapping[str, Any]) -> list[Charge]:
        table = self.table(params["TableName"])
        index_name = params.get("IndexName")
        index = table.index(index_name) if index_name else None
        items = parsed.get("Items")
        shows_all = (
            items is not None
            and not params.get("FilterExpression")
            and not params.get("ProjectionExpression")
            and params.get("Select") in (None, "ALL_ATTRIBUTES", "ALL_PROJECTED_ATTRIBUTES")
        )
        if not shows_all:
            again = {k: v for k, v in params.items() if k in (
                "TableName", "IndexName", "KeyConditionExpression", "ExclusiveStartKey", "Limit",
                "ScanIndexForward", "ConsistentRead", "Segment", "TotalSegments")}
            names = dict(params.get("ExpressionAttributeNames") or {})
            values = dict(params.get("ExpressionAttributeValues") or {})
            condition = str(again.get("KeyConditionExpression", ""))
            used_names = {n for n in names if n in condition}
            used_values = {v for v in values if v in condition}
            if used_names:
                again["ExpressionAttributeNames"] = {n: names[n] for n in used_names}
            if used_values:
                again["ExpressionAttributeValues"] = {v: values[v] for v in used_values}
            items = getattr(self._reader, "query" if op == "Query" else "scan")(**again).get("Items", [])
        self._found_nothing = not items
        size = sum(item_size(i) for i in items or [])
        consistent = bool(params.get("ConsistentRead"))
        units = read_units(size, consistent)
        hash_name = index.hash_key if index else table.hash_key
        partition = "*" if op == "Scan" else self._query_partition(params, hash_name, items or [])
        return [Charge("read", table.name, index_name, partition, units)]

    @staticmethod
    def _query_partition(params: Mapping[str, Any], hash_name: str, items: list[Mapping[str, Any]]) -> str:
        if items and hash_name in items[0]:
            return _partition_value(items[0][hash_name])
        names = {v: k for k, v in (params.get("ExpressionAttributeNames") or {}).items()}
        token = names.get(hash_name, hash_name)
        match = re.search(rf"(?:^|[\s(]){re.escape(token)}\s*=\s*(:\w+)", str(params.get("KeyConditionExpression", "")))
        if match:
            return _partition_value((params.get("ExpressionAttributeValues") or {}).get(match.group(1)))
        return "?"

    def _book(self, op: str, charges: list[Charge], parsed: Mapping[str, Any], status: int) -> None:
        self.totals.book(op, charges)
        if self.cross_check and status < 300 and op not in ("TransactWriteItems", "TransactGetItems"):
            engine = _engine_figures(parsed.get("ConsumedCapacity"))
            if engine is not None:
                mine: dict[str, float] = defaultdict(float)
                for charge in charges:
                    mine[f"{charge.table}/{charge.index or 'table'}"] += charge.units
                self.comparisons.append(Comparison(op, dict(mine), engine, self._found_nothing))


def _engine_figures(consumed: Any) -> dict[str, float] | None:
    """ConsumedCapacity (one or a list) as {"<table>/table": units, "<table>/<index>": units}."""
    if consumed is None:
        return None
    entries = consumed if isinstance(consumed, list) else [consumed]
    figures: dict[str, float] = defaultdict(float)
    for entry in entries:
        table = entry.get("TableName", "?")
        if "Table" in entry:
            figures[f"{table}/table"] += float(entry["Table"].get("CapacityUnits", 0.0))
            for index, units in (entry.get("GlobalSecondaryIndexes") or {}).items():
                figures[f"{table}/{index}"] += float(units.get("CapacityUnits", 0.0))
        else:
            figures[f"{table}/table"] += float(entry.get("CapacityUnits", 0.0))
    return {k: v for k, v in figures.items() if v or k.endswith("/table")}


def _key_text(key: Mapping[str, Any]) -> str:
    return repr(sorted((k, repr(v)) for k, v in key.items()))


def summarize(totals: Totals, per: float) -> dict[str, Any]:
    """Totals divided by ``per`` (e.g. completed tasks), in plain numbers for reports."""
    per = per or float("nan")
    by_index: dict[str, float] = defaultdict(float)
    for (kind, _table, index), units in totals.by_target.items():
        by_index[f"{kind}:{index or 'table'}"] += units / per
    return {
        "wcu": totals.write_units / per,
        "rcu": totals.read_units / per,
        "requests": totals.request_count / per,
        "by_index": dict(by_index),
        "failed_conditions": totals.failed_conditions / per,
        "cancelled_transactions": totals.cancelled_transactions / per,
    }
