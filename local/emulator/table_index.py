"""moto's tables kept in order as items are written: each table in its key order (a Scan's order) and each global
secondary index as sorted partitions (a Query's order), so a read bisects to its page instead of sorting the table.

Why: moto 5.2.5 answers every page of a Query on a global secondary index, and every page of a Scan, by sorting
every item of the table (``Table.all_items``), walking all of them and deep-copying the page. A COUNT of a
100,000-task ReadyIndex partition takes ~40 pages of 1 MB, each walking and sorting the 100,000 items. Reads
served from this index (``local/emulator/index_reads.py``) cost what their page costs.

How it stays right. An item enters, leaves or changes a table only
1. through the table's item container (``table.items``): moto's put and delete, and ``wsgi_request.set_item``
   (index lag's look into the past, the item-size limit's undo, the transactions' rollback) -- the container is
   replaced by dicts that report every placement and removal to the index (``local/emulator/item_containers.py``);
2. or in place, by moto's UpdateItem (an update expression changes the Item's attributes; a transaction's
   updates go through it too) -- ``patch_writes`` indexes the updated item again afterwards, also when the
   update failed halfway.
A table is indexed when it is made (``patch_writes``), or else at its first read (``index_of``); a table whose
container was replaced (a restore copies plain dicts) or whose global secondary indexes changed is indexed again
from its items. Everything runs inside the emulator's request lock.

Order: numbers as Decimal, strings as str (the order of their UTF-8 bytes), binaries as bytes (``order_key``),
the same order ``moto_patches.patch_comparisons`` gives moto's own sorts.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from operator import attrgetter
from typing import Any

from sortedcontainers import SortedKeyList

from local.emulator.item_containers import Items

# Greater than every order_key (their first element is 0..5): a bisection bound "after every key starting so".
TOP = (99,)
# Bumped when the update hook is taken off: an index made before may have missed in-place updates since.
_epoch = [0]


def order_key(value: Any) -> tuple[Any, ...]:
    """A DynamoType (or None) as a value Python orders the way DynamoDB orders keys; equal for equal values."""
    if value is None:
        return (0,)
    kind, raw = value.type, value.value
    if kind == "N":
        try:
            return (1, Decimal(raw))
        except InvalidOperation:
            return (5, str(raw))
    if kind == "S":
        return (2, raw)
    if kind == "B":
        return (3, raw if isinstance(raw, bytes) else str(raw).encode())
    return (4, str(raw))


class Entry:
    """One item of an indexed table: the Item, its place in the table's order, its size as moto counts it for a
    page's 1 MB (``Item.size()``, computed once per write), its place in each index, and (for the rare item
    whose projection holds a binary) moto's projection of it, for filters."""

    __slots__ = ("item", "key", "size", "places", "binary", "views", "casts")

    def __init__(self, item: Any, key: tuple[Any, Any]) -> None:
        self.item = item
        self.key = key
        self.size: int = item.size()
        self.places: dict[str, tuple[Any, tuple[Any, ...]]] = {}
        self.binary: set[str] = set()  # the indexes whose projection of this item holds a binary value
        self.views: dict[str, Any] = {}
        self.casts: dict[str, Any] | None = None

    def cast(self, name: str) -> Any:
        """The attribute's value as moto's conditions compare it (``DynamoType.cast_value``; None if absent),
        computed once per entry: the board's COUNT filters ``ttl`` on every entry of a partition."""
        casts = self.casts
        if casts is None:
            casts = self.casts = {}
        elif name in casts:
            return casts[name]
        value = self.item.attrs.get(name)
        casts[name] = None if value is None else value.cast_value
        return casts[name]


def holds_binary(value: Any) -> bool:
    """Whether a DynamoType is, or holds, a binary."""
    if value.type in ("B", "BS"):
        return True
    if value.type == "L":
        return any(holds_binary(v) for v in value.value)
    if value.type == "M":
        return any(holds_binary(v) for v in value.value.values())
    return False


