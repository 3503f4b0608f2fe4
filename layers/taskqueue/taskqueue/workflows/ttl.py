"""The worker's hook for a stream record: a PENDING workflow task that DynamoDB's TTL deleted ends for its dependents
as a shed task does (their policies decide). The template's TaskStream filter hands ProcessTasks such deletions (it
counts them as shed); this applies them to what waits for the task."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from taskqueue.core.stream import is_ttl_delete
from taskqueue.store import TaskStore


def after_ttl_removals(store: TaskStore, records: Iterable[Any]) -> int:
    """The dependents made ready by the records (raw DynamoDB stream records) that are the TTL's deletion of a PENDING
    task others wait for; any other record (or no record at all) is passed over. Raises if a write is refused: the
    batch is retried, and every write of a fan-out may be repeated."""
    readied = 0
    for record in records:
        if not isinstance(record, dict) or not is_ttl_delete(str(record.get("eventName", "")), record.get("userIdentity")):
            continue
        change = record.get("dynamodb")
        image = change.get("OldImage") if isinstance(change, dict) else None  # a malformed record names no task
        if isinstance(image, dict) and "wfOut" in image:
            readied += store.fan_out_removed(image)
    return readied
