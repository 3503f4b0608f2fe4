"""What an operator sees of fair share's groups (``taskqueue.core.fairness``): per group, its waiting tasks (a bounded
count), its running tasks, the age of its oldest waiting task, its limits (its own or the queue's defaults) and its
pause; the noisiest groups first. ``taskq groups``, the board's groups page and ``TaskQueueClient.group`` read it.

Every read is bounded, and none is a Scan:

- the groups: the ring (``<queue>#<shard>#groups``), at most ``ring_cap`` entries per shard (one query each), and at
  most ``max_groups`` of them viewed (a group with running tasks stays on the ring, store/finding.py);
- waiting: each group's ready and delayed partitions read by key (entries carry ``ttl``, ``notBefore`` and the sort
  key, from which the order time comes) up to ``cap`` entries each: the same read units as a COUNT query of them
  (DynamoDB bills the index bytes passed), and it gives the oldest age as well. A partition at the cap says so;
- running: the running tasks' entries (a TAKEN task keeps its ready partition's entry, its lease as ``notBefore``:
  taskqueue.core.keys) among the first ``running_cap`` entries of each ready partition, where a queue's running tasks
  sit (its newest in LIFO, its oldest in FIFO); the partition names the group;
- limits: one eventually consistent BatchGetItem per 100 groups (their settings items).

About one read unit per group and shard when its partitions are small; a big partition costs what its entries up to
the cap weigh (~16 units per 1,000 entries).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from taskqueue.core import fairness, keys
from taskqueue.core.fairness import DEFAULT_GROUP, GroupLimits
from taskqueue.core.states import TaskStatus
from taskqueue.store.counts import Counts
from taskqueue.store.table import _BATCH_GET_LIMIT, READY_INDEX, _key, candidate_of, is_claimable, lease_filter

CAP = 1000  # entries read per group partition, at most
RING_CAP = 1000  # ring entries read per shard, at most
MAX_GROUPS = 200  # groups one view reads the partitions of, at most
RUNNING_CAP = 1000  # TAKEN tasks whose groups a view reads, at most
SETTINGS = ("concurrency", "rate", "pause")


@dataclass(frozen=True)
class GroupView:
    """One group as the operator sees it. ``group`` is ``fairness.DEFAULT_GROUP`` for the tasks without one (no
    per-group limit applies to them). ``waiting`` counts PENDING tasks before their ttl (``delayed`` of them not due
    yet); ``waiting_complete`` False: a partition held more than the cap (at least ``waiting``). ``own``: the settings
    the group has of its own (``concurrency``, ``rate``, ``pause``); the others are the queue's defaults."""

    queue: str
    group: str
    waiting: int
    delayed: int
    waiting_complete: bool
    running: int
    oldest_waiting_ms: int | None
    limits: GroupLimits
    own: frozenset[str]
    on_ring: bool

    @property
    def noise(self) -> int:
        """How much of the queue the group asks for: its waiting and running tasks (noisiest first sorts by it)."""
        return self.waiting + self.running

    def paused(self, now_ms: int) -> bool:
        return self.limits.paused(now_ms)


@dataclass(frozen=True)
class GroupsView:
    """A queue's groups, noisiest first. ``groups_seen``: groups on the ring read (and running); ``complete`` False
    when a bound was met (the ring held more than its cap, more groups than ``max_groups``, or more running tasks than
    the cap): some groups are then missing, or their counts are lower bounds."""

    queue: str
    groups: list[GroupView]
    groups_seen: int
    ring_complete: bool
    running_complete: bool
    now_ms: int

    @property
    def complete(self) -> bool:
        return (self.ring_complete and self.running_complete and self.groups_seen <= len(self.groups)
                and all(g.waiting_complete for g in self.groups))

    @property
    def waiting(self) -> int:
        return sum(g.waiting for g in self.groups)


@dataclass(frozen=True)
class _Waiting:
    live: int = 0
    delayed: int = 0
    complete: bool = True
    oldest_ms: int | None = None

    def __add__(self, other: _Waiting) -> _Waiting:
        oldest = [t for t in (self.oldest_ms, other.oldest_ms) if t is not None]
        return _Waiting(self.live + other.live, self.delayed + other.delayed, self.complete and other.complete,
                        min(oldest) if oldest else None)


