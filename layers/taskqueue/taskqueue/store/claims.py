"""What a worker (ProcessTasks, the Matcher) does with the queue table: find work, claim it, renew its lease,
finish it, hand it back, and recover the leases of crashed workers.

A reader that meets a PENDING entry past its ttl sheds it (PENDING -> SHED, one conditional write that takes
it out of the ReadyIndex), so expired entries that DynamoDB has not deleted yet (it deletes "within a few
days") never hide live work.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

from taskqueue import keys
from taskqueue.dynamo import ConditionLost
from taskqueue.errors import InvalidTaskInput, TaskNotFound, TaskTooLong
from taskqueue.model import Task, encode_json, from_item
from taskqueue.run_time import effective_run_seconds
from taskqueue.states import TaskStatus
from taskqueue.store.table import READY_INDEX, AttributeValue, Candidate, QueueTable, candidate_of, is_claimable

# What a runner reported of an attempt (taskqueue.progress); a claim removes them, so each attempt starts afresh.
PROGRESS_ATTRIBUTES = ("progress", "progressMessage", "progressUpdated")
# The most entries one index read of a look asks for (a look wants PAGE_SIZE, or a lane window, at most 100s).
MAX_QUERY_LIMIT = 100


class WorkerTransitions(QueueTable):
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
        that none is due, ``taskqueue.delayed_head``, and the delayed partitions are not read). An entry past its
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
            kwargs["Limit"] = self._settings.page_size if need is None else need.page(self._settings.page_size)
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

    def claim(
        self, candidate: Candidate, owner: str, now_ms: int | None = None, *, run_within: float | None = None
    ) -> Task | None:
        """PENDING -> TAKEN with a lease; ``None`` if someone else got it or it is no longer claimable.

        ``run_within``: the longest run the claiming invocation can still finish (taskqueue.run_time.run_within);
        a task that declares a longer one (``runSeconds``, else DEFAULT_RUN_SECONDS) is refused by the write's
        condition and raises ``TaskTooLong``, so it stays PENDING for a fresh invocation."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        expires = now_ms + self._settings.lease_seconds * 1000
        # DynamoDB's TTL deletes late: an expired task must be refused here, not only skipped above.
        condition = "#ttl > :nowSeconds AND (attribute_not_exists(notBefore) OR notBefore <= :now)"
        values: dict[str, AttributeValue] = {":nowSeconds": {"N": str(now_ms // 1000)}}
        if run_within is not None:
            values[":runWithin"] = {"N": f"{run_within:.3f}"}
            fits = "runSeconds <= :runWithin"
            if self._settings.default_run_seconds <= run_within:
                fits = f"(attribute_not_exists(runSeconds) OR {fits})"
            condition += f" AND {fits}"
        request = self._transition_request(
            candidate.task_id,
            TaskStatus.PENDING,
            TaskStatus.TAKEN,
            now_ms=now_ms,
            set_={
                "leaseOwner": {"S": owner},
                "claimedAt": {"N": str(now_ms)},
                "statusKey": {"S": keys.status_key(candidate.queue, TaskStatus.TAKEN.value, candidate.shard)},
                **self._lease_attributes(expires),
            },
            # A new attempt starts without the last one's progress.
            remove=("readyKey", "readySort", "notBefore", *PROGRESS_ATTRIBUTES),
            count_attempt=True,
            condition=condition,
            names={"#ttl": "ttl"},
            values=values,
        )
        if run_within is not None:  # the item as it was, if refused: tells a run too long from a lost race
            request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        try:
            return from_item(self._call("update_item", **request)["Attributes"])
        except ConditionLost as lost:
            if run_within is not None and lost.item is not None:
                self._raise_if_too_long(lost.item, run_within, now_ms)
            return None

    def _raise_if_too_long(self, item: Mapping[str, Any], run_within: float, now_ms: int) -> None:
        """A refused claim of a task that was still claimable is refused for its run time: say so."""
        task = from_item(item)
        if task.status is not TaskStatus.PENDING or not is_claimable(task.ttl, task.not_before_ms, now_ms):
            return
        run_seconds = effective_run_seconds(task.run_seconds, self._settings.default_run_seconds)
        if run_seconds > run_within:
            raise TaskTooLong(task.task_id, run_seconds, run_within)

    def record_progress(
        self, task: Task, owner: str, progress: float, message: str | None, now_ms: int | None = None
    ) -> bool:
        """TAKEN -> TAKEN with what the runner reports of its attempt, only by the lease owner while the lease holds.
        A MODIFY on the stream, which Trigger's filter (INSERTs of PENDING tasks) never passes on."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        set_: dict[str, AttributeValue] = {"progress": {"N": repr(float(progress))}, "progressUpdated": {"N": str(now_ms)}}
        if message:
            set_["progressMessage"] = {"S": message}
        written = self._transition(
            task.task_id,
            TaskStatus.TAKEN,
            TaskStatus.TAKEN,
            now_ms=now_ms,
            set_=set_,
            remove=() if message else ("progressMessage",),
            condition="leaseOwner = :owner AND leaseExpires > :now",
            values={":owner": {"S": owner}},
        )
        return written is not None

    def complete(self, task: Task, owner: str, result: Mapping[str, Any] | None = None, now_ms: int | None = None) -> bool:
        """TAKEN -> SUCCESS, only by the lease owner while the lease holds."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        set_ = self._finished_attributes(now_ms, TaskStatus.SUCCESS)
        if result is not None:
            set_["result"] = {"S": encode_json(result)}
        return self._owned_transition(task, owner, TaskStatus.SUCCESS, now_ms, set_, ("statusKey", "statusSort"))

    def renew_lease(self, task: Task, owner: str, seconds: float | None = None, now_ms: int | None = None) -> int | None:
        """TAKEN -> TAKEN with the lease extended to now + ``seconds`` (default LEASE_SECONDS): a heartbeat,
        only by the lease owner while its lease holds, and only ever later (extend-only). The item's deletion
        time moves with it. Returns the new expiry (epoch ms), or ``None`` if the lease is no longer ours."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        lease_ms = int((self._settings.lease_seconds if seconds is None else seconds) * 1000)
        if lease_ms <= 0:
            raise InvalidTaskInput(f"a lease extension must be positive, got {seconds!r} s")
        expires = now_ms + lease_ms
        written = self._transition(
            task.task_id,
            TaskStatus.TAKEN,
            TaskStatus.TAKEN,
            now_ms=now_ms,
            set_=self._lease_attributes(expires),
            condition="leaseOwner = :owner AND leaseExpires > :now AND leaseExpires < :newExpiry",
            values={":owner": {"S": owner}, ":newExpiry": {"N": str(expires)}},
        )
        return expires if written is not None else None

    def fail(self, task: Task, owner: str, error: str, now_ms: int | None = None) -> bool:
        """TAKEN -> FAILURE (the dead-letter state), only by the lease owner while the lease holds."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        set_ = self._finished_attributes(now_ms, TaskStatus.FAILURE) | {
            "lastError": {"S": error[:1000]},
            "statusKey": {"S": keys.status_key(task.queue, TaskStatus.FAILURE.value, task.shard)},
            "statusSort": {"N": str(now_ms)},
        }
        return self._owned_transition(task, owner, TaskStatus.FAILURE, now_ms, set_, ())

    def release(
        self,
        task: Task,
        owner: str,
        *,
        not_before_ms: int | None = None,
        error: str | None = None,
        refund_attempt: bool = False,
        now_ms: int | None = None,
    ) -> bool:
        """TAKEN -> PENDING at the task's old place in the order (a retry, or work handed back).

        ``refund_attempt`` gives back the attempt the claim counted, for work handed back without being
        tried (e.g. a call with no matching agent yet), so waiting never exhausts a task's attempts.
        """
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        set_ = self._ready_attributes(task.with_changes(not_before_ms=not_before_ms))
        if error is not None:
            set_["lastError"] = {"S": error[:1000]}
        if refund_attempt:
            set_["attempts"] = {"N": str(max(0, task.attempts - 1))}
        released = self._owned_transition(task, owner, TaskStatus.PENDING, now_ms, set_, ("statusKey", "statusSort"))
        if released and not_before_ms is not None:
            self.note_delayed_tasks([(task.queue, not_before_ms)], now_ms)
        return released

    def completion_update(
        self, task: Task, owner: str, result: Mapping[str, Any] | None = None, now_ms: int | None = None
    ) -> dict[str, Any]:
        """The ``Update`` of a TransactWriteItems entry that completes ``task`` (TAKEN -> SUCCESS) under the
        same conditions as ``complete``, for callers that must finish a task atomically with other writes."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        set_ = self._finished_attributes(now_ms, TaskStatus.SUCCESS)
        if result is not None:
            set_["result"] = {"S": encode_json(result)}
        request = self._transition_request(
            task.task_id,
            TaskStatus.TAKEN,
            TaskStatus.SUCCESS,
            now_ms=now_ms,
            set_=set_,
            remove=("leaseOwner", "leaseExpires", "statusKey", "statusSort"),
            condition="leaseOwner = :owner AND leaseExpires > :now",
            values={":owner": {"S": owner}},
        )
        request.pop("ReturnValues")
        return request

    def expired_leases(self, queue: str, now_ms: int | None = None, limit: int = 100) -> list[str]:
        """Ids of TAKEN tasks whose lease has passed, found through the StatusIndex (no table scan)."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        return self._status_index_ids(queue, TaskStatus.TAKEN, limit, until_ms=now_ms)

    def recover_lease(self, task_id: str, retry_at_ms: int | None, now_ms: int | None = None) -> TaskStatus | None:
        """Return a TAKEN task whose lease expired to PENDING, or to FAILURE once its attempts are used up.

        The write is conditional on the lease expiry it read, so a worker that renewed or finished in the
        meantime wins. Returns the new status, or ``None`` if there was nothing to recover.
        """
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        try:
            task = self.get(task_id)
        except TaskNotFound:
            return None
        if task.status is not TaskStatus.TAKEN or task.lease_expires_ms is None or task.lease_expires_ms > now_ms:
            return None
        error = f"lease of {task.lease_owner} expired at attempt {task.attempts}"
        condition = "leaseExpires = :seenExpiry"
        values = {":seenExpiry": {"N": str(task.lease_expires_ms)}}
        if task.attempts >= task.max_attempts:
            target = TaskStatus.FAILURE
            set_ = self._finished_attributes(now_ms, TaskStatus.FAILURE) | {
                "lastError": {"S": error},
                "statusKey": {"S": keys.status_key(task.queue, TaskStatus.FAILURE.value, task.shard)},
                "statusSort": {"N": str(now_ms)},
            }
            remove: tuple[str, ...] = ("leaseOwner", "leaseExpires")
        else:
            target = TaskStatus.PENDING
            set_ = self._ready_attributes(task.with_changes(not_before_ms=retry_at_ms)) | {"lastError": {"S": error}}
            remove = ("leaseOwner", "leaseExpires", "statusKey", "statusSort")
        written = self._transition(
            task_id, TaskStatus.TAKEN, target, now_ms=now_ms, set_=set_, remove=remove, condition=condition, values=values
        )
        if written is not None and target is TaskStatus.PENDING and retry_at_ms is not None:
            self.note_delayed_tasks([(task.queue, retry_at_ms)], now_ms)
        return target if written is not None else None

    def recover_expired_leases(self, queue: str, retry_at_ms: int | None = None, now_ms: int | None = None) -> dict[str, int]:
        """Recover every expired lease of a queue (for the safety net); counts per new status."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        outcome = {TaskStatus.PENDING.value: 0, TaskStatus.FAILURE.value: 0}
        for task_id in self.expired_leases(queue, now_ms):
            status = self.recover_lease(task_id, retry_at_ms, now_ms)
            if status is not None:
                outcome[status.value] += 1
        return outcome


class _Need:
    """How many entries one look still misses; each index read it drives asks for that many (at most
    MAX_QUERY_LIMIT, at least one)."""

    def __init__(self, wanted: int) -> None:
        self.left = wanted

    def page(self, fallback: int) -> int:
        return min(MAX_QUERY_LIMIT, self.left) if self.left > 0 else fallback
