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
from concurrent.futures import Future
from typing import Any

from taskqueue.core import fairness, keys
from taskqueue.core.delayed_head import Part
from taskqueue.core.errors import TaskNotFound
from taskqueue.core.fairness import FairTurn, RingEntry
from taskqueue.core.model import Task
from taskqueue.core.states import TaskStatus
from taskqueue.store.groups import GroupRing
from taskqueue.store.page_reads import MAX_QUERY_LIMIT, Need, page_request
from taskqueue.store.table import READY_INDEX, Candidate, candidate_of, is_claimable


class WorkFinding(GroupRing):
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
        fair: FairTurn | None = None,
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
        return self.look(queue, limit, now_ms, shed=shed, delayed=delayed, shards=shards, skip=skip, fair=fair)[0]

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
        fair: FairTurn | None = None,
        delayed_parts: Collection[Part] | None = None,
    ) -> tuple[list[Candidate], int]:
        """``candidates``, and how many entries of ``skip`` the read met.

        When groups have waiting tasks (the ring, ``taskqueue.core.fairness``), the tasks come round-robin across the
        groups (the default group's partitions among them), each group's in the queue's order, starting after
        ``fair.after`` (the worker's cursor on each shard's ring) and passing over ``fair.held_back`` (groups at a
        limit). A worker look (``shed``) also takes off the ring the groups it found with no task at all.
        ``delayed_parts``: the only delayed partitions to read (``taskqueue.core.delayed_head.DelayedScope``); ``None``:
        every one."""
        need = Need(limit)
        found: list[Candidate] = []
        skipped = 0
        if limit <= 0:
            return found, skipped
        merged = self._merged(queue, limit, now_ms, shed=shed, delayed=delayed, shards=shards, need=need, fair=fair,
                              delayed_parts=delayed_parts)
        for candidate in merged:
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
        fair: FairTurn | None = None,
    ) -> Iterator[Candidate]:
        """The claimable tasks of a queue in the order it serves them, read lazily: an index page (PAGE_SIZE) only
        when the reader gets that far. ``limit`` bounds the due entries read from each delayed partition (they
        are merged in by their ready sort key, so they are read first)."""
        return self._merged(queue, limit, now_ms, shed=shed, delayed=delayed, shards=shards, need=None, fair=fair)

    def _merged(
        self,
        queue: str,
        limit: int,
        now_ms: int | None,
        *,
        shed: bool,
        delayed: bool,
        shards: Sequence[int] | None,
        need: Need | None,
        fair: FairTurn | None = None,
        delayed_parts: Collection[Part] | None = None,
    ) -> Iterator[Candidate]:
        now_ms = self._clock.now_ms() if now_ms is None else now_ms

        def reads_delayed(shard: int, group: str | None) -> bool:
            return delayed and (delayed_parts is None or (shard, group) in delayed_parts)

        self._settings.order_of(queue)
        shard_list = list(range(self._settings.queue_shards) if shards is None else shards)
        reads_ring = fair is None or fair.groups
        turns = {shard: self._turns(queue, shard, now_ms, fair) if reads_ring else [] for shard in shard_list}
        if not any(turns.values()):  # no group waits: the default group alone, in the queue's order across shards
            return heapq.merge(
                *(self._partition(queue, shard, None, now_ms, limit, shed, reads_delayed(shard, None), need)
                  for shard in shard_list),
                reverse=True,
            )
        # Each group's read asks for what the look still misses, not a fair part of it: index entries are small (some
        # 25 fit a 4 KB read unit), so a few more cost nothing, and the group that has the work (the busy one, when the
        # others are empty) fills the look's later rounds from its first page instead of one request per round.
        # A look's first round reads the groups of its turn one candidate each: the first pages of one group more than
        # the candidates it wants (the default group, often empty, first) go out together (store/page_reads.py), what
        # the round reads one by one when those groups have work; a reader of the whole queue (``need`` None) is lazy.
        streams: list[Iterator[Candidate]] = []
        ahead = 0 if need is None or sum(len(e or [None]) for e in turns.values()) < 2 else need.left + 1
        for shard, entries in turns.items():
            for entry in entries or [None]:
                group = None if entry is None else entry.group
                delayed_here = reads_delayed(shard, group)
                first = self._first_pages(queue, shard, group, now_ms, delayed_here, need) if len(streams) < ahead else (None, None)
                stream = self._partition(queue, shard, group, now_ms, limit, shed, delayed_here, need, first)
                streams.append(self._or_off_ring(queue, entry, stream, now_ms) if shed and entry is not None else stream)
        return fairness.round_robin(streams)

    def _first_pages(
        self, queue: str, shard: int, group: str | None, now_ms: int, delayed: bool, need: Need
    ) -> tuple[Future[dict[str, Any]] | None, Future[dict[str, Any]] | None]:
        """The first index pages of one group's partitions, started now: its ready partition's, and its delayed one's
        when the look reads it."""
        pages = self._first_page_reads
        ready = fairness.ready_partition(queue, shard, group)
        first_ready = pages.start(page_request(self._table, READY_INDEX, ready, newest_first=True, limit=need.page() + self._held_seen.get(ready, 0)))
        if not delayed:
            return first_ready, None
        late = fairness.delayed_partition(queue, shard, group)
        return first_ready, pages.start(page_request(self._table, READY_INDEX, late, newest_first=False, until=keys.delayed_until(now_ms),
                                                         limit=need.page()))

    def _partition(
        self, queue: str, shard: int, group: str | None, now_ms: int, limit: int, shed: bool, delayed: bool, need: Any,
        first: tuple[Future[dict[str, Any]] | None, Future[dict[str, Any]] | None] = (None, None),
    ) -> Iterator[Candidate]:
        """One group's claimable tasks in one shard (``None``: the default group's), in the queue's order. A generator:
        nothing is read, not even the due delayed entries, until the group's turn comes (a look that fills up on the first
        groups of the ring reads none of the others'), unless its ``first`` pages were started (``_first_pages``)."""
        first_ready, first_delayed = first
        yield from heapq.merge(
            sorted(self._due_delayed(queue, shard, now_ms, limit, shed, need, group, first_delayed), reverse=True)
            if delayed else [],
            self._claimable_ready(queue, shard, now_ms, shed, need, group, first_ready),
            reverse=True,
        )

    def _turns(self, queue: str, shard: int, now_ms: int, fair: FairTurn | None) -> list[RingEntry | None]:
        """The groups of a shard in the order a look serves them: the ring from just after the cursor round to it,
        with the default group (``None``) at the ring's start; empty when no named group waits (or every waiting one
        is paused or held back), so a queue without groups pays one ring query a look and nothing else.

        Entries held back or paused are passed over and the walk reads on (at most RING_READS pages), so groups
        beyond a page of held-back ones are not starved while the cursor stands still."""
        after = None if fair is None else fair.after.get(shard)
        held_back = frozenset() if fair is None else fair.held_back

        def servable_now(entry: RingEntry) -> bool:
            paused = entry.paused_until_ms is not None and entry.paused_until_ms > now_ms
            if paused and entry.group not in held_back and fair is not None and fair.on_paused is not None:
                fair.on_paused(entry.group, entry.paused_until_ms)  # never offered, so never admitted: say until when
            return entry.group not in held_back and not paused

        servable: list[RingEntry | None] = []
        wrapped_at: int | None = None
        # The ring fitted a page last time: read it whole from its start (one query, not one each side of the cursor)
        # and turn it round the cursor here; a full page means it grew: walk it.
        whole = self._ring_page(queue, shard, fairness.RING_PAGE) if after and self._small_ring.get((queue, shard)) else None
        if after and whole is not None and len(whole) < fairness.RING_PAGE:
            turned = [e for e in fairness.ring_from(whole, after) if servable_now(e)]
            wrapped_at = sum(1 for e in turned if e.sort > after)
            servable += turned
        else:
            seen = reads = 0
            # The walk: (cursor, end of the ring], then [start of the ring, cursor].
            for part, (start, stop) in enumerate([(after or None, None)] + ([(None, after)] if after else [])):
                if part == 1:
                    wrapped_at = len(servable)
                cursor = start
                while reads < fairness.RING_READS and len(servable) < fairness.RING_PAGE:
                    page = self._ring_page(queue, shard, fairness.RING_PAGE, after=cursor, up_to=stop)
                    reads += 1
                    seen += len(page)
                    servable += [e for e in page if servable_now(e)]
                    if len(page) < fairness.RING_PAGE:
                        break
                    cursor = page[-1].sort
            self._small_ring[(queue, shard)] = seen < fairness.RING_PAGE and reads <= 2
        if not servable:
            return []
        # The default group sits at the ring's start: first when the walk starts there, else where the walk wraps.
        if after is None:
            return [None, *servable]
        split = len(servable) if wrapped_at is None else wrapped_at
        return [*servable[:split], None, *servable[split:]]

    def _or_off_ring(self, queue: str, entry: RingEntry, stream: Iterator[Candidate], look_ms: int) -> Iterator[Candidate]:
        """``stream``; if it holds no task at all (none ready, none running, none delayed, due or not), the group leaves
        the ring. A running task keeps its group on the ring: if its worker dies, a look must find its entry."""
        empty = True
        for candidate in stream:
            empty = False
            yield candidate
        # Before it may leave (``may_deactivate``), or while its last read passed over a running task's entry, the
        # condition would refuse or the read find it: no read of its partitions, no write.
        ready = fairness.group_ready_key(queue, entry.shard, entry.group)
        if empty and not self._held_seen.get(ready, 0) and self.may_deactivate(queue, entry, look_ms) and not any(
            self._has_entry(partition) for partition in (ready, fairness.group_delayed_key(queue, entry.shard, entry.group))
        ):
            self.deactivate(queue, entry, look_ms)

    def _has_entry(self, partition: str) -> bool:
        response = self._call(
            "query", TableName=self._table, IndexName=READY_INDEX, KeyConditionExpression="readyKey = :k",
            ExpressionAttributeValues={":k": {"S": partition}}, Limit=1,
        )
        return bool(response.get("Items"))

    def has_claimable(
        self, queue: str, now_ms: int | None = None, *, shed: bool = True, delayed: bool = True, fair: FairTurn | None = None
    ) -> bool:
        return bool(self.candidates(queue, 1, now_ms, shed=shed, delayed=delayed, fair=fair))

    def next_due_ms(self, queue: str, now_ms: int | None = None, shards: Sequence[int] | None = None) -> int | None:
        """The earliest not-before time of a queue's delayed tasks (a retry's backoff, a delayed task) that
        can still run (due before its ttl), whether or not it is due already; ``None`` if there is none.
        Lets a worker wait for a retry that falls due inside its budget instead of stranding it."""
        return min(self.due_heads(queue, now_ms, shards).values(), default=None)

    def due_heads(self, queue: str, now_ms: int | None = None, shards: Sequence[int] | None = None) -> dict[Part, int]:
        """``next_due_ms`` per delayed partition that holds a task that can still run: (shard, group) -> its earliest
        not-before (group ``None``: the default group's partition). One query per partition: the default group's and
        one per group on the ring, per shard."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        due: dict[Part, int] = {}
        for shard in range(self._settings.queue_shards) if shards is None else shards:
            # A paused group's entries are claimable from the pause's end only (a look passes the group over until
            # then): counted from then, so that a worker does not look again and again for a retry it may not claim.
            # Ending a pause early lowers the head (``set_group_settings``).
            partitions: list[tuple[str | None, str, int]] = [(None, keys.delayed_key(queue, shard), 0)] + [
                (entry.group, fairness.group_delayed_key(queue, shard, entry.group), entry.paused_until_ms or 0)
                for entry in self.whole_ring(queue, shard)
            ]
            for group, partition, paused_until_ms in partitions:
                for entry in self._index_entries(partition, queue, shard, newest_first=False):
                    assert entry.not_before_ms is not None
                    if entry.ttl > now_ms // 1000 and entry.not_before_ms < entry.ttl * 1000:
                        due[(shard, group)] = max(entry.not_before_ms, paused_until_ms)
                        break
        return due

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
            condition="#ttl <= :nowSeconds AND attribute_not_exists(wfOut)",  # tasks wait for it? shed_with_fan_out
            names={"#ttl": "ttl"},
            values={":nowSeconds": {"N": str(now_ms // 1000)}},
        )
        if written is None and not self.shed_with_fan_out(candidate.task_id, now_ms):  # type: ignore[attr-defined]
            return False
        with self._shed_lock:
            self._shed[candidate.queue] += 1
        return True

    def _claimable_ready(
        self, queue: str, shard: int, now_ms: int, shed: bool, need: Any, group: str | None = None,
        first: Future[dict[str, Any]] | None = None,
    ) -> Iterator[Candidate]:
        partition = fairness.ready_partition(queue, shard, group)
        # Running tasks keep their entries (``Candidate.leased``), at the head of a LIFO queue: the first read asks for
        # as many more entries as the last look of this partition passed over, so that it does not page one by one.
        held = 0
        extra = self._held_seen.get(partition, 0)
        unmarked = self._unmarked.held(now_ms)  # running with no lease mark on the entry (store/unmarked_leases.py)
        for entry in self._index_entries(partition, queue, shard, newest_first=True, need=need, extra=extra, first=first):
            if (entry.leased and entry.not_before_ms is not None and entry.not_before_ms > now_ms) or entry.task_id in unmarked:
                held += 1  # running: its lease holds
                continue
            self._held_seen[partition] = held
            if entry.leased and entry.ttl <= now_ms // 1000:
                # Its worker died and its ttl passed: back to PENDING (or FAILURE on its last attempt), then shed.
                if shed and self.recover_in_look(entry, now_ms) is TaskStatus.PENDING:  # type: ignore[attr-defined]
                    self.shed(entry, now_ms)
            elif is_claimable(entry.ttl, entry.not_before_ms, now_ms):
                yield entry  # a leased one's worker died: ``claim`` recovers it first
            elif entry.ttl <= now_ms // 1000 and shed:
                self.shed(entry, now_ms)
        self._held_seen[partition] = held

    def _due_delayed(
        self, queue: str, shard: int, now_ms: int, limit: int, shed: bool, need: Any, group: str | None = None,
        first: Future[dict[str, Any]] | None = None,
    ) -> list[Candidate]:
        """Up to ``limit`` entries of the delayed partition that are due now, the earliest due first."""
        found: list[Candidate] = []
        until = keys.delayed_until(now_ms)
        partition = fairness.delayed_partition(queue, shard, group)
        entries = self._index_entries(partition, queue, shard, newest_first=False, until=until, need=need, first=first)
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
        need: Any = None,
        extra: int = 0,
        first: Future[dict[str, Any]] | None = None,
    ) -> Iterator[Candidate]:
        """Lazily walks one ReadyIndex partition page by page (ready or delayed), as Candidates: pages of what
        ``need`` still misses (the first ``extra`` more), else of PAGE_SIZE. ``first``: the first page, already asked
        for (``_first_pages``)."""
        kwargs = page_request(self._table, READY_INDEX, partition, newest_first=newest_first, until=until)
        while True:
            kwargs["Limit"] = self._settings.page_size if need is None else min(MAX_QUERY_LIMIT, need.page() + extra)
            extra = 0
            response = first.result() if first is not None else self._call("query", **kwargs)
            first = None
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