class GsiOrder:
    """One global secondary index: partition (order_key of its hash value) -> its entries sorted by their sort key
    (``Entry.places``), in the order moto sorts a Query of the index (its range key, then the table's keys)."""

    def __init__(self, name: str, hash_attr: str, range_attr: str | None, sort_attrs: list[str],
                 projected: frozenset[str] | None) -> None:
        self.name = name
        self.hash_attr = hash_attr
        self.range_attr = range_attr
        self.sort_attrs = sort_attrs  # after the hash attribute, as Table._generate_attr_to_sort_by lists them
        self.projected = projected  # None: every attribute (ALL)
        self.partitions: dict[Any, SortedKeyList] = {}
        self.max_size: dict[Any, int] = {}  # per partition, the largest entry ever put there (an upper bound)

    def add(self, entry: Entry) -> None:
        attrs = entry.item.attrs
        hash_value = attrs.get(self.hash_attr)
        if hash_value is None or (self.range_attr is not None and self.range_attr not in attrs):
            return  # sparse: an item without the index's keys is not in it
        partition = order_key(hash_value)
        sort = tuple(order_key(attrs[name]) for name in self.sort_attrs)
        entry.places[self.name] = (partition, sort)
        entries = self.partitions.get(partition)
        if entries is None:
            entries = self.partitions[partition] = SortedKeyList(key=self._sort_key)
        entries.add(entry)
        if self.projected is not None and any(holds_binary(attrs[name]) for name in self.projected if name in attrs):
            entry.binary.add(self.name)
        if entry.size > self.max_size.get(partition, 0):
            self.max_size[partition] = entry.size

    def _sort_key(self, entry: Entry) -> tuple[Any, ...]:
        return entry.places[self.name][1]

    def remove(self, entry: Entry) -> None:
        place = entry.places.get(self.name)
        if place is None:
            return
        partition = place[0]
        entries = self.partitions[partition]
        entries.remove(entry)
        del entry.places[self.name]
        if not entries:
            del self.partitions[partition]
            del self.max_size[partition]


class TableIndex:
    """A table's items in key order (``order``, by the order_key pair of their hash and range key; ``by_key`` finds
    them) and its global secondary indexes."""

    def __init__(self, signature: tuple[Any, ...], gsis: dict[str, GsiOrder]) -> None:
        self.signature = signature
        self.epoch = _epoch[0]
        self.gsis = gsis
        self.order = SortedKeyList(key=attrgetter("key"))
        self.by_key: dict[tuple[Any, Any], Entry] = {}
        self.max_size = 0  # the largest item ever put in the table (an upper bound for any of its pages)

    def refresh(self, hash_value: Any, range_value: Any, item: Any) -> None:
        """The item at this key is now ``item`` (an Item, or anything else for none)."""
        from moto.dynamodb.models.dynamo_type import Item

        key = (order_key(hash_value), order_key(range_value))
        old = self.by_key.pop(key, None)
        if old is not None:
            self.order.remove(old)
            for gsi in self.gsis.values():
                gsi.remove(old)
        if isinstance(item, Item):
            entry = self.by_key[key] = Entry(item, key)
            self.order.add(entry)
            self.max_size = max(self.max_size, entry.size)
            for gsi in self.gsis.values():
                gsi.add(entry)

    def replaced(self, hash_value: Any, old: Any, new: Any) -> None:
        """What the container held at ``hash_value`` (an Item, a group of range key -> Item, or None) is now ``new``."""
        for range_value, _ in _members(old):
            self.refresh(hash_value, range_value, None)
        for range_value, item in _members(new):
            self.refresh(hash_value, range_value, item)


def _members(value: Any) -> list[tuple[Any, Any]]:
    if value is None:
        return []
    if isinstance(value, dict):
        return list(dict.items(value))
    return [(None, value)]


def _signature(table: Any) -> tuple[Any, ...]:
    return tuple((index.name, repr(index.schema), repr(index.projection)) for index in (table.global_indexes or []))


