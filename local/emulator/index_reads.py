"""Query and Scan answered from the tables' order (``local/emulator/table_index.py``), page by page the way moto 5.2.5 pages.
Just over 400 lines: Query and Scan share one page walk and its projection; apart, each would repeat them.

Why: moto answers every page of a Query on a global secondary index by sorting the whole table, walking all of it,
deep-copying the page and projecting it through JSON; a Scan page the same. A COUNT of a 100,000-task ReadyIndex
partition (the board's queues page, ``TaskStore.depth``) is ~40 such pages: it never answered on the local stack.
Here a page starts where a bisection puts it and costs what its items cost; a COUNT builds no item at all.

The answer is moto's own, item for item (``tests/unit/test_local_index_reads.py`` compares them):
- the candidates: a Query of an index reads the partition of its hash value (items without the index's keys are
  not in it); a Query of the table, the items of its hash value; a Scan, the table in key order;
- the order: the index's range key, then the table's keys (``Table._generate_attr_to_sort_by``), reversed for
  ``ScanIndexForward=false``; ``ExclusiveStartKey`` skips every item up to and including it;
- ``Limit`` and the 1 MB page count the items read (moto's ``Item.size()`` of the table item), before the filter;
  the range key condition ends the page at its first item outside it, and ``LastEvaluatedKey`` is given as moto
  gives it (when the limit or the size is reached with an item of the partition still to come);
- the filter sees what the index projects (KEYS_ONLY / INCLUDE / ALL), then ``ProjectionExpression``;
  ``Count`` / ``ScannedCount`` as moto counts them. Items are projected only when the response reads them.
Anything else -- legacy ``KeyConditions`` filters and ``ScanFilter``, local secondary indexes, a Scan of an
index, multi-attribute index keys, a start key without the index's attributes, a consistent read of a global
index (moto's error) -- goes to moto unchanged.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from local.emulator.table_index import TOP, Entry, GsiOrder, index_of, order_key, patch_writes

Page = tuple[list[Any], int, dict[str, Any] | None]


def patch_index_reads() -> Callable[[], None]:
    """Answer moto's Table.query and Table.scan from the tables' order (and keep it up to date). Returns the undo."""
    from moto.dynamodb.models.table import Table

    undo_writes = patch_writes()
    original_query, original_scan = Table.query, Table.scan

    @functools.wraps(original_query)
    def query(self: Any, hash_key: Any, range_comparison: str | None, range_objs: list[Any], limit: int | None,
              exclusive_start_key: dict[str, Any] | None, scan_index_forward: bool,
              projection_expressions: list[list[str]] | None, index_name: str | None = None,
              consistent_read: bool = False, filter_expression: Any = None,
              hash_key_conditions: list[tuple[str, Any]] | None = None,
              range_key_conditions: list[tuple[str, str, list[Any]]] | None = None, **filter_kwargs: Any) -> Page:
        page = None
        if not filter_kwargs and _limit_ok(limit):
            read = Read(self, limit, exclusive_start_key, projection_expressions, filter_expression)
            if index_name is None:
                page = read.table_query(hash_key, range_comparison, range_objs, scan_index_forward, range_key_conditions)
            elif not consistent_read:
                page = read.index_query(index_name, hash_key_conditions or [], range_comparison, range_objs,
                                        scan_index_forward, range_key_conditions or [])
        if page is not None:
            return page
        return original_query(self, hash_key, range_comparison, range_objs, limit, exclusive_start_key,
                              scan_index_forward, projection_expressions, index_name, consistent_read,
                              filter_expression, hash_key_conditions=hash_key_conditions,
                              range_key_conditions=range_key_conditions, **filter_kwargs)

    @functools.wraps(original_scan)
    def scan(self: Any, filters: dict[str, Any], limit: int | None, exclusive_start_key: dict[str, Any] | None,
             filter_expression: Any = None, index_name: str | None = None, consistent_read: bool = False,
             projection_expression: list[list[str]] | None = None, segments: Any = (None, None)) -> Page:
        page = None
        if not filters and index_name is None and _limit_ok(limit):
            page = Read(self, limit, exclusive_start_key, projection_expression, filter_expression).scan(segments)
        if page is not None:
            return page
        return original_scan(self, filters, limit, exclusive_start_key, filter_expression, index_name,
                             consistent_read, projection_expression, segments=segments)

    Table.query = query  # type: ignore[method-assign]
    Table.scan = scan  # type: ignore[method-assign]

    def undo() -> None:
        Table.query, Table.scan = original_query, original_scan  # type: ignore[method-assign]
        undo_writes()

    return undo


def _limit_ok(limit: Any) -> bool:
    return limit is None or (isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1)


class Read:
    """One Query or Scan request's page: its limit, start key, projection and filter, over one table."""

    def __init__(self, table: Any, limit: int | None, start: dict[str, Any] | None,
                 projection: list[list[str]] | None, filter_expression: Any) -> None:
        from moto.dynamodb.comparisons import OpDefault

        self.table = table
        self.limit = limit
        self.start = start
        self.projection = projection
        self.filter = None if filter_expression is None or isinstance(filter_expression, OpDefault) else filter_expression

    # ------------------------------------------------------------------ the three reads

    def index_query(self, index_name: str, hash_conditions: list[tuple[str, Any]], comparison: str | None,
                    range_objs: list[Any], forward: bool, range_conditions: list[tuple[str, str, list[Any]]]) -> Page | None:
        index = index_of(self.table)
        gsi = index.gsis.get(index_name)
        if gsi is None or len(hash_conditions) != 1 or hash_conditions[0][0] != gsi.hash_attr:
            return None
        if not _one_range_condition(range_conditions, comparison, gsi.range_attr):
            return None
        partition = order_key(hash_conditions[0][1])
        entries = gsi.partitions.get(partition)
        if entries is None:
            return [], 0, None
        if gsi.max_size[partition] > _result_size_limit():
            return None  # moto would stop at an oversized item wherever it stands; never so in practice
        lo, hi = 0, len(entries)
        start = self._start_position(entries, [gsi.hash_attr, *gsi.sort_attrs], partition, forward, lo, hi)
        if start is None:
            return None
        if comparison is not None:
            bound = _range_bound(entries, (), comparison, range_objs, forward, lo, hi)
            if bound is None:
                return None
            start = max(start, bound) if forward else min(start, bound)
        return self._page(entries, start, lo, hi, forward, gsi.range_attr if comparison else None, comparison,
                          range_objs, gsi.max_size[partition], index_name, gsi)

    def table_query(self, hash_key: Any, comparison: str | None, range_objs: list[Any], forward: bool,
                    range_conditions: list[tuple[str, str, list[Any]]] | None) -> Page | None:
        table = self.table
        if hash_key is None or not _one_range_condition(range_conditions or [], comparison, table.range_key_attr):
            return None
        index = index_of(table)
        order = index.order
        partition = order_key(hash_key)
        lo, hi = order.bisect_key_left((partition,)), order.bisect_key_left((partition, TOP))
        start = self._start_position(order, [table.hash_key_attr, table.range_key_attr], None, forward, lo, hi)
        if start is None:
            return None
        if comparison is not None:
            bound = _range_bound(order, (partition,), comparison, range_objs, forward, lo, hi)
            if bound is None:
                return None
            start = max(start, bound) if forward else min(start, bound)
        if index.max_size > _result_size_limit():
            return None
        return self._page(order, start, lo, hi, forward, table.range_key_attr if comparison else None, comparison,
                          range_objs, index.max_size, None, None)

    def scan(self, segments: Any) -> Page | None:
        order = index_of(self.table).order
        start = self._start_position(order, [self.table.hash_key_attr, self.table.range_key_attr], None, True,
                                     0, len(order))
        if start is None:
            return None
        limit, size_limit = self.limit, _result_size_limit()
        results: list[Entry] = []
        result_size = 0
        last_key = None
        for entry in order.islice(start, len(order)):
            if not entry.item.is_within_segment(segments):
                continue
            if len(results) == limit or result_size + entry.size > size_limit:
                last_key = self.table._get_last_evaluated_key(results[-1].item, None)
                break
            results.append(entry)
            result_size += entry.size
        return self._answer(results, len(results), last_key, None, None)

    # ------------------------------------------------------------------ paging

    def _start_position(self, entries: Any, attrs: list[str | None], partition: Any, forward: bool,
                        lo: int, hi: int) -> int | None:
        """Where the page starts (iterating forward from it, or backward): after ``ExclusiveStartKey`` as moto's
        ``_item_comes_before_dct`` skips -- every item that sorts before it or is it. None: a start key moto
        would treat otherwise (an attribute missing)."""
        if self.start is None:
            return lo if forward else hi - 1
        from moto.dynamodb.models.dynamo_type import DynamoType

        try:
            keys = [order_key(DynamoType(self.start[name])) if name else (0,) for name in attrs]
        except (KeyError, TypeError, AttributeError, IndexError):
            return None
        if partition is not None:  # an index partition: the start key's hash value first
            if keys[0] != partition:
                before = (partition < keys[0]) == forward  # every item of the partition comes before it, or none
                if forward:
                    return hi if before else lo
                return lo - 1 if before else hi - 1
            position = tuple(keys[1:])
        else:
            position = tuple(keys)
        if forward:
            return max(lo, entries.bisect_key_right(position))
        return min(hi - 1, entries.bisect_key_left(position) - 1)

    def _page(self, entries: Any, start: int, lo: int, hi: int, forward: bool, range_attr: str | None,
              comparison: str | None, range_objs: list[Any], largest: int, index_name: str | None,
              gsi: GsiOrder | None) -> Page:
        """moto's Table.query loop over the candidates from ``start``: the limit and the 1 MB are checked before
        each item (the item read last makes the ``LastEvaluatedKey``); the range condition admits an item."""
        limit, size_limit = self.limit, _result_size_limit()
        results: list[Entry] = []
        result_size = 0
        last_key = None
        walk: Iterator[Any] = (entries.islice(start, hi) if forward else entries.islice(lo, start + 1, reverse=True)) \
            if lo <= start < hi else iter(())
        for entry in walk:
            if len(results) == limit or result_size + entry.size > size_limit:
                last_key = self.table._get_last_evaluated_key(results[-1].item, index_name)
                break
            if range_attr is not None and not entry.item.attrs[range_attr].compare(comparison, range_objs):
                # Past the condition's items. moto walks on over the rest of the partition, each checked against
                # the 1 MB before its condition: only an item bigger than what is left of it ends the page there.
                if results and result_size + largest > size_limit:
                    for rest in walk:
                        if result_size + rest.size > size_limit:
                            last_key = self.table._get_last_evaluated_key(results[-1].item, index_name)
                            break
                break
            results.append(entry)
            result_size += entry.size
        return self._answer(results, len(results), last_key, index_name, gsi)

    def _answer(self, results: list[Entry], scanned: int, last_key: dict[str, Any] | None, index_name: str | None,
                gsi: GsiOrder | None) -> Page:
        """The filter on what the index projects, then the response's items (built only when read)."""
        index = self.table.get_index(index_name) if gsi is not None and gsi.projected is not None else None
        if self.filter is not None:
            comparison = _simple_comparison(self.filter)
            projected = gsi.projected if gsi is not None else None
            if index is None:
                results = [entry for entry in results if self.filter.expr(entry.item)] if comparison is None else \
                    [entry for entry in results if comparison(entry, projected)]
            else:
                assert gsi is not None
                results = [entry for entry in results
                           if (comparison(entry, projected) if comparison is not None and gsi.name not in entry.binary
                               else self.filter.expr(_filtered_view(entry, gsi, index)))]
        if index is None and not self.projection:
            return [entry.item for entry in results], scanned, last_key  # moto's are deep copies; only read
        return [_Lazy(entry.item, index, self.projection) for entry in results], scanned, last_key


