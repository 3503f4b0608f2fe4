"""The only module that talks to DynamoDB about tasks.

Every state change is one conditional UpdateItem that names the state it comes from; the transition is
checked against the lifecycle table before any request is sent. A write that loses its condition (another
worker claimed first, the lease passed, the task expired, another transaction held the item) is a domain
outcome (``None``/``False``), never an exception; other ``ClientError`` codes become ``StoreError`` with a
message saying what to check (see ``taskqueue.dynamo``).

Two times bound a task: ``ttl`` (epoch s), its shed deadline, which the claim condition and the ReadyIndex
use; and ``deleteAt`` (epoch s), the table's TTL attribute, when DynamoDB may delete the item. While a task
waits they are equal; a claim moves ``deleteAt`` past the lease plus the retention, so DynamoDB never
deletes a task under its worker. A reader that meets a PENDING entry past its ttl sheds it (PENDING -> SHED,
one conditional write that takes it out of the ReadyIndex), so expired entries that DynamoDB has not deleted
yet (it deletes "within a few days") never hide live work.

This module is over 400 lines: it is the one adapter of the queue table, and its transitions share one
request builder (``_transition_request``); the operator operations and listings at the end use the same.
"""

from __future__ import annotations

import base64
import heapq
import itertools
import json
import random
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from taskqueue import dynamo, keys
from taskqueue.clock import Clock, SystemClock
from taskqueue.dynamo import ConditionLost, count_all, make_client
from taskqueue.errors import ConditionFailed, InvalidTaskInput, InvalidTransition, TaskNotFound, TaskQueueError
from taskqueue.model import Task, encode_json, from_item, ready_index_attributes, to_item
from taskqueue.settings import Settings
from taskqueue.states import TaskStatus, check_transition

__all__ = ["Candidate", "CreateResult", "StoreError", "TaskStore", "count_all", "is_claimable", "make_client"]

READY_INDEX = "ReadyIndex"
STATUS_INDEX = "StatusIndex"
_BATCH_WRITE_LIMIT = 25
_BATCH_GET_LIMIT = 100
_MAX_BATCH_ROUNDS = 8

AttributeValue = dict[str, Any]


class StoreError(TaskQueueError):
    """DynamoDB refused a request for a reason other than a lost condition."""


@dataclass(frozen=True, order=True)
class Candidate:
    """A PENDING task as the ReadyIndex shows it: enough to decide whether to try a claim."""

    ready_sort: str
    task_id: str
    queue: str
    shard: int
    ttl: int
    not_before_ms: int | None


@dataclass(frozen=True)
class CreateResult:
    created: int
    already_existed: int


