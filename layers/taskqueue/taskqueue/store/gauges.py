"""The reads behind the queue metrics (taskqueue.core.queue_gauges): each ReadyIndex partition of a queue read by key,
at a bounded cost whatever the queue's size.

A partition is read from its head (the queue's order: where claims and so running tasks are) up to ``cap`` entries,
projecting the sort key, ``ttl`` and ``notBefore`` (DynamoDB bills a query by the index bytes it passes, so this costs
what a COUNT of the same entries would: about 16 read units per 1,000 entries, eventually consistent). Below the cap
the counts are exact and so is the oldest waiting task. At the cap the counts are floors (``complete`` False) and the
partition's tail is read too, ``tail`` entries from the other end, for the oldest: in a LIFO queue its oldest waits
there, in a FIFO queue at the head already read (exact with one priority; with several, the oldest of the top and the
bottom priority). A delayed partition is read from its earliest due time, so its due entries come first.

Groups (fair share): the ring, at most ``ring_cap`` entries per shard (one query each), then the partitions of at most
``max_groups`` groups (in ring order); past a bound ``groups_complete`` says the figures cover the groups read.
Cost, empty partitions: half a read unit a query; per queue (one shard) a ready, a delayed and a ring query; per group
two more. The most a partition costs is its cap's and tail's entries (~18 read units).
"""

from __future__ import annotations

from typing import Any

from taskqueue.core import fairness, keys
from taskqueue.core.fairness import DEFAULT_GROUP
from taskqueue.core.queue_gauges import Entry, Gauge, QueueGauges, entry_of, partition_gauge, total
from taskqueue.store.groups import GroupRing
from taskqueue.store.table import READY_INDEX

CAP = 1000  # entries read from a partition's head, at most (the board counts with the same cap)
TAIL = 100  # entries read from the tail of a partition at its cap, for the oldest
RING_CAP = 1000  # ring entries read per shard
MAX_GROUPS = 200  # groups whose partitions one run reads


class QueueGaugeReads(GroupRing):
    def queue_gauges(self, queue: str, now_ms: int | None = None, *, cap: int = CAP, tail: int = TAIL,
                     ring_cap: int = RING_CAP, max_groups: int = MAX_GROUPS) -> QueueGauges:
        """``queue``'s figures, and its groups' when it has named groups on the ring (see the module's docstring)."""
        self._settings.order_of(queue)
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        shards = range(self._settings.queue_shards)
        partitions: dict[str, list[str]] = {DEFAULT_GROUP: []}
        for shard in shards:
            partitions[DEFAULT_GROUP] += [keys.ready_key(queue, shard), keys.delayed_key(queue, shard)]
        complete = True
        for shard in shards:
            entries = self.ring(queue, shard, ring_cap)
            complete = complete and len(entries) < ring_cap
            for entry in entries:
                if entry.group not in partitions and len(partitions) > max_groups:
                    complete = False
                    continue
                partitions.setdefault(entry.group, []).extend(
                    (fairness.group_ready_key(queue, shard, entry.group), fairness.group_delayed_key(queue, shard, entry.group)))
        groups = {name: total(self.partition_gauge(queue, key, now_ms, cap, tail) for key in found)
                  for name, found in partitions.items()}
        named = len(groups) > 1
        return QueueGauges(queue, now_ms, total(groups.values()), groups if named else {}, complete)

    def partition_gauge(self, queue: str, partition: str, now_ms: int, cap: int = CAP, tail: int = TAIL) -> Gauge:
        """One ReadyIndex partition's figures (ready or delayed, any group's)."""
        order = self._settings.order_of(queue)
        delayed = fairness.is_delayed_partition(partition)
        # A ready partition's head is its descending end; a delayed one's, its earliest due time.
        head, complete = self._entries(partition, order, delayed, forward=delayed, limit=cap)
        gauge = partition_gauge(head, now_ms, delayed, complete)
        if complete or delayed or tail <= 0:
            return gauge
        end, _ = self._entries(partition, order, delayed, forward=True, limit=tail)
        oldest = partition_gauge(end, now_ms, delayed, True).oldest_ms
        return gauge + Gauge(oldest_ms=oldest) if oldest is not None else gauge

    def _entries(self, partition: str, order: keys.Order, delayed: bool, *, forward: bool,
                 limit: int) -> tuple[list[Entry], bool]:
        """Up to ``limit`` entries from one end; True when they are all the partition holds."""
        request: dict[str, Any] = {
            "TableName": self._table, "IndexName": READY_INDEX, "KeyConditionExpression": "readyKey = :k",
            "ExpressionAttributeValues": {":k": {"S": partition}}, "ScanIndexForward": forward,
            "ProjectionExpression": "readySort, #ttl, notBefore", "ExpressionAttributeNames": {"#ttl": "ttl"},
        }
        found: list[Entry] = []
        while True:
            request["Limit"] = limit - len(found)
            response = self._call("query", **request)
            for item in response.get("Items", []):
                not_before = int(item["notBefore"]["N"]) if "notBefore" in item else None
                found.append(entry_of(int(item["ttl"]["N"]), not_before, item["readySort"]["S"], delayed, order))
            if len(found) >= limit:  # (DynamoDB Local may leave out LastEvaluatedKey at a Limit)
                return found, False
            if "LastEvaluatedKey" not in response:
                return found, True
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