def _gsi_orders(table: Any) -> dict[str, GsiOrder]:
    """An order for each global secondary index of one hash key and at most one range key (others are left to
    moto), sorted as ``Table.query`` sorts them."""
    orders: dict[str, GsiOrder] = {}
    for index in table.global_indexes or []:
        hashes = [k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH"]
        ranges = [k["AttributeName"] for k in index.schema if k["KeyType"] == "RANGE"]
        if len(hashes) != 1 or len(ranges) > 1:
            continue
        if ranges:
            range_attrs: list[str | None] = [ranges[0], table.range_key_attr]
        else:  # moto sorts by the table's range key (or hash key) first, as if it were the index's
            range_attrs = [table.range_key_attr or table.hash_key_attr, table.range_key_attr]
        sort_attrs = table._generate_attr_to_sort_by([hashes[0], table.hash_key_attr], range_attrs)
        orders[index.name] = GsiOrder(index.name, hashes[0], ranges[0] if ranges else None, sort_attrs[1:],
                                      _projected(table, index))
    return orders


def _projected(table: Any, index: Any) -> frozenset[str] | None:
    """The attributes ``SecondaryIndex.project`` keeps (None: all of them)."""
    projection = index.projection or {}
    kind = projection.get("ProjectionType")
    if kind not in ("KEYS_ONLY", "INCLUDE"):
        return None
    names = set(index.table_key_attrs) | {k["AttributeName"] for k in index.schema}
    if kind == "INCLUDE":
        names |= set(projection.get("NonKeyAttributes", []))
    return frozenset(names)


def attach(table: Any) -> TableIndex:
    """Index ``table`` from its items and put the reporting container in place of ``table.items``."""
    index = TableIndex(_signature(table), _gsi_orders(table))
    items = Items(index)
    for hash_value, value in list(table.items.items()):
        dict.__setitem__(items, hash_value, items._adopt(hash_value, value))
    table.items = items
    for hash_value, value in dict.items(items):
        index.replaced(hash_value, None, value)
    return index


def index_of(table: Any) -> TableIndex:
    """The table's index, attached (or attached again) if its container or its indexes are not those indexed."""
    items = table.items
    if isinstance(items, Items):
        index = items._index
        if index.signature == _signature(table) and index.epoch == _epoch[0]:
            return index
    return attach(table)


def attached(table: Any) -> TableIndex | None:
    items = getattr(table, "items", None)
    return items._index if isinstance(items, Items) else None


def patch_writes() -> Callable[[], None]:
    """Index every table from its creation, and an item again after moto's UpdateItem changed it in place
    (whether the update succeeded or not). Returns the undo."""
    from moto.dynamodb import models
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    original_init, original_update = Table.__init__, models.DynamoDBBackend.update_item

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        attach(self)

    def update_item(self: Any, table_name: str, key: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return original_update(self, table_name, key, *args, **kwargs)
        finally:
            table = self.tables.get(table_name)
            index = attached(table) if table is not None else None
            if index is not None and isinstance(key, dict) and table.hash_key_attr in key:
                hash_value = DynamoType(key[table.hash_key_attr])
                range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr in key else None
                if table.range_key_attr is None or range_value is not None:
                    index.refresh(hash_value, range_value, _item_at(table, hash_value, range_value))

    Table.__init__ = init  # type: ignore[method-assign]
    models.DynamoDBBackend.update_item = update_item  # type: ignore[method-assign]

    def undo() -> None:
        Table.__init__ = original_init  # type: ignore[method-assign]
        models.DynamoDBBackend.update_item = original_update  # type: ignore[method-assign]
        _epoch[0] += 1

    return undo


def _item_at(table: Any, hash_value: Any, range_value: Any) -> Any:
    value = dict.get(table.items, hash_value)
    if range_value is None:
        return value
    return dict.get(value, range_value) if isinstance(value, dict) else None
