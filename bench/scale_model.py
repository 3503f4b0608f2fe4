"""How many tasks per second the index partitions can sustain: a partition-load simulation.

DynamoDB serves at most ~1,000 write units/s and ~3,000 read units/s per partition. A task queue's hot keys
are its index partitions: the product's ReadyIndex and StatusIndex partitions (one per queue shard, plus
the delayed partition), the seed's single ``PENDING`` (and ``TAKEN``, ``SUCCESS``) index key. Table items
are spread by their random task id and are never the limit.

The simulation, second by second for ``seconds`` seconds:

- tasks arrive (Poisson at ``rate``, or exactly ``rate`` per second), each on a shard drawn at random (the
  product hashes the task id; or round-robin for hand-checkable cases);
- each task adds its measured units to partitions: a load *on its own shard* (writes: put and delete of its
  ReadyIndex and StatusIndex entries), a load *on every shard* (the worker's reads: each poll reads the head
  of every shard, so one more shard does not make a poll cheaper), or a load on a *single* partition
  (the seed: one index key per status, which cannot be sharded);
- each partition serves up to its capacity per second and carries the rest over (throttled requests retried).

A rate is sustainable when no partition ever falls more than ``max_backlog_seconds`` of its capacity behind;
the highest sustainable rate is found by bisection. Units per task are the measured ones (``bench/run.py``
passes the cost meter's per-partition figures of the saturated run); adaptive capacity and burst credit
are left out, which makes both designs' figures conservative alike.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np  # installed with matplotlib (requirements-dev.txt)

OWN_SHARD, EVERY_SHARD, SINGLE = "own-shard", "every-shard", "single"


@dataclass(frozen=True)
class Load:
    """``units`` per task of ``kind`` ("write" or "read") on partition ``name`` (a role, e.g. "ReadyIndex")."""

    name: str
    kind: str
    units: float
    spread: str  # own-shard | every-shard | single


@dataclass
class SimResult:
    rate: float
    shards: int
    sustainable: bool
    worst_backlog_seconds: float
    hottest: str
    served: dict[str, float] = field(default_factory=dict)


def simulate(loads: Iterable[Load], shards: int, rate: float, *, write_capacity: float = 1000.0,
             read_capacity: float = 3000.0, seconds: int = 600, poisson: bool = True, seed: int = 1,
             max_backlog_seconds: float = 1.0) -> SimResult:
    loads = list(loads)
    rng = np.random.default_rng(seed)
    even = [1.0 / shards] * shards
    partitions: dict[tuple[str, str, int], float] = {}  # (name, kind, shard) -> backlog units
    capacity = {"write": write_capacity, "read": read_capacity}
    worst, hottest = 0.0, ""
    next_shard = 0
    carried = 0.0
    for _second in range(seconds):
        if poisson:
            arrivals = int(rng.poisson(rate))
        else:
            carried += rate
            arrivals = int(math.floor(carried + 1e-9))
            carried -= arrivals
        per_shard = [0] * shards
        if poisson:
            per_shard = [int(n) for n in rng.multinomial(arrivals, even)]
        else:
            for _ in range(arrivals):
                per_shard[next_shard] += 1
                next_shard = (next_shard + 1) % shards
        for load in loads:
            if load.spread == SINGLE:
                targets = [(0, arrivals)]
            elif load.spread == EVERY_SHARD:
                targets = [(s, arrivals) for s in range(shards)]
            else:
                targets = list(enumerate(per_shard))
            for shard, count in targets:
                key = (load.name, load.kind, shard)
                partitions[key] = partitions.get(key, 0.0) + count * load.units
        for key, backlog in partitions.items():
            left = max(0.0, backlog - capacity[key[1]])
            partitions[key] = left
            behind = left / capacity[key[1]]
            if behind > worst:
                worst, hottest = behind, f"{key[0]} ({key[1]}s) shard {key[2]}"
    return SimResult(rate, shards, worst <= max_backlog_seconds, worst, hottest)


def max_sustainable_rate(loads: Iterable[Load], shards: int, *, write_capacity: float = 1000.0,
                         read_capacity: float = 3000.0, seconds: int = 600, poisson: bool = True, seed: int = 1,
                         max_backlog_seconds: float = 1.0, tolerance: float = 0.002) -> tuple[float, str]:
    """The highest rate (tasks/s) no partition falls behind at, and the partition that limits it."""
    loads = list(loads)
    kwargs = dict(write_capacity=write_capacity, read_capacity=read_capacity, seconds=seconds, poisson=poisson,
                  seed=seed, max_backlog_seconds=max_backlog_seconds)
    low, high = 0.0, 1.0
    while simulate(loads, shards, high, **kwargs).sustainable:  # type: ignore[arg-type]
        low, high = high, high * 2
        if high > 1e7:
            return math.inf, "none"
    while (high - low) > tolerance * max(high, 1.0):
        middle = (low + high) / 2
        if simulate(loads, shards, middle, **kwargs).sustainable:  # type: ignore[arg-type]
            low = middle
        else:
            high = middle
    hottest = simulate(loads, shards, high, **kwargs).hottest  # type: ignore[arg-type]
    return low, hottest


def loads_from_partitions(partitions: dict[str, float], *, shardable: bool, queue: str = "work") -> list[Load]:
    """The cost meter's per-task units by partition ("write|ReadyIndex|work#0") as simulation loads.

    ``shardable`` (the product): a partition of ``queue`` takes its writes from its own shard's tasks and its
    reads from every look (every shard); other
    queues' partitions (the safety net's reads of queue "calls") are left out. Not shardable (the seed): every
    partition is a single key."""
    loads: list[Load] = []
    for key, units in partitions.items():
        kind, index, partition = key.split("|", 2)
        if shardable:
            if not partition.startswith(f"{queue}#"):
                continue
            role = f"{index} {_role(partition, queue)}"
            loads.append(Load(role, kind, units, OWN_SHARD if kind == "write" else EVERY_SHARD))
        else:
            loads.append(Load(f"{index} {partition}", kind, units, SINGLE))
    return loads


def lease_marked(partitions: dict[str, float], queue: str = "work") -> dict[str, float]:
    """Measured partitions (``loads_from_partitions``' input) with the lease mark added: a run whose tasks end
    quickly (the idle runs' runner takes no time) claims without it (store/unmarked_leases.py), but at scale tasks run
    for a while and are marked: one more ReadyIndex write a task on the task's ready partition."""
    return {key: units + (1.0 if key.startswith("write|ReadyIndex|") and _role(key.split("|", 2)[2], queue) == "ready"
                          else 0.0) for key, units in partitions.items()}


def _role(partition: str, queue: str) -> str:
    """'work#0' -> 'ready', 'work#0#delayed' -> 'delayed', 'work#TAKEN#0' -> 'TAKEN' (shard number dropped)."""
    parts = partition[len(queue) + 1 :].split("#")
    if len(parts) == 1:
        return "ready"
    if parts[-1] == "delayed":
        return "delayed"
    return parts[0]


def control_item_load(stream_batch: int) -> list[Load]:
    """The queue's record (``queue#<name>``, one table item, so one partition whatever QueueShards is): each worker
    invocation reads it once as it starts (the pause check, strongly consistent: 1 read unit), and at a rate that
    could limit every stream batch is full (``stream_batch`` tasks a batch, one invocation each); producers do not
    touch it. Its reads while a run goes on (one every PAUSE_CHECK_SECONDS) do not grow with the rate."""
    return [Load("control item queue#work (each stream batch's invocation reads it)", "read", 1.0 / stream_batch, SINGLE)]