class GroupViews(Counts):
    def group_views(
        self,
        queue: str,
        now_ms: int | None = None,
        *,
        groups: Sequence[str] | None = None,
        cap: int = CAP,
        ring_cap: int = RING_CAP,
        max_groups: int = MAX_GROUPS,
        running_cap: int = RUNNING_CAP,
    ) -> GroupsView:
        """The groups of ``queue`` (``groups`` None: those on the ring, those running, and the default group; else
        just these, whether on the ring or not), noisiest first: most waiting and running tasks, then name."""
        self._settings.order_of(queue)
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        on_ring: dict[str, set[int]] = {}
        ring_complete = True
        for shard in range(self._settings.queue_shards):
            entries = self.ring(queue, shard, ring_cap)
            ring_complete = ring_complete and len(entries) < ring_cap
            for entry in entries:
                on_ring.setdefault(entry.group, set()).add(shard)
        running, running_complete = self.running_by_group(queue, running_cap)
        if groups is None:
            names = [DEFAULT_GROUP, *sorted(set(on_ring) | {g for g in running if g != DEFAULT_GROUP})]
        else:
            names = list(dict.fromkeys(DEFAULT_GROUP if g == DEFAULT_GROUP else fairness.validate_group(g)
                                       for g in groups))
        seen = len(names)
        # The groups viewed: the running ones and the default first (they are cheap to know), then the ring's.
        names = sorted(names, key=lambda g: (g != DEFAULT_GROUP, -running.get(g, 0)))[:max_groups]
        settings = self._group_settings_items(queue, [g for g in names if g != DEFAULT_GROUP])
        views = []
        for group in names:
            waiting = self._waiting_of(queue, group, now_ms, cap)
            item = settings.get(group, {})
            default = group == DEFAULT_GROUP
            views.append(GroupView(
                queue=queue, group=group, waiting=waiting.live, delayed=waiting.delayed,
                waiting_complete=waiting.complete, running=running.get(group, 0),
                oldest_waiting_ms=None if waiting.oldest_ms is None else max(0, now_ms - waiting.oldest_ms),
                limits=GroupLimits() if default else self._limits_of(item),
                own=frozenset() if default else _own_settings(item),
                on_ring=group in on_ring,
            ))
        views.sort(key=lambda v: (-v.noise, v.group))
        return GroupsView(queue, views, seen, ring_complete, running_complete, now_ms)

    def group_view(self, queue: str, group: str, now_ms: int | None = None) -> GroupView:
        """One group's view (whether it has waiting tasks or not)."""
        return self.group_views(queue, now_ms, groups=[group]).groups[0]

    def running_by_group(self, queue: str, cap: int = RUNNING_CAP) -> tuple[Counter[str], bool]:
        """How many TAKEN tasks each group has (``DEFAULT_GROUP``: those without a group), among the first ``cap``
        entries of each ready partition (the default group's and those of the groups on the ring); ``False`` when a
        partition held more (a dead worker's task further down is not counted until a look recovers it)."""
        found: Counter[str] = Counter()
        complete = True
        for partition in self._partitions(queue, TaskStatus.TAKEN)[3]:  # the ready partitions, every group's
            response = self._call(
                "query", TableName=self._table, IndexName=READY_INDEX, KeyConditionExpression="readyKey = :k",
                ProjectionExpression="taskId", ExpressionAttributeValues={":k": {"S": partition}},
                ScanIndexForward=False, Limit=cap, **lease_filter(READY_INDEX, partition, TaskStatus.TAKEN),
            )
            group = fairness.group_of_partition(partition)
            found[DEFAULT_GROUP if group is None else group] += len(response.get("Items", []))
            complete = complete and "LastEvaluatedKey" not in response
        return found, complete

    def _group_settings_items(self, queue: str, groups: Iterable[str]) -> dict[str, Mapping[str, Any]]:
        ids = {fairness.group_control_id(queue, g): g for g in dict.fromkeys(groups)}
        keys_ = [_key(i) for i in ids]
        found: dict[str, Mapping[str, Any]] = {}
        for start in range(0, len(keys_), _BATCH_GET_LIMIT):
            request = {self._table: {"Keys": keys_[start : start + _BATCH_GET_LIMIT], "ConsistentRead": False}}
            for item in self._batch_get(request):
                found[ids[item["taskId"]["S"]]] = item
        return found

    def _waiting_of(self, queue: str, group: str, now_ms: int, cap: int) -> _Waiting:
        total = _Waiting()
        for shard in range(self._settings.queue_shards):
            if group == DEFAULT_GROUP:
                partitions = (keys.ready_key(queue, shard), keys.delayed_key(queue, shard))
            else:
                partitions = (fairness.group_ready_key(queue, shard, group),
                              fairness.group_delayed_key(queue, shard, group))
            for partition in partitions:
                total = total + self._read_partition(queue, partition, now_ms, cap)
        return total

    def _read_partition(self, queue: str, partition: str, now_ms: int, cap: int) -> _Waiting:
        """One ReadyIndex partition's entries up to ``cap``: live (before ttl), delayed, and the oldest order time."""
        order = self._settings.order_of(queue)
        request: dict[str, Any] = {
            "TableName": self._table, "IndexName": READY_INDEX, "KeyConditionExpression": "readyKey = :k",
            "ExpressionAttributeValues": {":k": {"S": partition}},
            "ProjectionExpression": "taskId, readyKey, readySort, #ttl, notBefore",
            "ExpressionAttributeNames": {"#ttl": "ttl"},
        }
        live = delayed = read = 0
        oldest: int | None = None
        while True:
            request["Limit"] = cap - read
            response = self._call("query", **request)
            for item in response.get("Items", []):
                read += 1
                entry = candidate_of(item, queue, 0)
                if entry.ttl <= now_ms // 1000 or entry.leased:  # past its ttl, or running
                    continue
                live += 1
                delayed += 0 if is_claimable(entry.ttl, entry.not_before_ms, now_ms) else 1
                _, enqueued, _ = keys.parse_ready_sort(entry.ready_sort, order)
                oldest = enqueued if oldest is None else min(oldest, enqueued)
            if read >= cap:
                return _Waiting(live, delayed, "LastEvaluatedKey" not in response and read < cap, oldest)
            if "LastEvaluatedKey" not in response:
                return _Waiting(live, delayed, True, oldest)
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def _own_settings(item: Mapping[str, Any]) -> frozenset[str]:
    return frozenset(name for name, attribute in zip(SETTINGS, ("concurrency", "rateLimit", "pausedUntil"))
                     if attribute in item)
