"""Trigger's hook for a stream record: a PENDING workflow task that DynamoDB's TTL deleted ends for its dependents as
a shed task does (their policies decide)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from taskqueue.core.stream import is_ttl_delete
from taskqueue.store import TaskStore


def after_stream_record(store: TaskStore, record: Mapping[str, Any]) -> int:
    """The dependents ``record`` (a raw DynamoDB stream record) made ready: none unless it is the TTL's deletion of a
    PENDING task others wait for. Raises if a write is refused: the stream retries the record, and every write of a
    fan-out may be repeated."""
    if not is_ttl_delete(str(record.get("eventName", "")), record.get("userIdentity")):
        return 0
    image = (record.get("dynamodb") or {}).get("OldImage") or {}
    if "wfOut" not in image:
        return 0
    return store.fan_out_removed(image)