class _Lazy:
    """A result item built on first use -- the index's projection, then the ProjectionExpression -- so the response
    of a ``Select=COUNT``, which reads no item, builds none."""

    __slots__ = ("_item", "_index", "_projection", "_built")

    def __init__(self, item: Any, index: Any, projection: list[list[str]] | None) -> None:
        self._item, self._index, self._projection = item, index, projection
        self._built: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._built is None:
            result = self._index.project(self._item) if self._index is not None else self._item
            self._built = result.project(self._projection) if self._projection else result
        return getattr(self._built, name)


def _filtered_view(entry: Entry, gsi: GsiOrder, index: Any) -> Any:
    """The item as the filter sees it: only the attributes the index projects. moto projects through plain JSON and
    back, which turns a binary into raw bytes (a filter then compares it otherwise): an item whose projection holds
    a binary gets moto's own projection (cached with the entry, which is made again whenever its item changes)."""
    if gsi.name in entry.binary:
        view = entry.views.get(gsi.name)
        if view is None:
            view = entry.views[gsi.name] = index.project(entry.item)
        return view
    return _ProjectedItem(entry.item.attrs, gsi.projected or frozenset())


class _ProjectedItem(Mapping[str, Any]):
    """What a filter expression reads of an item as an index projects it: moto's conditions read ``item.attrs``
    only, and here the names not projected are not there. Not a moto Item (moto keeps every Item ever made in a
    list, ``BaseModel.instances_tracked``) and no copy: one small object per filtered entry."""

    __slots__ = ("_attrs", "_names")

    def __init__(self, attrs: dict[str, Any], names: frozenset[str]) -> None:
        self._attrs, self._names = attrs, names

    @property
    def attrs(self) -> _ProjectedItem:
        return self

    def __getitem__(self, name: str) -> Any:
        if name not in self._names:
            raise KeyError(name)
        return self._attrs[name]

    def __contains__(self, name: object) -> bool:
        return name in self._names and name in self._attrs

    def __iter__(self) -> Iterator[str]:
        return (name for name in self._attrs if name in self._names)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _simple_comparison(condition: Any) -> Callable[[Entry, frozenset[str] | None], bool] | None:
    """``name < :value`` (or ``<=``, ``>``, ``>=``) -- the board's COUNT filter and the TTL sweeper's -- as moto's
    Op*Than.expr evaluates it (both sides cast, False when either is missing), on the entry's cached cast value
    instead of a Decimal made per item per request. None: any other condition (moto evaluates it)."""
    from moto.dynamodb.comparisons import (
        AttributePath,
        AttributeValue,
        OpGreaterThan,
        OpGreaterThanOrEqual,
        OpLessThan,
        OpLessThanOrEqual,
    )

    compare = {OpGreaterThan: operator.gt, OpGreaterThanOrEqual: operator.ge, OpLessThan: operator.lt,
               OpLessThanOrEqual: operator.le}.get(type(condition))
    lhs, rhs = getattr(condition, "lhs", None), getattr(condition, "rhs", None)
    if compare is None or type(lhs) is not AttributePath or type(rhs) is not AttributeValue:
        return None
    if len(lhs.path) != 1 or not isinstance(lhs.path[0], str):
        return None
    name, value = lhs.path[0], rhs.expr(None)
    if value is None:
        return None

    def test(entry: Entry, projected: frozenset[str] | None) -> bool:
        if projected is not None and name not in projected:
            return False
        cast = entry.cast(name)
        return cast is not None and bool(compare(cast, value))

    return test


