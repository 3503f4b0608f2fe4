"""How deep a queue is, by state, from COUNT queries on the indexes alone (no table scan, no item read).

Running (TAKEN) tasks keep their ReadyIndex entries, their lease as ``notBefore`` (taskqueue.core.keys): a ready
partition's read tells them apart by that attribute, in the same request.

``stats`` (reading.py) reads every PENDING index entry to tell claimable from delayed and to give the waiting
ages; on a queue with 100,000 waiting tasks that is 1,000 pages. ``depth`` answers the same counts
with queries that return two attributes of each entry (``ttl``, ``notBefore``; DynamoDB bills a query by the bytes of
index it reads, whatever it returns, so this costs what ``Select=COUNT`` would): each ReadyIndex partition splits into
the entries that may still be served, those past their ttl that no reader has shed yet, and running tasks. FAILURE and
CANCELLED are ``Select=COUNT`` queries on the StatusIndex.

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

    ``ready``: PENDING in the ready partitions, before their ttl (served in the queue's order); ``taken``: running,
    their entries in the ready partitions with their lease (a dead worker's included until a look recovers it); ``delayed``:
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
    """One index partition that ``depth`` counts: ``state`` is ``ready`` (ReadyIndex, split into live, expired and
    taken), ``delayed`` (ReadyIndex, split into live and expired), ``failure`` or ``cancelled`` (StatusIndex). ``group``: the named group whose
    partition it is (fair share); None: the default group's, or a StatusIndex partition."""

    queue: str
    state: str
    index: str
    key: str
    group: str | None = None


@dataclass(frozen=True)
class PartitionCount:
    """A count of one partition. ``live``: waiting entries before their ttl (every entry on the StatusIndex);
    ``taken``: running tasks' entries (a ready partition's); ``total``: every entry read (so past their ttl: ``total -
    live - taken``); ``complete`` False when the count stopped at its cap (the partition holds more)."""

    partition: DepthPartition
    live: int
    total: int
    complete: bool
    taken: int = 0

    @property
    def expired(self) -> int:
        return self.total - self.live - self.taken


class Counts(Reading):
    def depth_partitions(self, queue: str) -> list[DepthPartition]:
        """The partitions ``depth`` counts, shard by shard."""
        self._settings.order_of(queue)
        found = []
        for shard in range(self._settings.queue_shards):
            found.append(DepthPartition(queue, "ready", READY_INDEX, keys.ready_key(queue, shard)))
            found.append(DepthPartition(queue, "delayed", READY_INDEX, keys.delayed_key(queue, shard)))
            for status in (TaskStatus.FAILURE, TaskStatus.CANCELLED):
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
        """One partition's count, reading at most ``cap`` entries (None: every entry). A ReadyIndex partition is
        split as ``depth`` splits it."""
        ready_index = partition.index == READY_INDEX
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": partition.index,
            "KeyConditionExpression": "#h = :k",
            "ExpressionAttributeNames": {"#h": "readyKey" if ready_index else "statusKey"},
            "ExpressionAttributeValues": {":k": {"S": partition.key}},
        }
        if ready_index:
            request["ProjectionExpression"] = "#ttl, notBefore"
            request["ExpressionAttributeNames"]["#ttl"] = "ttl"
        else:
            request["Select"] = "COUNT"
        leases = ready_index and not fairness.is_delayed_partition(partition.key)
        live = total = taken = 0
        while True:
            if cap is not None:
                request["Limit"] = cap - total
            response = self._call("query", **request)
            if ready_index:
                split = _split(response.get("Items", []), now_ms, leases)
                live, taken, total = live + split[0], taken + split[1], total + split[2]
            else:
                total += int(response.get("Count", 0))
                live = total
            if cap is not None and total >= cap:  # (DynamoDB Local leaves out LastEvaluatedKey at a COUNT's Limit)
                return PartitionCount(partition, live, total, False, taken)
            if "LastEvaluatedKey" not in response:
                return PartitionCount(partition, live, total, True, taken)
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def depth(self, queue: str, now_ms: int | None = None) -> QueueDepth:
        """``queue``'s counts by state (see ``QueueDepth``): index queries only, one per index partition (and more only
        past a megabyte of index per partition), every group's partitions included (the ring read in full: a
        command's count, not a board refresh's; the board counts by ``group_partitions``)."""
        self._settings.order_of(queue)
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        ready = delayed = expired = taken = 0
        partitions = list(self.depth_partitions(queue))
        for shard in range(self._settings.queue_shards):
            for entry in self.whole_ring(queue, shard):  # every group that may have waiting tasks here
                partitions.append(DepthPartition(queue, "ready", READY_INDEX, fairness.group_ready_key(queue, shard, entry.group)))
                partitions.append(DepthPartition(queue, "delayed", READY_INDEX, fairness.group_delayed_key(queue, shard, entry.group)))
        counted = {"failure": 0, "cancelled": 0}
        for partition in partitions:
            count = self.count_partition(partition, now_ms)
            if partition.state == "ready":
                ready, taken, expired = ready + count.live, taken + count.taken, expired + count.expired
            elif partition.state == "delayed":
                delayed, expired = delayed + count.live, expired + count.expired
            else:
                counted[partition.state] += count.total
        return QueueDepth(queue=queue, ready=ready, delayed=delayed, expired=expired, taken=taken,
                          failure=counted["failure"], cancelled=counted["cancelled"])


def _split(items: list[dict[str, Any]], now_ms: int, leases: bool) -> tuple[int, int, int]:
    """(waiting before their ttl, running, all) among ReadyIndex entries; ``leases``: a ready partition's, where an
    entry's ``notBefore`` is a running task's lease."""
    live = taken = 0
    for item in items:
        if leases and "notBefore" in item:
            taken += 1
        elif int(item["ttl"]["N"]) > now_ms // 1000:
            live += 1
    return live, taken, len(items)
