"""How deep a queue is, by state, from COUNT queries on the indexes alone (no table scan, no item read).

``stats`` (reading.py) reads every PENDING index entry to tell claimable from delayed and to give the waiting
ages; on a queue with 100,000 waiting tasks that is 1,000 pages. ``depth`` answers the same counts with
``Select=COUNT`` queries, which DynamoDB answers a megabyte of index per page without returning items: what a
board refreshed every few seconds can afford. The ttl filter splits each PENDING partition's count into the
entries that may still be served (``Count``) and those past their ttl that no reader has shed yet
(``ScannedCount - Count``), in the same request.

SUCCESS and SHED are not indexed (finished work costs no index writes): ``depth`` does not count them; their
rates come from the functions' metrics, and ``count`` counts them with a table scan when asked by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from taskqueue.core import keys
from taskqueue.core.states import TaskStatus
from taskqueue.store.reading import Reading
from taskqueue.store.table import READY_INDEX


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


class Counts(Reading):
    def depth(self, queue: str, now_ms: int | None = None) -> QueueDepth:
        """``queue``'s counts by state (see ``QueueDepth``): COUNT queries only, one per index partition (and
        more only past a megabyte of index per partition)."""
        self._settings.order_of(queue)
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        shards = range(self._settings.queue_shards)
        ready = delayed = expired = 0
        for shard in shards:
            live, total = self._count_before_ttl(keys.ready_key(queue, shard), now_ms)
            ready, expired = ready + live, expired + total - live
            live, total = self._count_before_ttl(keys.delayed_key(queue, shard), now_ms)
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
