"""How a worker (ProcessTasks, the Matcher) finds work in the queue table: the claimable tasks of a queue in the
order it serves them, read from the ReadyIndex's ready and delayed partitions, and what a look reads.

A reader that meets a PENDING entry past its ttl sheds it (PENDING -> SHED, one conditional write that takes
it out of the ReadyIndex), so expired entries that DynamoDB has not deleted yet (it deletes "within a few
days") never hide live work.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from taskqueue.core import keys
from taskqueue.core.errors import TaskNotFound
from taskqueue.core.model import Task
from taskqueue.core.states import TaskStatus
from taskqueue.store.table import READY_INDEX, AttributeValue, Candidate, QueueTable, candidate_of, is_claimable

# The most entries one index read of a look asks for (a look wants PAGE_SIZE or a lane window: tens of entries).
MAX_QUERY_LIMIT = 100


class WorkFinding(QueueTable):
    def candidates(
        self,
        queue: str,
        limit: int,
        now_ms: int | None = None,
        *,
        shed: bool = True,
        delayed: bool = True,
        shards: Sequence[int] | None = None,
        skip: Collection[str] = (),
    ) -> list[Candidate]:
        """Up to ``limit`` claimable tasks of a queue in the order it serves them (across ``shards``, default all).

        Each shard's ready partition is read newest key first, and the due entries of its delayed partition
        are merged in by their ready sort key (``delayed`` False: the caller knows from the queue's delayed head
        that none is due, ``taskqueue.core.delayed_head``, and the delayed partitions are not read). An entry past its
        ttl is shed (``shed``; operators' reads pass False and merely skip it), so expired entries cost one write
        once and never hide live work. Entries in ``skip`` (a worker's stale entries) are passed over and not
        counted. Each index read asks for as many entries as are still missing: DynamoDB bills a read by the 4 KB
        it reads, at least half a unit per request, so one request of ``limit`` entries costs what one of a
        fixed page would, and a look of more entries than a page costs one request, not several."""
        return self.look(queue, limit, now_ms, shed=shed, delayed=delayed, shards=shards, skip=skip)[0]

    def look(
        self,
        queue: str,
        limit: int,
        now_ms: int | None = None,
        *,
        shed: bool = True,
        delayed: bool = True,
        shards: Sequence[int] | None = None,
        skip: Collection[str] = (),
    ) -> tuple[list[Candidate], int]:
        """``candidates``, and how many entries of ``skip`` the read met."""
        need = _Need(limit)
        found: list[Candidate] = []
        skipped = 0
        if limit <= 0:
            return found, skipped
        for candidate in self._merged(queue, limit, now_ms, shed=shed, delayed=delayed, shards=shards, need=need):
            if candidate.task_id in skip:
                skipped += 1
                continue
            found.append(candidate)
            need.left -= 1
            if need.left <= 0:
                break
        return found, skipped

    def iter_candidates(
        self,
        queue: str,
        limit: int,
        now_ms: int | None = None,
        *,
        shed: bool = True,
        delayed: bool = True,
        shards: Sequence[int] | None = None,
    ) -> Iterator[Candidate]:
        """The claimable tasks of a queue in the order it serves them, read lazily: an index page (PAGE_SIZE) only
        when the reader gets that far. ``limit`` bounds the due entries read from each delayed partition (they
        are merged in by their ready sort key, so they are read first)."""
        return self._merged(queue, limit, now_ms, shed=shed, delayed=delayed, shards=shards, need=None)

    def _merged(
        self,
        queue: str,
        limit: int,
        now_ms: int | None,
        *,
        shed: bool,
        delayed: bool,
        shards: Sequence[int] | None,
        need: _Need | None,
    ) -> Iterator[Candidate]:
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        self._settings.order_of(queue)
        per_shard = [
            heapq.merge(
                sorted(self._due_delayed(queue, shard, now_ms, limit, shed, need), reverse=True) if delayed else [],
                self._claimable_ready(queue, shard, now_ms, shed, need),
                reverse=True,
            )
            for shard in (range(self._settings.queue_shards) if shards is None else shards)
        ]
        return heapq.merge(*per_shard, reverse=True)

    def has_claimable(self, queue: str, now_ms: int | None = None, *, shed: bool = True, delayed: bool = True) -> bool:
        return bool(self.candidates(queue, 1, now_ms, shed=shed, delayed=delayed))

    def next_due_ms(self, queue: str, now_ms: int | None = None, shards: Sequence[int] | None = None) -> int | None:
        """The earliest not-before time of a queue's delayed tasks (a retry's backoff, a delayed task) that
        can still run (due before its ttl), whether or not it is due already; ``None`` if there is none.
        Lets a worker wait for a retry that falls due inside its budget instead of stranding it."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        due: list[int] = []
        for shard in range(self._settings.queue_shards) if shards is None else shards:
            for entry in self._index_entries(keys.delayed_key(queue, shard), queue, shard, newest_first=False):
                assert entry.not_before_ms is not None
                if entry.ttl > now_ms // 1000 and entry.not_before_ms < entry.ttl * 1000:
                    due.append(entry.not_before_ms)
                    break
        return min(due, default=None)

    def drain_shed(self) -> dict[str, int]:
        """Tasks this store shed (per queue) since the last drain: the caller counts them as ``TasksShed``."""
        with self._shed_lock:
            counts, self._shed = dict(self._shed), Counter()
        return counts

    def shed(self, candidate: Candidate, now_ms: int | None = None) -> bool:
        """PENDING past its ttl -> SHED: out of the ReadyIndex, kept for the retention, then deleted by TTL.
        ``False`` if it was not PENDING-and-expired any more (claimed, shed by another reader, deleted)."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        written = self._transition(
            candidate.task_id,
            TaskStatus.PENDING,
            TaskStatus.SHED,
            now_ms=now_ms,
            set_=self._finished_attributes(now_ms, TaskStatus.SHED),
            remove=("readyKey", "readySort", "notBefore"),
            condition="#ttl <= :nowSeconds",
            names={"#ttl": "ttl"},
            values={":nowSeconds": {"N": str(now_ms // 1000)}},
        )
        if written is None:
            return False
        with self._shed_lock:
            self._shed[candidate.queue] += 1
        return True

    def _claimable_ready(self, queue: str, shard: int, now_ms: int, shed: bool, need: _Need | None) -> Iterator[Candidate]:
        for entry in self._index_entries(keys.ready_key(queue, shard), queue, shard, newest_first=True, need=need):
            if is_claimable(entry.ttl, entry.not_before_ms, now_ms):
                yield entry
            elif entry.ttl <= now_ms // 1000 and shed:
                self.shed(entry, now_ms)

    def _due_delayed(
        self, queue: str, shard: int, now_ms: int, limit: int, shed: bool, need: _Need | None
    ) -> list[Candidate]:
        """Up to ``limit`` entries of the delayed partition that are due now, the earliest due first."""
        found: list[Candidate] = []
        until = keys.delayed_until(now_ms)
        entries = self._index_entries(keys.delayed_key(queue, shard), queue, shard, newest_first=False, until=until, need=need)
        for entry in entries:
            if is_claimable(entry.ttl, entry.not_before_ms, now_ms):
                found.append(entry)
                if len(found) >= limit:
                    break
            elif entry.ttl <= now_ms // 1000 and shed:
                self.shed(entry, now_ms)
        return found

    def _index_entries(
        self,
        partition: str,
        queue: str,
        shard: int,
        *,
        newest_first: bool,
        until: str | None = None,
        need: _Need | None = None,
    ) -> Iterator[Candidate]:
        """Lazily walks one ReadyIndex partition page by page (ready or delayed), as Candidates: pages of what
        ``need`` still misses, else of PAGE_SIZE."""
        condition = "readyKey = :k" + (" AND readySort <= :until" if until is not None else "")
        values: dict[str, AttributeValue] = {":k": {"S": partition}}
        if until is not None:
            values[":until"] = {"S": until}
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": READY_INDEX,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": not newest_first,
        }
        while True:
            kwargs["Limit"] = self._settings.page_size if need is None else need.page()
            response = self._call("query", **kwargs)
            for item in response.get("Items", []):
                yield candidate_of(item, queue, shard)
            if "LastEvaluatedKey" not in response:
                return
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def peek(self, queue: str, now_ms: int | None = None) -> Task | None:
        """The task the queue would serve next (highest priority, then its order), without claiming it."""
        for candidate in self.candidates(queue, 1, now_ms, shed=False):  # a read: operators count nothing
            try:
                return self.get(candidate.task_id)
            except TaskNotFound:  # removed by TTL between the index read and the get
                continue
        return None


class _Need:
    """How many entries one look still misses; each index read it drives asks for that many (at most
    MAX_QUERY_LIMIT). A look stops reading once none is missing, so a read always misses at least one."""

    def __init__(self, wanted: int) -> None:
        self.left = wanted

    def page(self) -> int:
        return max(1, min(MAX_QUERY_LIMIT, self.left))
