"""Reads for operators: listings with page tokens (shards merged) and per-queue counts."""

from __future__ import annotations

import base64
import heapq
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from taskqueue.core import fairness, keys
from taskqueue.core.errors import InvalidPageToken, InvalidTaskInput
from taskqueue.core.model import MAX_TASKS_PER_REQUEST, Task, derived_task_ids
from taskqueue.core.states import TaskStatus
from taskqueue.store.dynamo import count_all
from taskqueue.store.groups import GroupRing
from taskqueue.store.table import (
    _BATCH_GET_LIMIT,
    READY_INDEX,
    STATUS_INDEX,
    candidate_of,
    is_claimable,
    lease_filter,
)


class Reading(GroupRing):
    def list_tasks(
        self,
        queue: str | None = None,
        status: TaskStatus | str | None = None,
        limit: int = 20,
        page_token: str | None = None,
        group: str | None = None,
    ) -> TaskPage:
        """A page of tasks; ``queue`` None = every configured queue, ``status`` None = every index-backed
        state (PENDING, TAKEN, FAILURE, CANCELLED). One (queue, state) after another, and within each:

        - PENDING (ReadyIndex): in the order the queue serves them: higher priority first, then newest first
          (LIFO) or oldest first (FIFO). Delayed and expired-but-not-yet-deleted tasks are included.
        - TAKEN (their ReadyIndex entries, marked by their lease: every group's), in the queue's order.
        - FAILURE and CANCELLED (StatusIndex, by update time): newest first.
        - SUCCESS is not indexed (finished work costs no index writes): a Scan with a filter, which reads the
          whole table page by page; tasks come in table order, each page sorted newest first.

        Shards are merged. ``page_token`` is the opaque ``next_token`` of the previous page.

        PENDING without ``group`` walks the default group's partitions (tasks created without a group); ``group``
        (a group's name, or ``fairness.DEFAULT_GROUP``) lists that group's waiting tasks, from its own partitions
        (fair share, ``taskqueue.core.fairness``). A group is listed for PENDING only: no index holds the other
        states by group (filter their listing by ``Task.group``)."""
        if group is not None:
            if group != fairness.DEFAULT_GROUP:
                fairness.validate_group(group)
            if status is not None and str(status).upper() != TaskStatus.PENDING.value:
                raise InvalidTaskInput(f"a listing by group covers PENDING tasks only (their group's partitions), "
                                       f"not {str(status).upper()}: filter that listing by the tasks' group instead")
            status = TaskStatus.PENDING
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
            if s in (TaskStatus.SUCCESS, TaskStatus.SHED):  # not indexed
                ids, cursor = self._scan_page(q, s, limit - len(tasks), cursor)
            else:
                ids, cursor = self._merged_index_page(q, s, limit - len(tasks), cursor, group)
            tasks += self._get_many(ids)
            if cursor is None:
                segment, cursor = segment + 1, None
        token = _encode_token(segment, cursor) if segment < len(segments) else None
        return TaskPage(tasks=tasks, next_token=token)

    def _partitions(self, queue: str, status: TaskStatus, group: str | None = None) -> tuple[str, str, str, list[str]]:
        shards = range(self._settings.queue_shards)
        if status is TaskStatus.PENDING:
            if group is not None and group != fairness.DEFAULT_GROUP:
                partitions = [fairness.group_ready_key(queue, n, group) for n in shards]
                partitions += [fairness.group_delayed_key(queue, n, group) for n in shards]
            else:
                partitions = [keys.ready_key(queue, n) for n in shards] + [keys.delayed_key(queue, n) for n in shards]
            return READY_INDEX, "readyKey", "readySort", partitions
        if status is TaskStatus.TAKEN:  # running tasks keep their ready partition's entry (taskqueue.core.keys)
            partitions = [keys.ready_key(queue, n) for n in shards]
            partitions += [fairness.group_ready_key(queue, n, e.group) for n in shards for e in self.whole_ring(queue, n)]
            return READY_INDEX, "readyKey", "readySort", partitions
        return STATUS_INDEX, "statusKey", "statusSort", [keys.status_key(queue, status.value, n) for n in shards]

    def _merged_index_page(
        self, queue: str, status: TaskStatus, limit: int, cursor: Any, group: str | None = None
    ) -> tuple[list[str], Any]:
        """Up to ``limit`` ids from every shard of a (queue, state), merged in descending sort-key order.
        The cursor is, per shard, the ExclusiveStartKey to resume from ("done" when exhausted)."""
        index, hash_name, sort_name, partitions = self._partitions(queue, status, group)
        cursors: list[Any] = list(cursor) if cursor else [None] * len(partitions)
        if len(cursors) != len(partitions):
            raise InvalidPageToken("the page token is from a different shard count; start the listing again")
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
            kwargs.update(lease_filter(index, partition, status))
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
            delayed = fairness.is_delayed_partition(item[hash_name]["S"])
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

    def tasks_of_request(self, request_id: str) -> list[Task]:
        """The tasks a CreateTasks request created with ids derived from its request id (a request without taskIds
        of its own): the ids are computed (``model.derived_task_ids``), not searched for, since no index holds
        ``requestId``; read 100 per BatchGetItem until a batch finds none of them. Tasks of caller-chosen or
        random ids are found by their id."""
        found: list[Task] = []
        ids = derived_task_ids(MAX_TASKS_PER_REQUEST, request_id)
        for start in range(0, len(ids), _BATCH_GET_LIMIT):
            batch = [t for t in self._get_many(ids[start : start + _BATCH_GET_LIMIT]) if t.request_id == request_id]
            if not batch:
                break
            found += batch
        return found

    def stats(self, queues: Sequence[str] | None = None, include_success: bool = False, now_ms: int | None = None) -> list[QueueStats]:
        """Counts per queue and state by index queries (no table scan): PENDING and TAKEN by reading the ReadyIndex
        keys (the same read cost as a COUNT, and it gives the ages; a running task's entry carries its lease),
        FAILURE / CANCELLED by ``Select=COUNT`` on the StatusIndex. SUCCESS only with ``include_success`` (a filtered COUNT scan).

        PENDING counts every group's tasks: the default group's partitions and those of each group on the ring
        (``whole_ring``: the groups that may have waiting tasks); ``QueueStats.groups`` is how many such groups."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        result: list[QueueStats] = []
        for queue in queues or sorted(self._settings.queue_orders):
            order = self._settings.order_of(queue)
            pending = claimable = delayed = expired = taken = 0
            oldest: int | None = None
            newest: int | None = None
            partitions = [keys.ready_key(queue, n) for n in range(self._settings.queue_shards)]
            partitions += [keys.delayed_key(queue, n) for n in range(self._settings.queue_shards)]
            ring = [e for n in range(self._settings.queue_shards) for e in self.whole_ring(queue, n)]
            for entry in ring:
                partitions += [fairness.group_ready_key(queue, entry.shard, entry.group),
                               fairness.group_delayed_key(queue, entry.shard, entry.group)]
            for partition in partitions:
                for item in self._query_all(
                    IndexName=READY_INDEX,
                    KeyConditionExpression="readyKey = :k",
                    ExpressionAttributeValues={":k": {"S": partition}},
                    ProjectionExpression="taskId, readyKey, readySort, #ttl, notBefore",
                    ExpressionAttributeNames={"#ttl": "ttl"},
                    limit=10**9,
                ):
                    entry = candidate_of(item, queue, 0)
                    if entry.leased:  # a running task: its entry carries its lease
                        taken += 1
                        continue
                    pending += 1
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
            counts = {TaskStatus.PENDING.value: pending, TaskStatus.TAKEN.value: taken}
            for status in (TaskStatus.FAILURE, TaskStatus.CANCELLED):
                counts[status.value] = self.count(queue, status)
            if include_success:
                counts[TaskStatus.SUCCESS.value] = self.count(queue, TaskStatus.SUCCESS)
            result.append(
                QueueStats(
                    queue=queue,
                    counts=counts,
                    claimable=claimable,
                    delayed=delayed,
                    expired=expired,
                    oldest_waiting_ms=None if oldest is None else max(0, now_ms - oldest),
                    newest_waiting_ms=None if newest is None else max(0, now_ms - newest),
                    groups=len({e.group for e in ring}),
                )
            )
        return result

    def count(self, queue: str, status: TaskStatus) -> int:
        """How many of a queue's tasks are in ``status``: COUNT queries on the index, or a filtered COUNT scan
        (the whole table) for SUCCESS and SHED, which are not indexed."""
        self._settings.order_of(queue)
        if status in (TaskStatus.SUCCESS, TaskStatus.SHED):
            return self._count_scan(queue, status)
        index, hash_name, _, partitions = self._partitions(queue, status)
        return sum(self._count(index, hash_name, partition, status) for partition in partitions)

    def _count(self, index: str, hash_name: str, partition: str, status: TaskStatus) -> int:
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": index,
            "KeyConditionExpression": "#h = :h",
            "ExpressionAttributeNames": {"#h": hash_name},
            "ExpressionAttributeValues": {":h": {"S": partition}},
            "Select": "COUNT",
        }
        kwargs.update(lease_filter(index, partition, status))
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
    ``counts`` has no SUCCESS entry unless asked for (a filtered scan). Every group's waiting tasks are counted."""

    queue: str
    counts: dict[str, int]
    claimable: int
    delayed: int
    expired: int
    oldest_waiting_ms: int | None
    newest_waiting_ms: int | None
    groups: int = 0  # named groups on the ring (fair share): groups that may have waiting tasks


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
        raise InvalidPageToken("the page token is not valid: pass the next-page token of the same listing") from None
    return segment, cursor
