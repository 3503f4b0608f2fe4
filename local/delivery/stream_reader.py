"""DynamoDB Streams as Lambda's poller reads them: GetRecords on every shard, records converted to the shape
Lambda delivers (epoch-second ``ApproximateCreationDateTime``, ``eventSourceARN``, base64 binaries, the TTL
service identity on REMOVEs the TTL sweeper caused)."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from local.delivery.change_feed import ChangeFeed, wait_for_change
from local.delivery.ttl import TtlRegistry, jsonable, key_of
from local.emulator.changes import ITEMS
from local.template.template import REGION

log = logging.getLogger("local.engine")


def lambda_record(raw: dict[str, Any], stream_arn: str, ttl_delete: bool) -> dict[str, Any]:
    """A GetRecords record (boto3-parsed) in the shape Lambda delivers."""
    ddb = dict(jsonable({k: v for k, v in raw["dynamodb"].items() if k != "ApproximateCreationDateTime"}))
    created = raw["dynamodb"].get("ApproximateCreationDateTime")
    if isinstance(created, dt.datetime):
        created = created.timestamp()
    ddb["ApproximateCreationDateTime"] = float(int(created)) if created is not None else float(int(time.time()))
    record = {
        "eventID": raw.get("eventID"),
        "eventName": raw.get("eventName"),
        "eventVersion": raw.get("eventVersion", "1.1"),
        "eventSource": "aws:dynamodb",
        "awsRegion": raw.get("awsRegion", REGION),
        "dynamodb": ddb,
        "eventSourceARN": stream_arn,
    }
    if ttl_delete:
        record["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    elif raw.get("userIdentity"):
        record["userIdentity"] = raw["userIdentity"]
    return record


class StreamReader:
    """Polls every shard of one table stream (GetRecords about 4 times a second, as Lambda's poller) and
    fans the records, in Lambda's shape, out to the mappings and observers."""

    def __init__(self, streams: Any, stream_arn: str, table: str, ttl: TtlRegistry, start: str = "LATEST",
                 poll_seconds: float = 0.25, changes: ChangeFeed | None = None) -> None:
        self.client = streams
        self.changes = changes  # with the emulator's change feed, an idle reader waits for a write instead of asking
        self.arn = stream_arn
        self.table = table
        self.ttl = ttl
        self.poll_seconds = poll_seconds
        self.consumers: list[Callable[[list[dict[str, Any]]], None]] = []
        self.records_read = 0
        self._iterators: dict[str, str | None] = {}
        self._stop = threading.Event()
        for shard in streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]:
            self._iterators[shard["ShardId"]] = streams.get_shard_iterator(
                StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType=start)["ShardIterator"]
        self._thread = threading.Thread(target=self._loop, name="stream-reader", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            seen = self.changes.seen(ITEMS) if self.changes else 0
            got = 0
            for shard, iterator in list(self._iterators.items()):
                if iterator is None:
                    continue
                try:
                    response = self.client.get_records(ShardIterator=iterator, Limit=1000)
                except Exception as exc:  # noqa: BLE001 - logged; the next poll retries
                    if self._stop.is_set():
                        return
                    log.warning("GetRecords failed: %s", exc)
                    continue
                self._iterators[shard] = response.get("NextShardIterator")
                raw = response.get("Records", [])
                if not raw:
                    continue
                got += len(raw)
                records = []
                for r in raw:
                    ttl_delete = r.get("eventName") == "REMOVE" and self.ttl.discard(self.table, key_of(r["dynamodb"].get("Keys", {})))
                    records.append(lambda_record(r, self.arn, ttl_delete))
                self.records_read += len(records)
                for consume in self.consumers:
                    consume(records)
            if got < 100:
                wait_for_change(self.changes, ITEMS, seen, self._stop, self.poll_seconds, started)

