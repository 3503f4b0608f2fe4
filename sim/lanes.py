"""A DynamoDB stream's event source mapping as Lambda runs it, for ProcessTasks' ``TaskStream`` as the template declares
it: its filters (records that match none are never delivered), its batch size, no batching window, records routed by
partition key to ``ParallelizationFactor`` lanes (one key's records stay in order on one lane, and a lane carries one
batch at a time: a batch behind a long run waits for it), a failed batch split in two (``BisectBatchOnFunctionError``)
and retried, a batch given up after ``MaximumRetryAttempts`` or once its oldest record is older than
``MaximumRecordAgeInSeconds``, sent to the on-failure destination (``failed``). Faults the plan draws: a batch
delivered late, delivered twice (at least once), or dropped as if its retries had run out.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from local.template.filter_patterns import matches_any
from sim.ddb_streams import shard_of
from sim.world import LATE_S, World, function_properties, parameter

POLL_S = 0.25  # Lambda polls a shard about four times a second


def _value(value: Any) -> Any:
    return parameter(value["Ref"]) if isinstance(value, dict) and "Ref" in value else value


class StreamMapping:
    def __init__(self, world: World, table: str, function: str = "ProcessTasksFunction", event: str = "TaskStream") -> None:
        props = function_properties(function)["Events"][event]["Properties"]
        self.world = world
        self.log = world.db.streams[table]
        self.filters = [f["Pattern"] for f in props["FilterCriteria"]["Filters"]]
        self.batch_size = int(props["BatchSize"])
        self.max_retries = int(props["MaximumRetryAttempts"])
        self.max_age_s = float(_value(props["MaximumRecordAgeInSeconds"]))
        self.bisect = bool(props["BisectBatchOnFunctionError"])
        self.lanes = world.plan.lanes
        self.position = 0
        self.waiting: list[deque[dict[str, Any]]] = [deque() for _ in range(self.lanes)]
        # Per lane: the pieces of the batch in flight (a bisected batch is retried piece by piece), with their retries.
        self.pieces: list[list[tuple[list[dict[str, Any]], int]]] = [[] for _ in range(self.lanes)]
        self.busy = [False] * self.lanes
        self.failed: list[dict[str, Any]] = []
        self.delivered = 0

    def start(self) -> None:
        self.world.kernel.call_later(POLL_S, self._poll)

    def _poll(self) -> None:
        new = self.log.since(self.position)
        self.position += len(new)
        for record in new:
            if matches_any(self.filters, record):
                self.waiting[shard_of(record, self.lanes, "taskId")].append(record)
        for lane in range(self.lanes):
            if not self.busy[lane] and self.waiting[lane]:
                batch = [self.waiting[lane].popleft() for _ in range(min(self.batch_size, len(self.waiting[lane])))]
                self.pieces[lane] = [(batch, 0)]
                self._send(lane)
        self.world.kernel.call_later(POLL_S, self._poll)

    def _send(self, lane: int, duplicate: bool = False) -> None:
        if not self.pieces[lane]:
            self.busy[lane] = False
            return
        self.busy[lane] = True
        world, plan, rng = self.world, self.world.plan, self.world.rng
        batch, retries = self.pieces[lane][0]
        if not duplicate and plan.drop_rate and rng.random() < plan.drop_rate:
            world.stats.dropped += 1
            world.cost(world.safety_net_s + 5)  # the safety net's next round wakes the queue for its tasks
            world.log(f"stream lane {lane}: batch of {len(batch)} dropped to the on-failure queue")
            self._give_up(lane)
            return
        delay = None
        if plan.late_rate and rng.random() < plan.late_rate:
            world.stats.late += 1
            delay = rng.uniform(0, LATE_S)
            world.cost(delay + 1)
        self.delivered += 1
        world.log(f"stream lane {lane}: batch of {len(batch)}{' again' if duplicate else ''} (retry {retries})")
        world.process_tasks_event({"Records": [dict(r) for r in batch]},
                                  done=lambda error: self._done(lane, error, duplicate), delay=delay)

    def _done(self, lane: int, error: BaseException | None, duplicate: bool) -> None:
        world, rng = self.world, self.world.rng
        batch, retries = self.pieces[lane][0]
        if error is None:
            if not duplicate and world.plan.twice_rate and rng.random() < world.plan.twice_rate:
                world.stats.twice += 1
                self._send(lane, duplicate=True)
                return
            self.pieces[lane].pop(0)
            self._send(lane)
            return
        oldest_s = min(float(r["dynamodb"]["ApproximateCreationDateTime"]) for r in batch)
        too_old = world.kernel.clock.now_ms() / 1000 - oldest_s > self.max_age_s
        if retries >= self.max_retries or too_old:
            self._give_up(lane)
            return
        if self.bisect and len(batch) > 1:
            half = len(batch) // 2
            self.pieces[lane][0:1] = [(batch[:half], retries + 1), (batch[half:], retries + 1)]
        else:
            self.pieces[lane][0] = (batch, retries + 1)
        self._send(lane)

    def _give_up(self, lane: int) -> None:
        batch, _ = self.pieces[lane].pop(0)
        self.failed.extend(batch)
        self._send(lane)