class TaskStore:
    def __init__(self, client: Any, settings: Settings, clock: Clock | None = None) -> None:
        self._db = client
        self._settings = settings
        self._table = settings.queue_table_name
        self._clock = clock or SystemClock()
        self._shed: Counter[str] = Counter()
        self._shed_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings, clock: Clock | None = None) -> TaskStore:
        return cls(make_client(), settings, clock)

    @property
    def settings(self) -> Settings:
        return self._settings

    # ---- creating and reading ---------------------------------------------------------------

    def put_tasks(self, tasks: Sequence[Task], *, idempotent: bool = False) -> CreateResult:
        """Write new PENDING tasks. With ``idempotent`` (caller-chosen ids), an id that exists is left alone."""
        for task in tasks:
            check_transition(TaskStatus.PENDING, task.status)
        if idempotent:
            return self._put_if_absent(tasks)
        requests = [
            {"PutRequest": {"Item": to_item(t, self._settings.order_of(t.queue))}} for t in tasks
        ]
        for start in range(0, len(requests), _BATCH_WRITE_LIMIT):
            self._batch_write(requests[start : start + _BATCH_WRITE_LIMIT])
        return CreateResult(created=len(tasks), already_existed=0)

    def put_tasks_once(self, tasks: Sequence[Task]) -> CreateResult:
        """Write new PENDING tasks whose ids derive from one request, skipping ids that exist: a retry of the
        same request (after a partial write) creates only what is missing and never resets a task a worker
        already took. One BatchGetItem per 100 ids, then BatchWriteItem of the rest."""
        existing = {task.task_id for task in self._get_many([t.task_id for t in tasks])}
        missing = [t for t in tasks if t.task_id not in existing]
        if missing:
            self.put_tasks(missing)
        return CreateResult(created=len(missing), already_existed=len(tasks) - len(missing))

    def _put_if_absent(self, tasks: Sequence[Task]) -> CreateResult:
        created = 0
        for task in tasks:
            try:
                self._call(
                    "put_item",
                    TableName=self._table,
                    Item=to_item(task, self._settings.order_of(task.queue)),
                    ConditionExpression="attribute_not_exists(taskId)",
                )
                created += 1
            except ConditionLost:
                pass
        return CreateResult(created=created, already_existed=len(tasks) - created)

    def _batch_write(self, requests: list[dict[str, Any]]) -> None:
        pending = {self._table: requests}
        for round_number in range(_MAX_BATCH_ROUNDS):
            response = self._call("batch_write_item", RequestItems=pending)
            pending = response.get("UnprocessedItems") or {}
            if not pending:
                return
            # Unprocessed items mean the table is throttling: back off with jitter before the retry.
            self._clock.sleep(random.uniform(0, 0.05 * 2**round_number))
        left = sum(len(v) for v in pending.values())
        raise StoreError(f"{left} task(s) were still unprocessed after {_MAX_BATCH_ROUNDS} BatchWriteItem rounds; retry later")

    def get(self, task_id: str) -> Task:
        response = self._call("get_item", TableName=self._table, Key=_key(task_id), ConsistentRead=True)
        if "Item" not in response:
            raise TaskNotFound(f"no task {task_id!r} in table {self._table} (never created, or removed by TTL)")
        return from_item(response["Item"])

    # ---- finding work -----------------------------------------------------------------------

    def candidates(self, queue: str, limit: int, now_ms: int | None = None, *, shed: bool = True) -> list[Candidate]:
        """Up to ``limit`` claimable tasks of a queue in the order it serves them (across all shards).

        Each shard's ready partition is read newest key first, and the due entries of its delayed partition
        are merged in by their ready sort key. An entry past its ttl is shed (``shed``; operators' reads pass
        False and merely skip it), so expired entries cost one write once and never hide live work."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        self._settings.order_of(queue)
        per_shard = [
            heapq.merge(
                sorted(self._due_delayed(queue, shard, now_ms, limit, shed), reverse=True),
                self._claimable_ready(queue, shard, now_ms, shed),
                reverse=True,
            )
            for shard in range(self._settings.queue_shards)
        ]
        return list(itertools.islice(heapq.merge(*per_shard, reverse=True), limit))

    def has_claimable(self, queue: str, now_ms: int | None = None) -> bool:
        return bool(self.candidates(queue, 1, now_ms))

    def next_due_ms(self, queue: str, now_ms: int | None = None) -> int | None:
        """The earliest not-before time of a queue's delayed tasks (a retry's backoff, a delayed task) that
        can still run (due before its ttl), whether or not it is due already; ``None`` if there is none.
        Lets a worker wait for a retry that falls due inside its budget instead of stranding it."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        due: list[int] = []
        for shard in range(self._settings.queue_shards):
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
            set_=self._finished_attributes(now_ms),
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

    def _claimable_ready(self, queue: str, shard: int, now_ms: int, shed: bool) -> Iterator[Candidate]:
        for entry in self._index_entries(keys.ready_key(queue, shard), queue, shard, newest_first=True):
            if is_claimable(entry.ttl, entry.not_before_ms, now_ms):
                yield entry
            elif entry.ttl <= now_ms // 1000 and shed:
                self.shed(entry, now_ms)

    def _due_delayed(self, queue: str, shard: int, now_ms: int, limit: int, shed: bool) -> list[Candidate]:
        """Up to ``limit`` entries of the delayed partition that are due now, the earliest due first."""
        found: list[Candidate] = []
        until = keys.delayed_until(now_ms)
        for entry in self._index_entries(keys.delayed_key(queue, shard), queue, shard, newest_first=False, until=until):
            if is_claimable(entry.ttl, entry.not_before_ms, now_ms):
                found.append(entry)
                if len(found) >= limit:
                    break
            elif entry.ttl <= now_ms // 1000 and shed:
                self.shed(entry, now_ms)
        return found

    def _index_entries(
        self, partition: str, queue: str, shard: int, *, newest_first: bool, until: str | None = None
    ) -> Iterator[Candidate]:
        """Lazily walks one ReadyIndex partition page by page (ready or delayed), as Candidates."""
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
            "Limit": self._settings.page_size,
        }
        while True:
            response = self._call("query", **kwargs)
            for item in response.get("Items", []):
                yield candidate_of(item, queue, shard)
            if "LastEvaluatedKey" not in response:
                return
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    # ---- transitions ------------------------------------------------------------------------

    def claim(self, candidate: Candidate, owner: str, now_ms: int | None = None) -> Task | None:
        """PENDING -> TAKEN with a lease; ``None`` if someone else got it or it is no longer claimable."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        expires = now_ms + self._settings.lease_seconds * 1000
        item = self._transition(
            candidate.task_id,
            TaskStatus.PENDING,
            TaskStatus.TAKEN,
            now_ms=now_ms,
            set_={
                "leaseOwner": {"S": owner},
                "statusKey": {"S": keys.status_key(candidate.queue, TaskStatus.TAKEN.value, candidate.shard)},
                **self._lease_attributes(expires),
            },
            remove=("readyKey", "readySort", "notBefore"),
            count_attempt=True,
            # DynamoDB's TTL deletes late: an expired task must be refused here, not only skipped above.
            condition="#ttl > :nowSeconds AND (attribute_not_exists(notBefore) OR notBefore <= :now)",
            names={"#ttl": "ttl"},
            values={":nowSeconds": {"N": str(now_ms // 1000)}},
        )
        return from_item(item) if item is not None else None

    def complete(self, task: Task, owner: str, result: Mapping[str, Any] | None = None, now_ms: int | None = None) -> bool:
        """TAKEN -> SUCCESS, only by the lease owner while the lease holds."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        set_ = self._finished_attributes(now_ms)
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
        set_ = self._finished_attributes(now_ms) | {
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
        return self._owned_transition(task, owner, TaskStatus.PENDING, now_ms, set_, ("statusKey", "statusSort"))

    def completion_update(
        self, task: Task, owner: str, result: Mapping[str, Any] | None = None, now_ms: int | None = None
    ) -> dict[str, Any]:
        """The ``Update`` of a TransactWriteItems entry that completes ``task`` (TAKEN -> SUCCESS) under the
        same conditions as ``complete``, for callers that must finish a task atomically with other writes."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        set_ = self._finished_attributes(now_ms)
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

    def _status_index_ids(
        self, queue: str, status: TaskStatus, limit: int, *, until_ms: int | None = None, newest_first: bool = False
    ) -> list[str]:
        """Ids in a queue's StatusIndex partitions for ``status`` (sort key up to ``until_ms``), shard by shard."""
        found: list[str] = []
        for shard in range(self._settings.queue_shards):
            if len(found) >= limit:
                break
            condition = "statusKey = :k"
            values = {":k": {"S": keys.status_key(queue, status.value, shard)}}
            if until_ms is not None:
                condition += " AND statusSort <= :until"
                values[":until"] = {"N": str(until_ms)}
            found += [
                item["taskId"]["S"]
                for item in self._query_all(
                    IndexName=STATUS_INDEX,
                    KeyConditionExpression=condition,
                    ExpressionAttributeValues=values,
                    ScanIndexForward=not newest_first,
                    limit=limit - len(found),
                )
            ]
        return found

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
            set_ = self._finished_attributes(now_ms) | {
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
        return target if written is not None else None

    # ---- operations on waiting and dead-lettered tasks (see the notes at the end of the module) ----

    def _op_source(self, task_id: str, operation: str) -> Task:
        task: Task = self.get(task_id)
        if task.status not in _OPERATION_SOURCES[operation]:
            raise InvalidTransition(_refusal(task, operation))
        return task

    def _op_write(
        self,
        task: Task,
        operation: str,
        target: TaskStatus,
        now_ms: int,
        set_: dict[str, AttributeValue],
        remove: tuple[str, ...],
        condition: str | None,
        values: Mapping[str, AttributeValue] | None = None,
        names: Mapping[str, str] | None = None,
    ) -> Task:
        item = self._transition(
            task.task_id, task.status, target, now_ms=now_ms, set_=set_, remove=remove,
            condition=condition, values=values, names=names,
        )
        if item is None:
            try:
                now = self.get(task.task_id)
            except TaskNotFound:
                raise ConditionFailed(f"cannot {operation} task {task.task_id!r}: it was removed meanwhile") from None
            raise ConditionFailed(
                f"cannot {operation} task {task.task_id!r}: it changed while the operation ran "
                f"(it was {task.status}, it is {now.status} now); read it again and retry"
            )
        return from_item(item)

    def cancel(self, task_id: str, now_ms: int | None = None) -> Task:
        """PENDING -> CANCELLED. The task leaves the ReadyIndex, is findable in the StatusIndex under
        ``<queue>#CANCELLED#<shard>`` and keeps the retention ttl; ``redrive`` can bring it back."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        task = self._op_source(task_id, "cancel")
        set_ = self._finished_attributes(now_ms) | {
            "statusKey": {"S": keys.status_key(task.queue, TaskStatus.CANCELLED.value, task.shard)},
            "statusSort": {"N": str(now_ms)},
        }
        return self._op_write(task, "cancel", TaskStatus.CANCELLED, now_ms, set_, ("readyKey", "readySort", "notBefore"), None)

    def reprioritize(self, task_id: str, priority: int, now_ms: int | None = None) -> Task:
        """PENDING -> PENDING with a new priority: the task moves to its new place in the ReadyIndex,
        keeping its order time (so it keeps its place among tasks of the new priority)."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        keys.validate_priority(priority)
        task = self._op_source(task_id, "reprioritize")
        self._refuse_if_expired(task, "reprioritize", now_ms)
        set_ = {"priority": {"N": str(priority)}} | self._ready_attributes(task.with_changes(priority=priority))
        return self._op_write(
            task, "reprioritize", TaskStatus.PENDING, now_ms, set_, (),
            "enqueued = :seenEnqueued AND #ttl > :nowSeconds",
            values={":seenEnqueued": {"N": str(task.enqueued_ms)}, ":nowSeconds": {"N": str(now_ms // 1000)}},
            names={"#ttl": "ttl"},
        )

    def touch(self, task_id: str, now_ms: int | None = None) -> Task:
        """PENDING -> PENDING with order time = now: the task takes the place a new task would take (the
        front of a LIFO queue, the back of a FIFO queue, within its priority). Its ttl, attempts and any
        not-before time are kept."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        task = self._op_source(task_id, "touch")
        self._refuse_if_expired(task, "touch", now_ms)
        set_ = {"enqueued": {"N": str(now_ms)}} | self._ready_attributes(task.with_changes(enqueued_ms=now_ms))
        return self._op_write(
            task, "touch", TaskStatus.PENDING, now_ms, set_, (),
            "priority = :seenPriority AND #ttl > :nowSeconds",
            values={":seenPriority": {"N": str(task.priority)}, ":nowSeconds": {"N": str(now_ms // 1000)}},
            names={"#ttl": "ttl"},
        )

    def redrive(self, task_id: str, ttl_seconds: int | None = None, now_ms: int | None = None) -> Task:
        """FAILURE or CANCELLED -> PENDING (restore): attempts reset to 0, ``lastError`` kept, a fresh ttl
        (now + ``ttl_seconds``, default DEFAULT_TTL_SECONDS), order time = now (served as a new task would
        be), back in the ReadyIndex. A redrive is an UpdateItem, not an INSERT, so the stream does not wake
        the worker: publish a wake-up (``Notifier.tail_call``) or let the safety net find it."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        task = self._op_source(task_id, "redrive")
        ttl_seconds = self._settings.default_ttl_seconds if ttl_seconds is None else ttl_seconds
        if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int) or ttl_seconds < 1:
            raise InvalidTaskInput(f"ttl_seconds must be a whole number of seconds >= 1, got {ttl_seconds!r}")
        ttl = now_ms // 1000 + ttl_seconds
        set_ = {
            "attempts": {"N": "0"},
            "enqueued": {"N": str(now_ms)},
            "ttl": {"N": str(ttl)},
        } | self._ready_attributes(task.with_changes(enqueued_ms=now_ms, ttl=ttl, not_before_ms=None, delete_at=None))
        return self._op_write(
            task, "redrive", TaskStatus.PENDING, now_ms, set_,
            ("statusKey", "statusSort", "leaseOwner", "leaseExpires", "notBefore", "result"),
            "priority = :seenPriority",
            values={":seenPriority": {"N": str(task.priority)}},
        )

    def dead_letters(self, queue: str, status: TaskStatus = TaskStatus.FAILURE, limit: int = 1000) -> list[str]:
        """Ids of a queue's FAILURE (or CANCELLED) tasks, newest first per shard, via the StatusIndex."""
        if status not in (TaskStatus.FAILURE, TaskStatus.CANCELLED):
            raise InvalidTaskInput(f"dead letters are FAILURE or CANCELLED tasks, not {status}")
        self._settings.order_of(queue)
        return self._status_index_ids(queue, status, limit, newest_first=True)

    def recover_expired_leases(self, queue: str, retry_at_ms: int | None = None, now_ms: int | None = None) -> dict[str, int]:
        """Recover every expired lease of a queue (for the safety net); counts per new status."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        outcome = {TaskStatus.PENDING.value: 0, TaskStatus.FAILURE.value: 0}
        for task_id in self.expired_leases(queue, now_ms):
            status = self.recover_lease(task_id, retry_at_ms, now_ms)
            if status is not None:
                outcome[status.value] += 1
        return outcome

    def _refuse_if_expired(self, task: Task, operation: str, now_ms: int) -> None:
        if task.ttl <= now_ms // 1000:
            raise InvalidTransition(
                f"cannot {operation} task {task.task_id!r}: it is PENDING but its ttl passed "
                f"{now_ms // 1000 - task.ttl} s ago, so it will never be served (it is shed); "
                "cancel it, or create a new task"
            )

    # ---- reads for operators ------------------------------------------------------------------

    def peek(self, queue: str, now_ms: int | None = None) -> Task | None:
        """The task the queue would serve next (highest priority, then its order), without claiming it."""
        for candidate in self.candidates(queue, 1, now_ms, shed=False):  # a read: operators count nothing
            try:
                return self.get(candidate.task_id)
            except TaskNotFound:  # removed by TTL between the index read and the get
                continue
        return None

    def list_tasks(
        self,
        queue: str | None = None,
        status: TaskStatus | str | None = None,
        limit: int = 20,
        page_token: str | None = None,
    ) -> TaskPage:
        """A page of tasks; ``queue`` None = every configured queue, ``status`` None = every index-backed
        state (PENDING, TAKEN, FAILURE, CANCELLED). One (queue, state) after another, and within each:

        - PENDING (ReadyIndex): in the order the queue serves them: higher priority first, then newest first
          (LIFO) or oldest first (FIFO). Delayed and expired-but-not-yet-deleted tasks are included.
        - TAKEN (StatusIndex, by lease expiry), FAILURE and CANCELLED (StatusIndex, by update time): newest first.
        - SUCCESS is not indexed (finished work costs no index writes): a Scan with a filter, which reads the
          whole table page by page; tasks come in table order, each page sorted newest first.

        Shards are merged. ``page_token`` is the opaque ``next_token`` of the previous page."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidTaskInput(f"limit must be a whole number from 1 to 1000, got {limit!r}")
        queues = [queue] if queue is not None else sorted(self._settings.queue_orders)
        for q in queues:
            self._settings.order_of(q)
        if status is None:
            statuses: tuple[TaskStatus, ...] = LISTABLE_BY_INDEX
        else:
            try:
                statuses = (TaskStatus(str(status).upper()),)
            except ValueError:
                raise InvalidTaskInput(
                    f"unknown state {status!r}; states: {', '.join(s.value for s in TaskStatus)}"
                ) from None
        segments = [(q, s) for s in statuses for q in queues]
        position = _decode_token(page_token, len(segments))
        tasks: list[Task] = []
        segment, cursor = position
        while segment < len(segments) and len(tasks) < limit:
            q, s = segments[segment]
            if s is TaskStatus.SUCCESS:
                ids, cursor = self._scan_page(q, s, limit - len(tasks), cursor)
            else:
                ids, cursor = self._merged_index_page(q, s, limit - len(tasks), cursor)
            tasks += self._get_many(ids)
            if cursor is None:
                segment, cursor = segment + 1, None
        token = _encode_token(segment, cursor) if segment < len(segments) else None
        return TaskPage(tasks=tasks, next_token=token)

    def _partitions(self, queue: str, status: TaskStatus) -> tuple[str, str, str, list[str]]:
        shards = range(self._settings.queue_shards)
        if status is TaskStatus.PENDING:
            partitions = [keys.ready_key(queue, n) for n in shards] + [keys.delayed_key(queue, n) for n in shards]
            return READY_INDEX, "readyKey", "readySort", partitions
        return STATUS_INDEX, "statusKey", "statusSort", [keys.status_key(queue, status.value, n) for n in shards]

    def _merged_index_page(
        self, queue: str, status: TaskStatus, limit: int, cursor: Any
    ) -> tuple[list[str], Any]:
        """Up to ``limit`` ids from every shard of a (queue, state), merged in descending sort-key order.
        The cursor is, per shard, the ExclusiveStartKey to resume from ("done" when exhausted)."""
        index, hash_name, sort_name, partitions = self._partitions(queue, status)
        cursors: list[Any] = list(cursor) if cursor else [None] * len(partitions)
        if len(cursors) != len(partitions):
            raise InvalidTaskInput("the page token is from a different shard count; start the listing again")
        fetched: list[list[dict[str, Any]]] = []
        more: list[bool] = []
        for partition, start in zip(partitions, cursors):
            if start == "done":
                fetched.append([])
                more.append(False)
                continue
            kwargs: dict[str, Any] = {
                "TableName": self._table,
                "IndexName": index,
                "KeyConditionExpression": "#h = :h",
                "ExpressionAttributeNames": {"#h": hash_name},
                "ExpressionAttributeValues": {":h": {"S": partition}},
                "ScanIndexForward": False,
                "Limit": limit,
            }
            if start:
                kwargs["ExclusiveStartKey"] = start
            items: list[dict[str, Any]] = []
            last = None
            while len(items) < limit:
                response = self._call("query", **kwargs)
                items += response.get("Items", [])
                last = response.get("LastEvaluatedKey")
                if not last:
                    break
                kwargs["ExclusiveStartKey"] = last
            fetched.append(items[:limit])
            more.append(bool(last) or len(items) > limit)

        def sort_value(item: dict[str, Any]) -> Any:
            value = item[sort_name]
            if "N" in value:
                return int(value["N"])
            # A delayed entry lists in its queue's order (its ready sort key), not by when it falls due.
            delayed = item[hash_name]["S"].endswith("#delayed")
            return keys.parse_delayed_sort(value["S"])[1] if delayed else value["S"]

        tagged = (
            [(sort_value(item), shard, item) for item in items] for shard, items in enumerate(fetched)
        )
        merged = list(heapq.merge(*tagged, key=lambda t: t[0], reverse=True))[:limit]
        taken_per_shard = [0] * len(partitions)
        for _, shard, _item in merged:
            taken_per_shard[shard] += 1
        new_cursors: list[Any] = []
        for shard, items in enumerate(fetched):
            taken = taken_per_shard[shard]
            if cursors[shard] == "done" or (taken == len(items) and not more[shard]):
                new_cursors.append("done")
            elif taken == 0:
                new_cursors.append(cursors[shard])
            else:
                last_item = items[taken - 1]
                new_cursors.append(
                    {name: last_item[name] for name in ("taskId", hash_name, sort_name)}
                )
        ids = [item["taskId"]["S"] for _, _, item in merged]
        return ids, (None if all(c == "done" for c in new_cursors) else new_cursors)

    def _scan_page(self, queue: str, status: TaskStatus, limit: int, cursor: Any) -> tuple[list[str], Any]:
        """SUCCESS tasks of a queue by a filtered Scan (documented cost: reads the whole table)."""
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "FilterExpression": "#q = :q AND #s = :s",
            "ExpressionAttributeNames": {"#q": "queue", "#s": "taskStatus", "#u": "taskUpdated"},
            "ExpressionAttributeValues": {":q": {"S": queue}, ":s": {"S": status.value}},
            "ProjectionExpression": "taskId, #u",
        }
        found: list[dict[str, Any]] = []
        start = cursor
        while len(found) < limit:
            if start:
                kwargs["ExclusiveStartKey"] = start
            kwargs["Limit"] = max(limit - len(found), 25)
            response = self._call("scan", **kwargs)
            page = response.get("Items", [])
            room = limit - len(found)
            if len(page) > room:
                # Resume after the last item kept (the table key alone is a valid ExclusiveStartKey).
                page = page[:room]
                found += page
                start = {"taskId": page[-1]["taskId"]}
                break
            found += page
            start = response.get("LastEvaluatedKey")
            if not start:
                break
        found.sort(key=lambda item: int(item["taskUpdated"]["N"]), reverse=True)
        return [item["taskId"]["S"] for item in found], start or None

    def _get_many(self, task_ids: Sequence[str]) -> list[Task]:
        """The tasks of ``task_ids`` in that order (BatchGetItem, strongly consistent); vanished ids skipped."""
        found: dict[str, Task] = {}
        unique = list(dict.fromkeys(task_ids))
        for start in range(0, len(unique), _BATCH_GET_LIMIT):
            request: dict[str, Any] = {
                self._table: {"Keys": [_key(t) for t in unique[start : start + _BATCH_GET_LIMIT]], "ConsistentRead": True}
            }
            for round_number in range(_MAX_BATCH_ROUNDS):
                response = self._call("batch_get_item", RequestItems=request)
                for item in response.get("Responses", {}).get(self._table, []):
                    task = from_item(item)
                    found[task.task_id] = task
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    break
                # Unprocessed keys mean the table is throttling: back off with jitter before the retry.
                self._clock.sleep(random.uniform(0, 0.05 * 2**round_number))
            else:
                left = sum(len(v.get("Keys", [])) for v in request.values())
                raise StoreError(
                    f"{left} task(s) were still unread after {_MAX_BATCH_ROUNDS} BatchGetItem rounds; retry later"
                )
        return [found[t] for t in task_ids if t in found]

    def stats(self, queues: Sequence[str] | None = None, include_success: bool = False, now_ms: int | None = None) -> list[QueueStats]:
        """Counts per queue and state by index queries (no table scan): PENDING by reading the ReadyIndex
        keys (the same read cost as a COUNT, and it gives the ages), TAKEN / FAILURE / CANCELLED by
        ``Select=COUNT`` on the StatusIndex. SUCCESS only with ``include_success`` (a filtered COUNT scan)."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        result: list[QueueStats] = []
        for queue in queues or sorted(self._settings.queue_orders):
            order = self._settings.order_of(queue)
            pending = claimable = delayed = expired = 0
            oldest: int | None = None
            newest: int | None = None
            partitions = [keys.ready_key(queue, n) for n in range(self._settings.queue_shards)]
            partitions += [keys.delayed_key(queue, n) for n in range(self._settings.queue_shards)]
            for partition in partitions:
                for item in self._query_all(
                    IndexName=READY_INDEX,
                    KeyConditionExpression="readyKey = :k",
                    ExpressionAttributeValues={":k": {"S": partition}},
                    ProjectionExpression="taskId, readyKey, readySort, #ttl, notBefore",
                    ExpressionAttributeNames={"#ttl": "ttl"},
                    limit=10**9,
                ):
                    pending += 1
                    entry = candidate_of(item, queue, 0)
                    if entry.ttl <= now_ms // 1000:
                        expired += 1
                        continue
                    if not is_claimable(entry.ttl, entry.not_before_ms, now_ms):
                        delayed += 1
                    else:
                        claimable += 1
                    _, enqueued, _ = keys.parse_ready_sort(entry.ready_sort, order)
                    oldest = enqueued if oldest is None else min(oldest, enqueued)
                    newest = enqueued if newest is None else max(newest, enqueued)
            counts = {TaskStatus.PENDING.value: pending}
            for status in (TaskStatus.TAKEN, TaskStatus.FAILURE, TaskStatus.CANCELLED):
                counts[status.value] = sum(
                    self._count(STATUS_INDEX, "statusKey", keys.status_key(queue, status.value, shard))
                    for shard in range(self._settings.queue_shards)
                )
            if include_success:
                counts[TaskStatus.SUCCESS.value] = self._count_scan(queue, TaskStatus.SUCCESS)
            result.append(
                QueueStats(
                    queue=queue,
                    counts=counts,
                    claimable=claimable,
                    delayed=delayed,
                    expired=expired,
                    oldest_waiting_ms=None if oldest is None else max(0, now_ms - oldest),
                    newest_waiting_ms=None if newest is None else max(0, now_ms - newest),
                )
            )
        return result

    def _count(self, index: str, hash_name: str, partition: str) -> int:
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": index,
            "KeyConditionExpression": "#h = :h",
            "ExpressionAttributeNames": {"#h": hash_name},
            "ExpressionAttributeValues": {":h": {"S": partition}},
            "Select": "COUNT",
        }
        return count_all(self._call, "query", kwargs)

    def _count_scan(self, queue: str, status: TaskStatus) -> int:
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "FilterExpression": "#q = :q AND #s = :s",
            "ExpressionAttributeNames": {"#q": "queue", "#s": "taskStatus"},
            "ExpressionAttributeValues": {":q": {"S": queue}, ":s": {"S": status.value}},
            "Select": "COUNT",
        }
        return count_all(self._call, "scan", kwargs)

    # ---- helpers ----------------------------------------------------------------------------

    def _ready_attributes(self, task: Task) -> dict[str, AttributeValue]:
        """A waiting task's ReadyIndex entry and its not-before time; DynamoDB may delete it at its ttl."""
        attributes = ready_index_attributes(task, self._settings.order_of(task.queue))
        attributes["deleteAt"] = {"N": str(task.ttl)}
        if task.not_before_ms is not None:
            attributes["notBefore"] = {"N": str(task.not_before_ms)}
        return attributes

    def _lease_attributes(self, expires_ms: int) -> dict[str, AttributeValue]:
        # The item outlives its lease by the retention: a task running past its ttl is never deleted under its
        # worker, and a crashed worker's task stays findable for lease recovery.
        return {
            "leaseExpires": {"N": str(expires_ms)},
            "statusSort": {"N": str(expires_ms)},
            "deleteAt": {"N": str(expires_ms // 1000 + 1 + self._settings.retention_seconds)},
        }

    def _finished_attributes(self, now_ms: int) -> dict[str, AttributeValue]:
        # Finished tasks keep a short retention, so the table does not grow without bound.
        return {"deleteAt": {"N": str(now_ms // 1000 + self._settings.retention_seconds)}}

    def _owned_transition(
        self,
        task: Task,
        owner: str,
        target: TaskStatus,
        now_ms: int,
        set_: dict[str, AttributeValue],
        remove: tuple[str, ...],
    ) -> bool:
        written = self._transition(
            task.task_id,
            TaskStatus.TAKEN,
            target,
            now_ms=now_ms,
            set_=set_,
            remove=("leaseOwner", "leaseExpires", *remove),
            condition="leaseOwner = :owner AND leaseExpires > :now",
            values={":owner": {"S": owner}},
        )
        return written is not None

    def _transition(self, task_id: str, source: TaskStatus, target: TaskStatus, **request: Any) -> dict[str, Any] | None:
        """One conditional UpdateItem moving a task from ``source`` to ``target`` (arguments as for
        ``_transition_request``); the new item, or None if the condition lost."""
        try:
            response = self._call("update_item", **self._transition_request(task_id, source, target, **request))
        except ConditionLost:
            return None
        return response["Attributes"]

    def _transition_request(
        self,
        task_id: str,
        source: TaskStatus,
        target: TaskStatus,
        *,
        now_ms: int,
        set_: Mapping[str, AttributeValue],
        remove: Iterable[str] = (),
        count_attempt: bool = False,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, AttributeValue] | None = None,
    ) -> dict[str, Any]:
        """The UpdateItem parameters of a transition; refuses a forbidden one before anything is sent."""
        check_transition(source, target)
        expr_names: dict[str, str] = {"#status": "taskStatus", "#updated": "taskUpdated", **(names or {})}
        expr_values: dict[str, AttributeValue] = {
            ":from": {"S": source.value},
            ":to": {"S": target.value},
            ":now": {"N": str(now_ms)},
            **(values or {}),
        }
        assignments = ["#status = :to", "#updated = :now"]
        for index, (name, value) in enumerate(set_.items()):
            expr_names[f"#s{index}"] = name
            expr_values[f":s{index}"] = value
            assignments.append(f"#s{index} = :s{index}")
        if count_attempt:
            expr_names["#attempts"] = "attempts"
            expr_values[":zero"] = {"N": "0"}
            expr_values[":one"] = {"N": "1"}
            assignments.append("#attempts = if_not_exists(#attempts, :zero) + :one")
        removals = [name for name in dict.fromkeys(remove) if name not in set_]
        for index, name in enumerate(removals):
            expr_names[f"#r{index}"] = name
        update = "SET " + ", ".join(assignments)
        if removals:
            update += " REMOVE " + ", ".join(f"#r{i}" for i in range(len(removals)))
        full_condition = "#status = :from" + (f" AND ({condition})" if condition else "")
        return {
            "TableName": self._table,
            "Key": _key(task_id),
            "UpdateExpression": update,
            "ConditionExpression": full_condition,
            "ExpressionAttributeNames": expr_names,
            "ExpressionAttributeValues": expr_values,
            "ReturnValues": "ALL_NEW",
        }

    def _query_all(self, *, limit: int, **kwargs: Any) -> Iterator[dict[str, Any]]:
        kwargs = {"TableName": self._table, **kwargs}
        seen = 0
        while seen < limit:
            response = self._call("query", **kwargs, Limit=min(100, limit - seen))
            for item in response.get("Items", []):
                seen += 1
                yield item
            if "LastEvaluatedKey" not in response:
                return
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        return dynamo.call(
            self._db, operation, table=self._table, setting="QUEUE_TABLE_NAME", error=StoreError, clock=self._clock, **kwargs
        )


def candidate_of(item: Mapping[str, Any], queue: str, shard: int) -> Candidate:
    """The Candidate of a ReadyIndex item (ready or delayed partition)."""
    sort = item["readySort"]["S"]
    if item["readyKey"]["S"].endswith("#delayed"):
        _, sort = keys.parse_delayed_sort(sort)
    return Candidate(
        ready_sort=sort,
        task_id=item["taskId"]["S"],
        queue=queue,
        shard=shard,
        ttl=int(item["ttl"]["N"]),
        not_before_ms=int(item["notBefore"]["N"]) if "notBefore" in item else None,
    )


def is_claimable(ttl: int, not_before_ms: int | None, now_ms: int) -> bool:
    """A task may be claimed only before its ttl (epoch s) and at or after its not-before time (epoch ms)."""
    return ttl > now_ms // 1000 and (not_before_ms is None or not_before_ms <= now_ms)


def _key(task_id: str) -> dict[str, AttributeValue]:
    return {"taskId": {"S": task_id}}


# ==== operations on waiting and dead-lettered tasks, and reads for operators ====================
#
# Every operation reads the task first (it needs the queue, shard, priority and order time to compute the
# new index keys, and the actual state to refuse clearly), checks the lifecycle table, then makes ONE
# conditional UpdateItem that names the source state and the attributes the new keys were computed from
# (optimistic locking on exactly what matters). A lost condition re-reads the task and raises
# ConditionFailed naming its state now.

# Which operation may act on which state, and what to say otherwise.
_OPERATION_SOURCES: dict[str, frozenset[TaskStatus]] = {
    "cancel": frozenset({TaskStatus.PENDING}),
    "reprioritize": frozenset({TaskStatus.PENDING}),
    "touch": frozenset({TaskStatus.PENDING}),
    "redrive": frozenset({TaskStatus.FAILURE, TaskStatus.CANCELLED}),
}
_HINTS: dict[TaskStatus, str] = {
    TaskStatus.TAKEN: "a worker holds its lease; wait for it to finish or for the lease to expire",
    TaskStatus.SUCCESS: "it has finished; create a new task to run it again",
    TaskStatus.FAILURE: "it is dead-lettered; redrive it first",
    TaskStatus.CANCELLED: "it was cancelled; redrive it first",
    TaskStatus.PENDING: "it is still waiting; redrive is only for FAILURE or CANCELLED tasks",
    TaskStatus.SHED: "it passed its ttl unserved (shed); create a new task to run it again",
}

# Index-backed states a listing walks by default (SUCCESS needs a scan; ask for it by name).
LISTABLE_BY_INDEX: tuple[TaskStatus, ...] = (
    TaskStatus.PENDING,
    TaskStatus.TAKEN,
    TaskStatus.FAILURE,
    TaskStatus.CANCELLED,
)


@dataclass(frozen=True)
class TaskPage:
    """One page of a listing; ``next_token`` is None on the last page."""

    tasks: list[Task]
    next_token: str | None


@dataclass(frozen=True)
class QueueStats:
    """Counts per state of one queue, and the age of its waiting work (ms; None when nothing waits).

    ``pending`` counts every PENDING item, of which ``claimable`` may be served now, ``delayed`` wait for
    a not-before time and ``expired`` are past their ttl (shed; DynamoDB TTL has not deleted them yet).
    ``counts`` has no SUCCESS entry unless asked for (a filtered scan)."""

    queue: str
    counts: dict[str, int]
    claimable: int
    delayed: int
    expired: int
    oldest_waiting_ms: int | None
    newest_waiting_ms: int | None


_PARTICIPLES = {"cancel": "cancelled", "reprioritize": "reprioritized", "touch": "touched", "redrive": "redriven"}


def _refusal(task: Task, operation: str) -> str:
    allowed = " or ".join(sorted(_OPERATION_SOURCES[operation]))
    hint = _HINTS.get(task.status)
    return (
        f"cannot {operation} task {task.task_id!r}: it is {task.status}, and only a {allowed} task can be "
        f"{_PARTICIPLES[operation]}" + (f" ({hint})" if hint else "")
    )


def _encode_token(segment: int, cursor: Any) -> str:
    raw = json.dumps({"v": 1, "seg": segment, "cur": cursor}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_token(token: str | None, segments: int) -> tuple[int, Any]:
    if not token:
        return 0, None
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        segment, cursor = int(data["seg"]), data["cur"]
        if data.get("v") != 1 or not 0 <= segment <= segments:
            raise ValueError
    except (ValueError, KeyError, TypeError):
        raise InvalidTaskInput("the page token is not valid: pass the next-page token of the same listing") from None
    return segment, cursor

