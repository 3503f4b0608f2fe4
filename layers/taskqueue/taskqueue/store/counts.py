"""How deep a queue is, by state, from COUNT queries on the indexes alone (no table scan, no item read).

``stats`` (reading.py) reads every PENDING index entry to tell claimable from delayed and to give the waiting
ages; on a queue with 100,000 waiting tasks that is 1,000 pages. ``depth`` answers the same counts with
``Select=COUNT`` queries, which DynamoDB answers a megabyte of index per page without returning items: what a
board refreshed every few seconds can afford. The ttl filter splits each PENDING partition's count into the
entries that may still be served (``Count``) and those past their ttl that no reader has shed yet
(``ScannedCount - Count``), in the same request.

SUCCESS and SHED are not indexed (finished work costs no index writes): ``depth`` does not count them; their
rates come from the functions' metrics, and ``count`` counts them with a table scan when asked by name.

A COUNT query is billed for the bytes of index it passes (about 1,600 read units for 100,000 PENDING entries):
``depth_partitions`` and ``count_partition`` let a caller that reads often (the board) count each partition on its
own and stop at a cap (``PartitionCount.complete`` False: there are more), and decide itself when a full count is
worth its price.

Fair share's groups (``taskqueue.core.fairness``) wait in partitions of their own: ``depth`` counts those of every
group on the ring; ``group_partitions`` names them for a caller that counts partition by partition, from a ring read
that stops at a cap (one query per shard).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from taskqueue.core import fairness, keys
from taskqueue.core.states import TaskStatus
from taskqueue.store.reading import Reading
from taskqueue.store.table import READY_INDEX, STATUS_INDEX


@dataclass(frozen=True)
class QueueDepth:
    """A queue's tasks by state, counted on the indexes.

    ``ready``: PENDING in the ready partitions, before their ttl (served in the queue's order); ``delayed``:
    PENDING in the delayed partitions (a retry's backoff or a creation delay), before their ttl; ``expired``:
    PENDING past their ttl, never to be served, waiting for a reader to shed them or for TTL to delete them."""

    queue: str
    ready: int
    delayed: int
    expired: int
    taken: int
    failure: int
    cancelled: int

    @property
    def pending(self) -> int:
        return self.ready + self.delayed + self.expired

    def by_state(self) -> dict[str, int]:
        """The counts under the lifecycle's state names (PENDING is every PENDING entry)."""
        return {
            TaskStatus.PENDING.value: self.pending,
            TaskStatus.TAKEN.value: self.taken,
            TaskStatus.FAILURE.value: self.failure,
            TaskStatus.CANCELLED.value: self.cancelled,
        }


@dataclass(frozen=True)
class DepthPartition:
    """One index partition that ``depth`` counts: ``state`` is ``ready``, ``delayed`` (ReadyIndex, split by ttl into
    live and expired), ``taken``, ``failure`` or ``cancelled`` (StatusIndex). ``group``: the named group whose
    partition it is (fair share); None: the default group's, or a StatusIndex partition."""

    queue: str
    state: str
    index: str
    key: str
    group: str | None = None


@dataclass(frozen=True)
class PartitionCount:
    """A count of one partition. ``live``: entries before their ttl (every entry on the StatusIndex); ``total``:
    every entry read; ``complete`` False when the count stopped at its cap (the partition holds more)."""

    partition: DepthPartition
    live: int
    total: int
    complete: bool


class Counts(Reading):
    def depth_partitions(self, queue: str) -> list[DepthPartition]:
        """The partitions ``depth`` counts, shard by shard."""
        self._settings.order_of(queue)
        found = []
        for shard in range(self._settings.queue_shards):
            found.append(DepthPartition(queue, "ready", READY_INDEX, keys.ready_key(queue, shard)))
            found.append(DepthPartition(queue, "delayed", READY_INDEX, keys.delayed_key(queue, shard)))
            for status in (TaskStatus.TAKEN, TaskStatus.FAILURE, TaskStatus.CANCELLED):
                found.append(DepthPartition(queue, status.value.lower(), STATUS_INDEX,
                                            keys.status_key(queue, status.value, shard)))
        return found

    def group_partitions(self, queue: str, cap: int = 1000) -> tuple[list[DepthPartition], bool]:
        """The ready and delayed partitions of the groups on the ring, shard by shard, from a ring read of at most
        ``cap`` entries per shard; ``False`` when a shard's ring held more (the list then misses some groups)."""
        self._settings.order_of(queue)
        found: list[DepthPartition] = []
        complete = True
        for shard in range(self._settings.queue_shards):
            entries = self.ring(queue, shard, cap)
            complete = complete and len(entries) < cap
            for entry in entries:
                found.append(DepthPartition(queue, "ready", READY_INDEX,
                                            fairness.group_ready_key(queue, shard, entry.group), entry.group))
                found.append(DepthPartition(queue, "delayed", READY_INDEX,
                                            fairness.group_delayed_key(queue, shard, entry.group), entry.group))
        return found, complete

    def count_partition(self, partition: DepthPartition, now_ms: int, cap: int | None = None) -> PartitionCount:
        """One partition's COUNT, reading at most ``cap`` entries (None: every entry). A ReadyIndex partition is
        split by ttl as ``depth`` splits it."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": partition.index,
            "KeyConditionExpression": "#h = :k",
            "ExpressionAttributeNames": {"#h": "readyKey" if partition.index == READY_INDEX else "statusKey"},
            "ExpressionAttributeValues": {":k": {"S": partition.key}},
            "Select": "COUNT",
        }
        if partition.index == READY_INDEX:
            request["FilterExpression"] = "#ttl > :now"
            request["ExpressionAttributeNames"]["#ttl"] = "ttl"
            request["ExpressionAttributeValues"][":now"] = {"N": str(now_ms // 1000)}
        live = total = 0
        while True:
            if cap is not None:
                request["Limit"] = cap - total
            response = self._call("query", **request)
            total += int(response.get("ScannedCount", response.get("Count", 0)))
            live += int(response.get("Count", 0))
            if cap is not None and total >= cap:  # (DynamoDB Local leaves out LastEvaluatedKey at a COUNT's Limit)
                return PartitionCount(partition, live, total, False)
            if "LastEvaluatedKey" not in response:
                return PartitionCount(partition, live, total, True)
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
    def depth(self, queue: str, now_ms: int | None = None) -> QueueDepth:
        """``queue``'s counts by state (see ``QueueDepth``): COUNT queries only, one per index partition (and
        more only past a megabyte of index per partition), every group's partitions included (the ring read in full:
        a command's count, not a board refresh's; the board counts by ``group_partitions``)."""
        self._settings.order_of(queue)
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        shards = range(self._settings.queue_shards)
        ready = delayed = expired = 0
        for shard in shards:
            live, total = self._count_before_ttl(keys.ready_key(queue, shard), now_ms)
            ready, expired = ready + live, expired + total - live
            live, total = self._count_before_ttl(keys.delayed_key(queue, shard), now_ms)
            delayed, expired = delayed + live, expired + total - live
            for entry in self.whole_ring(queue, shard):  # every group that may have waiting tasks here
                live, total = self._count_before_ttl(fairness.group_ready_key(queue, shard, entry.group), now_ms)
                ready, expired = ready + live, expired + total - live
                live, total = self._count_before_ttl(fairness.group_delayed_key(queue, shard, entry.group), now_ms)
                delayed, expired = delayed + live, expired + total - live
        return QueueDepth(
            queue=queue,
            ready=ready,
            delayed=delayed,
            expired=expired,
            taken=self.count(queue, TaskStatus.TAKEN),
            failure=self.count(queue, TaskStatus.FAILURE),
            cancelled=self.count(queue, TaskStatus.CANCELLED),
        )

    def _count_before_ttl(self, partition: str, now_ms: int) -> tuple[int, int]:
        """(entries whose ttl has not passed, every entry) of one ReadyIndex partition: one COUNT query with a
        filter, whose ``Count`` is what passed the filter and ``ScannedCount`` what was read."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": READY_INDEX,
            "KeyConditionExpression": "readyKey = :k",
            "FilterExpression": "#ttl > :now",
            "ExpressionAttributeNames": {"#ttl": "ttl"},
            "ExpressionAttributeValues": {":k": {"S": partition}, ":now": {"N": str(now_ms // 1000)}},
            "Select": "COUNT",
        }
        live = total = 0
        while True:
            response = self._call("query", **request)
            live += int(response.get("Count", 0))
            total += int(response.get("ScannedCount", 0))
            if "LastEvaluatedKey" not in response:
                return live, total
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
