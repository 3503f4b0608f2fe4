"""DynamoDB TTL, late: the sweeper deletes expired items (moto never does) and registers their keys, so the
stream reader marks their REMOVE records with the TTL service identity."""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("local.engine")


def jsonable(value: Any) -> Any:
    """A boto3-parsed value with bytes as base64, as Lambda serializes binaries."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    return value


def key_of(keys: dict[str, Any]) -> str:
    """An item key as a stable string (the registry's and the stream reader's common form)."""
    return json.dumps(jsonable(keys), sort_keys=True)


class TtlRegistry:
    """Keys the TTL sweeper deleted, so their REMOVE stream records get the TTL service identity."""

    def __init__(self) -> None:
        self._keys: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def add(self, table: str, key: str) -> None:
        with self._lock:
            self._keys[(table, key)] = self._keys.get((table, key), 0) + 1

    def discard(self, table: str, key: str) -> bool:
        with self._lock:
            n = self._keys.get((table, key), 0)
            if not n:
                return False
            if n == 1:
                del self._keys[(table, key)]
            else:
                self._keys[(table, key)] = n - 1
            return True


def pause_after(sweep_seconds: float, interval: float, pace: float) -> float:
    """How long the sweeper waits after a sweep: ``interval``, or ``pace`` times what the sweep took if longer.

    Why: a sweep is a Scan of the whole table (DynamoDB has no index on TTL), and the embedded emulator serves one
    request at a time. Before the emulator's index reads (local/emulator/index_reads.py) a Scan page sorted the whole table,
    and a 10,000-task local stack spent seconds of every second sweeping; now a sweep of 30,000 items takes
    0.03-0.1 s (measured on a loaded 2-core machine), but its cost still grows with the table. Paced, the sweeper's
    share of the emulator stays under 1 / (1 + pace) whatever the table's size; a small table is still swept every
    ``interval``. TTL only gets later on a very big table -- DynamoDB's own is late by up to days."""
    return max(interval, pace * sweep_seconds)


class TtlSweeper:
    """DynamoDB TTL, late: items whose TTL attribute (epoch seconds) is more than ``lateness`` seconds in
    the past are deleted (conditionally, so an item updated meanwhile is left alone); the keys are
    registered first so the stream's REMOVE records carry the TTL service identity. Sweeps are ``interval``
    apart, or ``pace`` times as long as the last sweep took (``pause_after``)."""

    def __init__(self, ddb: Any, table: str, key_names: list[str], attribute: str, registry: TtlRegistry,
                 lateness: float = 2.0, interval: float = 1.0, now: Callable[[], float] = time.time,
                 pace: float = 4.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ddb = ddb
        self.now = now  # the functions' time, which wrote the TTL attributes (a scaled clock: local/delivery/sandbox.py)
        self.table = table
        self.keys = key_names
        self.attribute = attribute
        self.registry = registry
        self.lateness = lateness
        self.interval = interval
        self.pace = pace
        self.deleted = 0
        self.sweeps = 0
        self.last_sweep_seconds = 0.0
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"ttl-{table}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def sweep(self) -> int:
        cutoff = str(int(self.now() - self.lateness))
        names = {"#ttl": self.attribute, **{f"#k{i}": k for i, k in enumerate(self.keys)}}
        kwargs: dict[str, Any] = {
            "TableName": self.table, "FilterExpression": "#ttl < :cutoff",
            "ProjectionExpression": ", ".join(["#ttl", *(f"#k{i}" for i in range(len(self.keys)))]),
            "ExpressionAttributeNames": names, "ExpressionAttributeValues": {":cutoff": {"N": cutoff}},
        }
        deleted = 0
        while True:
            page = self.ddb.scan(**kwargs)
            for item in page.get("Items", []):
                if self._stop.is_set():
                    return deleted
                key = {k: item[k] for k in self.keys}
                marker = key_of(key)
                self.registry.add(self.table, marker)
                try:
                    self.ddb.delete_item(TableName=self.table, Key=key, ConditionExpression="#ttl < :cutoff",
                                         ExpressionAttributeNames={"#ttl": self.attribute},
                                         ExpressionAttributeValues={":cutoff": {"N": cutoff}})
                    deleted += 1
                except self.ddb.exceptions.ConditionalCheckFailedException:
                    self.registry.discard(self.table, marker)
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        self.deleted += deleted
        return deleted

    def _loop(self) -> None:
        pause = self.interval
        while not self._stop.wait(pause):
            started = self._clock()
            try:
                self.sweep()
            except Exception as exc:  # noqa: BLE001 - logged; the next sweep retries
                if self._stop.is_set():
                    return
                log.warning("TTL sweep failed: %s", exc)
            self.sweeps += 1
            self.last_sweep_seconds = self._clock() - started
            pause = pause_after(self.last_sweep_seconds, self.interval, self.pace)