def _one_range_condition(conditions: list[tuple[str, str, list[Any]]], comparison: str | None,
                         range_attr: str | None) -> bool:
    """A key condition this module answers: none on the range key, or one on the range key it has."""
    if comparison is None:
        return not conditions
    return (range_attr is not None and len(conditions) == 1 and conditions[0][0] == range_attr
            and conditions[0][1] == comparison)


def _range_bound(entries: Any, prefix: tuple[Any, ...], comparison: str, range_objs: list[Any], forward: bool,
                 lo: int, hi: int) -> int | None:
    """The first position (forward) or last (backward) whose range key may meet the condition; entries' keys are
    ``prefix + (range key, ...)``. None: a condition left to moto."""
    op = comparison.upper()
    values = [order_key(v) for v in range_objs]
    if not values or (op == "BETWEEN" and len(values) != 2):
        return None
    value = values[0]

    def first_at_least(v: Any) -> int:
        return entries.bisect_key_left(prefix + (v,))

    def first_above(v: Any) -> int:
        return entries.bisect_key_left(prefix + (v, TOP))

    if op == "BEGINS_WITH":
        if value[0] not in (2, 3):
            return None  # moto's begins_with on a number fails its own way
        if forward:
            return max(lo, first_at_least(value))
        following = _successor(value)
        return min(hi - 1, (first_at_least(following) if following is not None else hi) - 1)
    if forward:
        bounds = {"=": first_at_least, ">=": first_at_least, ">": first_above, "BETWEEN": first_at_least}
        if op in ("<", "<="):
            return lo
        return max(lo, bounds[op](value)) if op in bounds else None
    if op in (">", ">="):
        return hi - 1
    if op == "<":
        return min(hi - 1, first_at_least(value) - 1)
    if op in ("=", "<="):
        return min(hi - 1, first_above(value) - 1)
    if op == "BETWEEN":
        return min(hi - 1, first_above(values[1]) - 1)
    return None


def _successor(value: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The least key greater than every key that begins with ``value`` (a string's or binary's order key)."""
    kind, prefix = value
    if not prefix:
        return None  # everything begins with it
    if kind == 2:
        last = ord(prefix[-1])
        return (kind, prefix[:-1] + chr(last + 1)) if last < 0x10FFFF else None
    last = prefix[-1]
    return (kind, prefix[:-1] + bytes([last + 1])) if last < 0xFF else None


def _result_size_limit() -> int:
    from moto.dynamodb.models.table import RESULT_SIZE_LIMIT

    return int(RESULT_SIZE_LIMIT)
