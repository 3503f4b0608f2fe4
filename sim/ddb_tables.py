"""The fake's tables: schema (keys, global secondary indexes, stream, TTL), items, and sorted partitions.

A table keeps its items by key (a tuple of the key attributes' Python values: ``str``, ``Decimal`` or ``bytes``)
and, for every partition of a table with a sort key and of every index, a sorted list of (sort value, table key).
An index holds an *entry* per item that has its key attributes (sparse), with the projected attributes only
(``bench.cost_meter.index_entry``: KEYS_ONLY, INCLUDE, ALL). With ``keep_history(seconds)`` every index change is
logged with its virtual time, so a read may see an index as it was up to that long ago (a lagging index,
``view(at_us=...)``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sortedcontainers import SortedList

from bench.cost_meter import IndexDef, TableDef, index_entry
from sim.ddb_values import Item, Value, scalar_key

Key = tuple[Any, ...]


class _High:
    """Sorts after every value (an open upper bound in a sorted list of tuples)."""

    def __lt__(self, other: object) -> bool:
        return False

    def __gt__(self, other: object) -> bool:
        return True


HIGH = _High()


@dataclass(frozen=True)
class TableSchema:
    name: str
    hash_key: str
    range_key: str | None
    types: Mapping[str, str]  # AttributeDefinitions: key attribute -> S | N | B
    indexes: tuple[IndexDef, ...] = ()
    stream_view: str | None = None  # NEW_AND_OLD_IMAGES, NEW_IMAGE, OLD_IMAGE, KEYS_ONLY; None: no stream
    ttl_attribute: str | None = None

    @property
    def key_names(self) -> tuple[str, ...]:
        return (self.hash_key,) + ((self.range_key,) if self.range_key else ())

    def index(self, name: str) -> IndexDef | None:
        return next((i for i in self.indexes if i.name == name), None)

    @property
    def cost_def(self) -> TableDef:
        return TableDef(self.name, self.hash_key, self.range_key, self.indexes)

    @classmethod
    def from_create_table(cls, params: Mapping[str, Any]) -> TableSchema:
        """From CreateTable's parameters (or a template's table Properties with a TableName)."""
        keyed = TableDef.from_description(params)
        stream = params.get("StreamSpecification") or {}
        stream_on = stream.get("StreamEnabled", "StreamViewType" in stream)
        ttl = params.get("TimeToLiveSpecification") or {}
        return cls(
            name=keyed.name, hash_key=keyed.hash_key, range_key=keyed.range_key,
            types={a["AttributeName"]: a["AttributeType"] for a in params.get("AttributeDefinitions", [])},
            indexes=keyed.indexes,
            stream_view=stream.get("StreamViewType") if stream_on else None,
            ttl_attribute=ttl.get("AttributeName") if ttl.get("Enabled") else None,
        )


@dataclass
class _Change:
    at_us: int
    key: Key
    old: Item | None
    new: Item | None


class Partitions:
    """Sorted (sort value, table key) lists by partition value, and each table key's item or entry."""

    def __init__(self, hash_key: str, range_key: str | None) -> None:
        self.hash_key = hash_key
        self.range_key = range_key
        self.lists: dict[Any, SortedList] = {}
        self.rows: dict[Key, Item] = {}

    def position(self, item: Mapping[str, Value], key: Key) -> tuple[Any, tuple[Any, Key]]:
        sort = scalar_key(item[self.range_key]) if self.range_key else None
        return scalar_key(item[self.hash_key]), (sort, key)

    def put(self, key: Key, row: Item) -> None:
        old = self.rows.get(key)
        if old is not None:
            self.remove(key)
        partition, place = self.position(row, key)
        self.lists.setdefault(partition, SortedList()).add(place)
        self.rows[key] = row

    def remove(self, key: Key) -> None:
        row = self.rows.pop(key, None)
        if row is None:
            return
        partition, place = self.position(row, key)
        places = self.lists[partition]
        places.remove(place)
        if not places:
            del self.lists[partition]

    def copy(self) -> Partitions:
        twin = Partitions(self.hash_key, self.range_key)
        twin.lists = {p: SortedList(places) for p, places in self.lists.items()}
        twin.rows = dict(self.rows)
        return twin


class Index:
    """A global secondary index: entries by table key, sorted by partition; its change log when history is kept."""

    def __init__(self, schema: IndexDef, table: TableSchema) -> None:
        self.schema = schema
        self._cost_table = table.cost_def
        self._cost_index = self._cost_table.index(schema.name)
        self.current = Partitions(schema.hash_key, schema.range_key)
        self.history: deque[_Change] = deque()
        self.history_us = 0

    def entry_of(self, item: Item | None) -> Item | None:
        return index_entry(self._cost_table, self._cost_index, item) if item else None

    def change(self, key: Key, old: Item | None, new: Item | None, at_us: int) -> None:
        before, after = self.entry_of(old), self.entry_of(new)
        if before is None and after is None:
            return
        if after is None:
            self.current.remove(key)
        else:
            self.current.put(key, after)
        if self.history_us:
            self.history.append(_Change(at_us, key, before, after))
            while self.history and self.history[0].at_us < at_us - self.history_us:
                self.history.popleft()

    def view(self, at_us: int | None) -> Partitions:
        """The index as it was at ``at_us`` (None: now), as far back as its history goes."""
        if at_us is None or not self.history or self.history[-1].at_us <= at_us:
            return self.current
        past = self.current.copy()
        for change in reversed(self.history):
            if change.at_us <= at_us:
                break
            if change.new is not None:
                past.remove(change.key)
            if change.old is not None:
                past.put(change.key, change.old)
        return past


@dataclass
class Table:
    schema: TableSchema
    items: dict[Key, Item] = field(default_factory=dict)
    indexes: dict[str, Index] = field(default_factory=dict)
    sorted: Partitions | None = None  # the table's own partitions, when it has a sort key

    def __post_init__(self) -> None:
        self.cost = self.schema.cost_def  # the table as bench.cost_meter bills it
        self.indexes = {i.name: Index(i, self.schema) for i in self.schema.indexes}
        if self.schema.range_key:
            self.sorted = Partitions(self.schema.hash_key, self.schema.range_key)

    def key_of(self, item: Mapping[str, Value]) -> Key:
        schema = self.schema
        if schema.range_key is None:
            return (scalar_key(item[schema.hash_key]),)
        return (scalar_key(item[schema.hash_key]), scalar_key(item[schema.range_key]))

    def key_item(self, item: Mapping[str, Value]) -> Item:
        return {name: item[name] for name in self.schema.key_names}

    def write(self, key: Key, old: Item | None, new: Item | None, at_us: int) -> None:
        """Store ``new`` (None: delete) in place of ``old``, and follow it in every index."""
        if new is None:
            self.items.pop(key, None)
            if self.sorted is not None:
                self.sorted.remove(key)
        else:
            self.items[key] = new
            if self.sorted is not None and old is None:
                self.sorted.put(key, self.key_item(new))
        for index in self.indexes.values():
            index.change(key, old, new, at_us)

    def partitions(self, index: str | None, at_us: int | None = None) -> Partitions:
        if index is None:
            assert self.sorted is not None
            return self.sorted
        return self.indexes[index].view(at_us)

    def scan_order(self) -> Iterator[tuple[Key, Item]]:
        """Every item in a stable order (DynamoDB's scan order is its hash order: unspecified)."""
        for key in sorted(self.items, key=_order_of):
            yield key, self.items[key]


def _order_of(key: Key) -> tuple[Any, ...]:
    return tuple((type(part).__name__, part) for part in key)
