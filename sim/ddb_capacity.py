"""Capacity units by DynamoDB's billing rules, with the rules ``bench.cost_meter`` encodes for the emulator.

Each request's charges (``Charge``: read or write units on a table or index partition) are booked on
``Capacity.totals`` (``cost_meter.Totals``: units, requests, failed conditions, cancelled transactions, by target and
by partition) and, when the request asks (``ReturnConsumedCapacity``), returned as ``ConsumedCapacity``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from bench.cost_meter import Charge, TableDef, Totals, item_size, read_units, write_charges
from sim.ddb_values import Value


def partition_of(value: Value | None) -> str:
    if not value:
        return "?"
    for data in value.values():
        return str(data)
    return "?"


class Capacity:
    def __init__(self) -> None:
        self.totals = Totals()

    def book(self, operation: str, charges: Iterable[Charge]) -> list[Charge]:
        booked = list(charges)
        self.totals.book(operation, booked)
        return booked


def write(table: TableDef, old: Mapping[str, Value] | None, new: Mapping[str, Value] | None, *,
          succeeded: bool = True, attempted: Mapping[str, Value] | None = None, factor: int = 1) -> list[Charge]:
    return write_charges(table, old, new, succeeded=succeeded, attempted=attempted, factor=factor)


def read_item(table: TableDef, key: Mapping[str, Value], item: Mapping[str, Value] | None, consistent: bool,
              factor: int = 1) -> Charge:
    units = factor * read_units(item_size(item), consistent)
    return Charge("read", table.name, None, partition_of(key.get(table.hash_key)), units)


def read_page(table: TableDef, index: str | None, partition: str, size: int, consistent: bool) -> Charge:
    return Charge("read", table.name, index, partition, read_units(size, consistent))


def consumed(charges: Iterable[Charge], mode: str | None) -> list[dict[str, Any]] | None:
    """``ConsumedCapacity`` entries (one per table) for ``ReturnConsumedCapacity`` TOTAL or INDEXES."""
    if mode not in ("TOTAL", "INDEXES"):
        return None
    tables: dict[str, dict[str | None, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
    for charge in charges:
        tables[charge.table][charge.index][0 if charge.kind == "read" else 1] += charge.units
    entries = []
    for name, targets in tables.items():
        read = sum(r for r, _ in targets.values())
        written = sum(w for _, w in targets.values())
        entry: dict[str, Any] = {"TableName": name, "CapacityUnits": read + written}
        if read:
            entry["ReadCapacityUnits"] = read
        if written:
            entry["WriteCapacityUnits"] = written
        if mode == "INDEXES":
            own = targets.get(None, [0.0, 0.0])
            entry["Table"] = {"CapacityUnits": sum(own), **_split(own)}
            indexes = {index: {"CapacityUnits": sum(units), **_split(units)}
                       for index, units in targets.items() if index is not None}
            if indexes:
                entry["GlobalSecondaryIndexes"] = indexes
        entries.append(entry)
    return entries


def _split(units: list[float]) -> dict[str, float]:
    parts = {}
    if units[0]:
        parts["ReadCapacityUnits"] = units[0]
    if units[1]:
        parts["WriteCapacityUnits"] = units[1]
    return parts
