"""The queue table's plumbing: the item shape of a transition, batched reads and writes, error translation.

Every state change is one conditional UpdateItem that names the state it comes from; the transition is checked
against the lifecycle table before any request is sent (``_transition_request``). A write that loses its condition
(another worker claimed first, the lease passed, the task expired, another transaction held the item) is a domain
outcome (``None``/``False``), never an exception; other ``ClientError`` codes become ``StoreError`` with a message
saying what to check (see ``taskqueue.store.dynamo``).

Two times bound a task: ``ttl`` (epoch s), its shed deadline, which the claim condition and the ReadyIndex use; and
``deleteAt`` (epoch s), the table's TTL attribute, when DynamoDB may delete the item. While a task waits they are
equal; a claim moves ``deleteAt`` past the lease plus the retention, so DynamoDB never deletes a task under its worker.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

from taskqueue.core import fairness, keys
from taskqueue.core.clock import Clock, SystemClock
from taskqueue.core.errors import TaskNotFound, TaskQueueError
from taskqueue.core.model import Task, from_item, ready_index_attributes, to_item
from taskqueue.core.settings import Settings
from taskqueue.core.states import InvalidTransition, TaskStatus, check_transition
from taskqueue.store import dynamo
from taskqueue.store.dynamo import ConditionLost, make_client
from taskqueue.store.page_reads import FirstPages
from taskqueue.store.unmarked_leases import UnmarkedLeases

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
    group: str | None = None  # fair share's group (taskqueue.core.fairness); None: the default group
    delayed: bool = False  # read from a delayed partition (its not-before time is a due time, never a lease)

    @property
    def partition(self) -> str:  # the ReadyIndex partition (readyKey) it was read from
        return (fairness.delayed_partition if self.delayed else fairness.ready_partition)(self.queue, self.shard, self.group)

    @property
    def leased(self) -> bool:
        """A TAKEN task's entry: a ready partition's entry with a not-before time, which is its lease's expiry
        (taskqueue.core.keys). Claimable again once the lease passes: its worker died."""
        return not self.delayed and self.not_before_ms is not None


@dataclass(frozen=True)
class CreateResult:
    created: int
    already_existed: int


class QueueTable:
    """The base of ``TaskStore``: the table, its settings and clock, and the request plumbing every concern shares."""

    def __init__(self, client: Any, settings: Settings, clock: Clock | None = None) -> None:
        self._db = client
        self._settings = settings
        self._table = settings.queue_table_name
        self._clock = clock or SystemClock()
        self._shed: Counter[str] = Counter()
        self._recovered: Counter[tuple[str, str]] = Counter()  # (queue, new status) -> leases a look recovered
        self._shed_lock = threading.Lock()
        # Ring entries this store wrote lately (store/groups.py): (queue, shard, group) -> when (epoch ms).
        self._activated: dict[tuple[str, int, str], int] = {}
        self._activated_lock = threading.Lock()
        self._flagged: set[str] = set()  # queues whose record this store marked ``hasGroups``
        # Ring entries' stamps as this store's looks first saw them: (queue, shard, group) -> (stamp, when, epoch ms).
        self._stamps_seen: dict[tuple[str, int, str], tuple[str, int]] = {}
        # Ready partition -> how many running tasks' entries (leased) its last look passed over (store/finding.py).
        self._held_seen: dict[str, int] = {}
        self._unmarked = UnmarkedLeases()  # running tasks whose lease is not on their index entry (unmarked_leases.py)
        # (queue, shard) -> its ring fitted one page when a look last read it whole: the next look reads it in one query.
        self._small_ring: dict[tuple[str, int], bool] = {}
        self._first_page_reads = FirstPages(lambda operation, **request: self._call(operation, **request))  # page_reads.py

    @classmethod
    def from_settings(cls, settings: Settings, clock: Clock | None = None) -> Self:
        return cls(make_client(), settings, clock)

    @property
    def settings(self) -> Settings:
        return self._settings

    def put_tasks(self, tasks: Sequence[Task], *, idempotent: bool = False) -> CreateResult:
        """Write new PENDING tasks. With ``idempotent`` (caller-chosen ids), an id that exists is left alone."""
        for task in tasks:
            if task.status is not TaskStatus.PENDING:  # a transition check would pass SUCCESS (the match's own)
                raise InvalidTransition(
                    f"a new task must be PENDING, not {task.status}: create it, then let a worker move it on"
                )
        # Groups go on the ring before their tasks are written (a producer that dies after its write strands nothing)
        # and again after, if the write took longer than a ring entry is reused (store/groups.py).
        self.note_groups(tasks, reuse=True)
        if idempotent:
            result = self._put_if_absent(tasks)
        else:
            requests = [
                {"PutRequest": {"Item": to_item(t, self._settings.order_of(t.queue))}} for t in tasks
            ]
            for start in range(0, len(requests), _BATCH_WRITE_LIMIT):
                self._batch_write(requests[start : start + _BATCH_WRITE_LIMIT])
            result = CreateResult(created=len(tasks), already_existed=0)
        # Delayed tasks are announced on the queue's record once written (taskqueue.core.delayed_head), and every
        # group is on the ring, before the producer's wake-up.
        self.note_groups(tasks, reuse=True)
        self.note_delayed_tasks((t.queue, t.not_before_ms) for t in tasks)
        return result

    def note_groups(self, tasks: Iterable[Task], now_ms: int | None = None, *, reuse: bool = False) -> int:
        """Put grouped PENDING tasks' groups on the ring: ``store.groups.GroupRing``, joined in TaskStore."""
        raise NotImplementedError("QueueTable is a base: use TaskStore, which keeps the ring of groups")

    def note_delayed_tasks(self, entries: Iterable[tuple[str, int | None]], now_ms: int | None = None) -> None:
        """Announce delayed entries on their queues' records: ``store.delayed.DelayedHeads``, joined in TaskStore."""
        raise NotImplementedError("QueueTable is a base: use TaskStore, which announces delayed entries")

    def put_tasks_once(self, tasks: Sequence[Task]) -> CreateResult:
        """Write new PENDING tasks whose ids derive from one request, skipping ids that exist: a retry of the
        same request (after a partial write) creates only what is missing and never resets a task a worker
        already took. One BatchGetItem per 100 ids, then BatchWriteItem of the rest."""
        existing = {task.task_id for task in self._get_many([t.task_id for t in tasks])}
        missing = [t for t in tasks if t.task_id not in existing]
        if missing:
            self.put_tasks(missing)
        else:  # a retry after a write whose ring entry was lost: the group is put back on the ring
            self.note_groups(tasks, reuse=True)
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

    def _get_many(self, task_ids: Sequence[str]) -> list[Task]:
        """The tasks of ``task_ids`` in that order (BatchGetItem, strongly consistent); vanished ids skipped."""
        unique = list(dict.fromkeys(task_ids))
        found: dict[str, Task] = {}
        for start in range(0, len(unique), _BATCH_GET_LIMIT):
            keys_ = [_key(t) for t in unique[start : start + _BATCH_GET_LIMIT]]
            for item in self._batch_get({self._table: {"Keys": keys_, "ConsistentRead": True}}):
                task = from_item(item)
                found[task.task_id] = task
        return [found[t] for t in task_ids if t in found]

    def _batch_get(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        """The items of one BatchGetItem request (up to 100 keys), its unprocessed keys asked for again."""
        items: list[dict[str, Any]] = []
        for round_number in range(_MAX_BATCH_ROUNDS):
            response = self._call("batch_get_item", RequestItems=request)
            items += response.get("Responses", {}).get(self._table, [])
            request = response.get("UnprocessedKeys") or {}
            if not request:
                return items
            # Unprocessed keys mean the table is throttling: back off with jitter before the retry.
            self._clock.sleep(random.uniform(0, 0.05 * 2**round_number))
        left = sum(len(v.get("Keys", [])) for v in request.values())
        raise StoreError(f"{left} item(s) were still unread after {_MAX_BATCH_ROUNDS} BatchGetItem rounds; retry later")

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

    def _ready_attributes(self, task: Task) -> dict[str, AttributeValue]:
        """A waiting task's ReadyIndex entry and its not-before time; DynamoDB may delete it at its ttl."""
        attributes = ready_index_attributes(task, self._settings.order_of(task.queue))
        attributes["deleteAt"] = {"N": str(task.ttl)}
        if task.not_before_ms is not None:
            attributes["notBefore"] = {"N": str(task.not_before_ms)}
        return attributes

    def _lease_attributes(self, expires_ms: int, *, mark: bool = True) -> dict[str, AttributeValue]:
        # The item outlives its lease by the retention: a task running past its ttl is never deleted under its
        # worker, and a crashed worker's task stays findable for lease recovery. notBefore: the lease marked on the
        # task's ReadyIndex entry, where a look passes it over until it expires (not yet: store/unmarked_leases.py).
        deletion = {"N": str(expires_ms // 1000 + 1 + self._settings.retention_seconds)}
        return {"leaseExpires": {"N": str(expires_ms)}, "deleteAt": deletion, **({"notBefore": {"N": str(expires_ms)}} if mark else {})}

    def _finished_attributes(self, now_ms: int, status: TaskStatus) -> dict[str, AttributeValue]:
        """When DynamoDB may delete a task that finished in ``status``: dead letters (FAILURE, CANCELLED) after
        DEAD_LETTER_RETENTION_SECONDS, so an operator can still inspect and redrive them; the rest (SUCCESS, SHED)
        after RETENTION_SECONDS, so the table does not grow without bound."""
        return {"deleteAt": {"N": str(now_ms // 1000 + retention_of(self._settings, status))}}

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
        self._unmarked.done(task.task_id)  # written or not, the task is no longer this store's to run
        return written is not None

    def _transition(self, task_id: str, source: TaskStatus, target: TaskStatus, **request: Any) -> dict[str, Any] | None:
        """One conditional UpdateItem moving a task from ``source`` to ``target`` (arguments as for
        ``_transition_request``); the new item, or None if the condition lost."""
        try:
            response = self._call("update_item", **self._transition_request(task_id, source, target, **request))
        except ConditionLost:
            return None
        item = response["Attributes"]
        if target is TaskStatus.PENDING and "taskGroup" in item:  # back to waiting: its group goes on the ring
            self.note_groups([from_item(item)])
        return item

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
    partition = item["readyKey"]["S"]
    delayed = fairness.is_delayed_partition(partition)
    if delayed:
        _, sort = keys.parse_delayed_sort(sort)
    return Candidate(
        ready_sort=sort,
        task_id=item["taskId"]["S"],
        queue=queue,
        shard=shard,
        ttl=int(item["ttl"]["N"]),
        not_before_ms=int(item["notBefore"]["N"]) if "notBefore" in item else None,
        group=fairness.group_of_partition(partition),
        delayed=delayed,
    )


def lease_filter(index: str, partition: str, status: TaskStatus) -> dict[str, str]:
    """The filter telling a ready partition's running tasks (their lease marked as ``notBefore``) from its waiting
    ones: TAKEN keeps the marked entries, any other state the others; none for a delayed partition or another index."""
    if index != READY_INDEX or fairness.is_delayed_partition(partition):
        return {}
    return {"FilterExpression": "attribute_exists(notBefore)" if status is TaskStatus.TAKEN else "attribute_not_exists(notBefore)"}


def is_claimable(ttl: int, not_before_ms: int | None, now_ms: int) -> bool:
    """A task may be claimed only before its ttl (epoch s) and at or after its not-before time (epoch ms)."""
    return ttl > now_ms // 1000 and (not_before_ms is None or not_before_ms <= now_ms)


DEAD_LETTERS: frozenset[TaskStatus] = frozenset({TaskStatus.FAILURE, TaskStatus.CANCELLED})
def retention_of(settings: Settings, status: TaskStatus) -> int:
    """Seconds a task finished in ``status`` is kept: the dead-letter retention for FAILURE and CANCELLED."""
    return settings.dead_letter_retention_seconds if status in DEAD_LETTERS else settings.retention_seconds


def _key(task_id: str) -> dict[str, AttributeValue]:
    return {"taskId": {"S": task_id}}
