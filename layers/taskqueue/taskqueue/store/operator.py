"""The operator's operations on one task: cancel, reprioritize, touch (move to the front), redrive; and a caller's
hang-up, which cancels a call even while a matcher holds it.

Every operation reads the task first (it needs the queue, shard, priority and order time to compute the
new index keys, and the actual state to refuse clearly), checks the lifecycle table, then makes ONE
conditional UpdateItem that names the source state and the attributes the new keys were computed from
(optimistic locking on exactly what matters). A lost condition re-reads the task and raises
ConditionFailed naming its state now.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from taskqueue.core import fairness, keys
from taskqueue.core.errors import ConditionFailed, InvalidTaskInput, InvalidTransition, TaskNotFound
from taskqueue.core.model import Task, from_item
from taskqueue.core.states import TaskStatus
from taskqueue.store.dynamo import ConditionLost
from taskqueue.store.table import READY_INDEX, STATUS_INDEX, AttributeValue, QueueTable, _key, lease_filter


class OperatorOperations(QueueTable):
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
        ``<queue>#CANCELLED#<shard>`` and is kept for DEAD_LETTER_RETENTION_SECONDS; ``redrive`` can bring it back."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        task = self._op_source(task_id, "cancel")
        set_ = self._finished_attributes(now_ms, TaskStatus.CANCELLED) | {
            "statusKey": {"S": keys.status_key(task.queue, TaskStatus.CANCELLED.value, task.shard)},
            "statusSort": {"N": str(now_ms)},
        } | self.workflow_end_attributes(task, TaskStatus.CANCELLED, now_ms)  # type: ignore[attr-defined]  # workflows
        cancelled = self._op_write(task, "cancel", TaskStatus.CANCELLED, now_ms, set_, ("readyKey", "readySort", "notBefore"), None)
        self.workflow_ended(cancelled, now_ms)  # type: ignore[attr-defined]  # what waits for it follows its policies
        return cancelled

    def hang_up(self, task_id: str, queue: str, now_ms: int | None = None) -> tuple[Task, bool]:
        """A caller hung up: their call, PENDING or TAKEN (a matcher holds it this moment), -> CANCELLED, with
        ``lastError`` "caller hung up". The match transaction names TAKEN and its lease owner, so once this write
        lands the call can never be matched; if the match committed first, the call is SUCCESS and stays so.
        Returns the task as it is afterwards and whether this call cancelled it (else it had reached a final state
        before). A write that meets the match transaction in flight (TransactionConflict, retried by the plumbing)
        or loses its condition reads the task again. A task of another queue is refused, unchanged."""
        for _ in range(_HANG_UP_ATTEMPTS):
            now = self._clock.now_ms() if now_ms is None else now_ms
            task = self.get(task_id)
            if task.queue != queue:
                raise InvalidTaskInput(f"task {task_id!r} is in queue {task.queue!r}, not a call of queue {queue!r}: nothing was changed")
            if task.status not in _HANG_UP_SOURCES:
                return task, False
            set_ = self._finished_attributes(now, TaskStatus.CANCELLED) | {
                "lastError": {"S": "caller hung up"},
                "statusKey": {"S": keys.status_key(task.queue, TaskStatus.CANCELLED.value, task.shard)},
                "statusSort": {"N": str(now)},
            }
            remove = ("readyKey", "readySort", "notBefore", "leaseOwner", "leaseExpires")
            item = self._transition(task_id, task.status, TaskStatus.CANCELLED, now_ms=now, set_=set_, remove=remove)
            if item is not None:
                return from_item(item), True
        return self.get(task_id), False

    def reprioritize(self, task_id: str, priority: int, now_ms: int | None = None) -> Task:
        """PENDING -> PENDING with a new priority: the task moves to its new place in the ReadyIndex,
        keeping its order time (so it keeps its place among tasks of the new priority)."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        keys.validate_priority(priority)
        task = self._op_source(task_id, "reprioritize")
        self._refuse_if_expired(task, "reprioritize", now_ms)
        set_ = {"priority": {"N": str(priority)}} | self._ready_attributes(task.with_changes(priority=priority))
        changed = self._op_write(
            task, "reprioritize", TaskStatus.PENDING, now_ms, set_, (),
            "enqueued = :seenEnqueued AND #ttl > :nowSeconds",
            values={":seenEnqueued": {"N": str(task.enqueued_ms)}, ":nowSeconds": {"N": str(now_ms // 1000)}},
            names={"#ttl": "ttl"},
        )
        # A delayed entry was written anew (its key moved): announce it (taskqueue.core.delayed_head).
        self.note_delayed_tasks([(task.queue, task.not_before_ms)], now_ms)
        return changed

    def touch(self, task_id: str, now_ms: int | None = None) -> Task:
        """PENDING -> PENDING with order time = now: the task takes the place a new task would take (the
        front of a LIFO queue, the back of a FIFO queue, within its priority). Its ttl, attempts and any
        not-before time are kept."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        task = self._op_source(task_id, "touch")
        self._refuse_if_expired(task, "touch", now_ms)
        set_ = {"enqueued": {"N": str(now_ms)}} | self._ready_attributes(task.with_changes(enqueued_ms=now_ms))
        touched = self._op_write(
            task, "touch", TaskStatus.PENDING, now_ms, set_, (),
            "priority = :seenPriority AND #ttl > :nowSeconds",
            values={":seenPriority": {"N": str(task.priority)}, ":nowSeconds": {"N": str(now_ms // 1000)}},
            names={"#ttl": "ttl"},
        )
        self.note_delayed_tasks([(task.queue, task.not_before_ms)], now_ms)
        return touched

    def redrive(self, task_id: str, ttl_seconds: int | None = None, now_ms: int | None = None) -> Task:
        """FAILURE or CANCELLED -> PENDING (restore): attempts reset to 0, ``lastError`` kept, a fresh ttl
        (now + ``ttl_seconds``, default DEFAULT_TTL_SECONDS), order time = now (served as a new task would
        be), back in the ReadyIndex. A redrive is an UpdateItem, not an INSERT, so the stream does not wake
        the worker: publish a wake-up (``Notifier.wake``) or let the safety net find it."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        task = self._op_source(task_id, "redrive")
        if task.workflow_id is not None:  # a workflow's task: the tasks its end blocked wait for it again first
            self.refuse_blocked_redrive(task)  # type: ignore[attr-defined]  # store/workflows.py, joined in TaskStore
            self.restore_blocked(task, now_ms)  # type: ignore[attr-defined]
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

    # ---- bulk operations of the operator tools (taskq purge, taskq retry-all) ----------------------

    def purge(self, queue: str, status: TaskStatus | str, limit: int | None = None) -> PurgeResult:
        """Delete a queue's tasks in ``status`` (at most ``limit``; None: every one), one conditional DeleteItem
        each: the condition names the state and the queue, so a task that changed meanwhile (claimed, redriven,
        cancelled) is skipped and counted, never deleted. TAKEN is refused (see ``_PURGE_REFUSALS``)."""
        state = check_purgeable(status)
        self._settings.order_of(queue)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise InvalidTaskInput(f"limit must be a whole number >= 1 (or None for every task), got {limit!r}")
        deleted = skipped = 0
        seen: set[str] = set()
        for task_id in self._ids_in_state(queue, state):
            if limit is not None and deleted + skipped >= limit:
                break
            if task_id in seen:  # an index may list a task twice while it moves within it
                continue
            seen.add(task_id)
            try:
                self._call(
                    "delete_item",
                    TableName=self._table,
                    Key=_key(task_id),
                    ConditionExpression="#status = :status AND #queue = :queue",
                    ExpressionAttributeNames={"#status": "taskStatus", "#queue": "queue"},
                    ExpressionAttributeValues={":status": {"S": state.value}, ":queue": {"S": queue}},
                )
                deleted += 1
            except ConditionLost:
                skipped += 1
        return PurgeResult(queue=queue, status=state, deleted=deleted, skipped=skipped)

    def redrive_all(
        self, queue: str, status: TaskStatus = TaskStatus.FAILURE, limit: int = 1000, ttl_seconds: int | None = None
    ) -> RedriveResult:
        """``redrive`` every FAILURE (or CANCELLED) task of a queue, up to ``limit``; a task that changed meanwhile
        is reported in ``refused`` with the reason, the others are redriven. Wake the queue afterwards."""
        redriven, refused = self.redrive_many(self.dead_letters(queue, status, limit=limit), ttl_seconds)
        return RedriveResult(queue=queue, status=status, redriven=redriven, refused=refused)

    def redrive_many(
        self, task_ids: Iterable[str], ttl_seconds: int | None = None
    ) -> tuple[list[Task], list[tuple[str, str]]]:
        """``redrive`` each task of ``task_ids`` (a chosen set: the board's filtered FAILURE tasks, a queue's dead
        letters): the tasks redriven, and (id, reason) for each one refused (not FAILURE or CANCELLED any more, or
        changed meanwhile). Wake the queues afterwards."""
        redriven: list[Task] = []
        refused: list[tuple[str, str]] = []
        for task_id in task_ids:
            try:
                redriven.append(self.redrive(task_id, ttl_seconds=ttl_seconds))
            except (InvalidTransition, ConditionFailed, TaskNotFound) as exc:
                refused.append((task_id, str(exc)))
        return redriven, refused

    def _ids_in_state(self, queue: str, status: TaskStatus) -> Iterator[str]:
        """Every id of a queue's tasks in ``status``, lazily: index queries, or a filtered Scan for the states that
        are not indexed (SUCCESS, SHED: finished work costs no index writes)."""
        if status in (TaskStatus.SUCCESS, TaskStatus.SHED):
            request: dict[str, object] = {
                "TableName": self._table,
                "FilterExpression": "#q = :q AND #s = :s",
                "ExpressionAttributeNames": {"#q": "queue", "#s": "taskStatus"},
                "ExpressionAttributeValues": {":q": {"S": queue}, ":s": {"S": status.value}},
                "ProjectionExpression": "taskId",
            }
            while True:
                response = self._call("scan", **request)
                yield from (item["taskId"]["S"] for item in response.get("Items", []))
                if "LastEvaluatedKey" not in response:
                    return
                request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        shards = range(self._settings.queue_shards)
        if status in (TaskStatus.PENDING, TaskStatus.TAKEN):  # a running task keeps its ready partition's entry
            index, hash_name = READY_INDEX, "readyKey"
            partitions = [keys.ready_key(queue, n) for n in shards] + [keys.delayed_key(queue, n) for n in shards]
            # Every group's partitions too (fair share): the groups on each shard's ring.
            partitions += [
                partition
                for n in shards
                for entry in self.whole_ring(queue, n)  # type: ignore[attr-defined]  # GroupRing, joined in TaskStore
                for partition in (fairness.group_ready_key(queue, n, entry.group),
                                  fairness.group_delayed_key(queue, n, entry.group))
            ]
            if status is TaskStatus.TAKEN:
                partitions = [p for p in partitions if not fairness.is_delayed_partition(p)]
        else:
            index, hash_name = STATUS_INDEX, "statusKey"
            partitions = [keys.status_key(queue, status.value, n) for n in shards]
        for partition in partitions:
            for item in self._query_all(
                IndexName=index,
                KeyConditionExpression="#h = :h",
                ExpressionAttributeNames={"#h": hash_name},
                ExpressionAttributeValues={":h": {"S": partition}},
                ProjectionExpression="taskId",
                limit=2**62,
                **lease_filter(index, partition, status),
            ):
                yield item["taskId"]["S"]

    def _refuse_if_expired(self, task: Task, operation: str, now_ms: int) -> None:
        if task.ttl <= now_ms // 1000:
            raise InvalidTransition(
                f"cannot {operation} task {task.task_id!r}: it is PENDING but its ttl passed "
                f"{now_ms // 1000 - task.ttl} s ago, so it will never be served (it is shed); "
                "cancel it, or create a new task"
            )


# A hang-up cancels a call that waits or that a matcher holds this moment; read again after a lost race.
_HANG_UP_SOURCES = frozenset({TaskStatus.PENDING, TaskStatus.TAKEN})
_HANG_UP_ATTEMPTS = 5

# Which operation may act on which state, and what to say otherwise.
_OPERATION_SOURCES: dict[str, frozenset[TaskStatus]] = {
    "cancel": frozenset({TaskStatus.PENDING, TaskStatus.WAITING}),
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
    TaskStatus.WAITING: "it waits for its dependencies (a workflow's task); cancel it, or its workflow",
}


_PARTICIPLES = {"cancel": "cancelled", "reprioritize": "reprioritized", "touch": "touched", "redrive": "redriven"}


def _refusal(task: Task, operation: str) -> str:
    allowed = " or ".join(sorted(_OPERATION_SOURCES[operation]))
    hint = _HINTS.get(task.status)
    return (
        f"cannot {operation} task {task.task_id!r}: it is {task.status}, and only a {allowed} task can be "
        f"{_PARTICIPLES[operation]}" + (f" ({hint})" if hint else "")
    )


@dataclass(frozen=True)
class PurgeResult:
    """What ``purge`` did: ``deleted`` tasks, and ``skipped`` ones that changed state (or went) meanwhile."""

    queue: str
    status: TaskStatus
    deleted: int
    skipped: int


@dataclass(frozen=True)
class RedriveResult:
    """What ``redrive_all`` did: the tasks now PENDING, and (id, reason) of those that changed meanwhile."""

    queue: str
    status: TaskStatus
    redriven: list[Task]
    refused: list[tuple[str, str]]


# Why a state cannot be purged. TAKEN: a worker holds the task and is running it; deleting the item would not
# stop the work, the worker could not record the outcome, and the running limit's slot would wait for its lease.
_PURGE_REFUSALS: dict[TaskStatus, str] = {
    TaskStatus.TAKEN: (
        "TAKEN tasks are being run by a worker, and deleting them would not stop that work (the worker could not "
        "record the outcome either); pause the queue, wait for them to finish or for their leases to expire, "
        "then purge FAILURE or PENDING"
    ),
}


def check_purgeable(status: TaskStatus | str) -> TaskStatus:
    """The state to purge, or a clear refusal (an unknown state; TAKEN, see ``_PURGE_REFUSALS``)."""
    try:
        state = TaskStatus(str(status).upper())
    except ValueError:
        raise InvalidTaskInput(f"unknown state {status!r}; states: {', '.join(s.value for s in TaskStatus)}") from None
    if state in _PURGE_REFUSALS:
        raise InvalidTransition(f"cannot purge {state} tasks: {_PURGE_REFUSALS[state]}")
    return state
