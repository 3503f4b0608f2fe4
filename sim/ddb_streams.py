"""DynamoDB Streams as Lambda delivers them: one log per table with a stream, read by the harness.

Every write that changes an item appends one record (INSERT, MODIFY or REMOVE; a write that leaves the item as it
was appends none, as DynamoDB documents), with ``dynamodb.Keys`` and the images the table's ``StreamViewType`` asks
for, a growing ``SequenceNumber``, ``ApproximateCreationDateTime`` in epoch seconds, ``eventSourceARN``, and on a
TTL deletion ``userIdentity`` naming the DynamoDB service. ``StreamLog.since(position)`` reads on from a position;
``shard_of`` routes a record as Lambda routes it among ``ParallelizationFactor`` concurrent batches: by a stable hash
of its partition key, so one key's records stay in order in one batch.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from typing import Any

from bench.cost_meter import item_size
from sim.ddb_values import Item, copy_item

REGION = "us-east-1"
ACCOUNT = "123456789012"
TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
STREAM_LABEL = "2026-11-22T00:00:00.000"


class StreamLog:
    """The records of one table's stream, oldest first."""

    def __init__(self, table: str, view: str, key_names: tuple[str, ...]) -> None:
        self.table = table
        self.view = view
        self.key_names = key_names
        self.arn = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}/stream/{STREAM_LABEL}"
        self.records: list[dict[str, Any]] = []

    def shard_of(self, record: Mapping[str, Any], shards: int) -> int:
        return shard_of(record, shards, self.key_names[0])

    def since(self, position: int) -> list[dict[str, Any]]:
        """The records appended at or after ``position`` (an index into ``records``), as Lambda delivers them
        (copies: a handler that changes its event changes nothing stored)."""
        return [delivered(record) for record in self.records[position:]]

    def append(self, sequence: int, epoch_s: float, old: Item | None, new: Item | None, *, ttl: bool = False) -> None:
        if old is None and new is None:
            return
        name = "INSERT" if old is None else ("REMOVE" if new is None else "MODIFY")
        source = new if new is not None else old
        assert source is not None
        body: dict[str, Any] = {
            "ApproximateCreationDateTime": float(int(epoch_s)),
            "Keys": {k: source[k] for k in self.key_names},
        }
        if new is not None and self.view in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES"):
            body["NewImage"] = new
        if old is not None and self.view in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES"):
            body["OldImage"] = old
        body["SequenceNumber"] = f"{sequence:021d}"
        body["StreamViewType"] = self.view  # SizeBytes is added as a record is handed out (``delivered``)
        record: dict[str, Any] = {
            "eventID": f"{sequence:032x}",
            "eventName": name,
            "eventVersion": "1.1",
            "eventSource": "aws:dynamodb",
            "awsRegion": REGION,
            "dynamodb": body,
            "eventSourceARN": self.arn,
        }
        if ttl:
            record["userIdentity"] = dict(TTL_IDENTITY)
        self.records.append(record)


def delivered(record: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a record for a handler, with its ``SizeBytes``."""
    body = dict(record["dynamodb"])
    for image in ("Keys", "NewImage", "OldImage"):
        if image in body:
            body[image] = copy_item(body[image])
    body["SizeBytes"] = item_size(body["Keys"]) + item_size(body.get("NewImage")) + item_size(body.get("OldImage"))
    copy = dict(record)
    copy["dynamodb"] = body
    if "userIdentity" in record:
        copy["userIdentity"] = dict(record["userIdentity"])
    return copy


def shard_of(record: Mapping[str, Any], shards: int, hash_key: str) -> int:
    """The batch (of ``shards``) that carries ``record``: a stable hash of its partition key (``hash_key``'s value),
    the same in every process."""
    text = json.dumps(record["dynamodb"]["Keys"][hash_key], sort_keys=True, default=str)
    return zlib.crc32(text.encode("utf-8")) % shards
