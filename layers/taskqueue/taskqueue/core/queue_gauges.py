"""The queue metrics SQS users alarm on, as pure rules: what a queue's (and a group's) figures are, which groups are
noisy, and the metric records the safety net publishes each minute (taskqueue.observe.queue_metrics; docs/operations.md
"Queue metrics" has the costs).

Per queue, like SQS's ApproximateAgeOfOldestMessage / ApproximateNumberOfMessagesVisible / NotVisible / Delayed:

- ``OldestTaskAge`` (seconds): the age of the oldest waiting task (from its order time: creation, or its last touch);
- ``TasksWaiting``: PENDING tasks that may be claimed now, before their ttl (ready, and delayed ones now due);
- ``TasksRunning``: TAKEN tasks (a running task keeps its ready entry, its lease marked on it);
- ``TasksDelayed``: PENDING tasks whose not-before time (a creation delay, a retry's backoff) is still ahead.

A queue with groups (fair share), like SQS fair queues: ``NoisyGroups`` (groups holding more than the mean of the
groups with work, waiting plus running), the four above for the quiet groups together (``...InQuietGroups``), and
the four per noisy group (dimension ``group``) for the ``top`` noisiest of them. Expired entries (PENDING past their
ttl, waiting for a reader to shed them) count in none: they will never run (``TasksShed`` counts them once shed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from taskqueue.core import keys

SECONDS, COUNT = "Seconds", "Count"
# (metric, unit) of one figure set; the quiet groups' carry the suffix.
FIGURES: tuple[tuple[str, str], ...] = (
    ("OldestTaskAge", SECONDS),
    ("TasksWaiting", COUNT),
    ("TasksRunning", COUNT),
    ("TasksDelayed", COUNT),
)
QUIET_SUFFIX = "InQuietGroups"
NOISY_GROUPS = "NoisyGroups"
# After a queue was last seen holding tasks, its zeros are published this long (so a graph and an alarm see it drain);
# after that nothing is, and an idle queue costs no metric-hour (CloudWatch bills a metric only in the hours it gets
# a value; the alarms treat missing data as not breaching).
TRAILING_ZEROS_MS = 5 * 60_000
# Distinct groups a queue publishes per-group figures for in one clock hour, as a multiple of ``top``: the top N may
# change every minute, and each new group is a new metric for that hour.
GROUP_HOURS_PER_TOP = 2


@dataclass(frozen=True)
class Gauge:
    """The figures of a queue, a group or some groups. ``oldest_ms``: the order time of the oldest waiting task (None:
    none waits); ``complete`` False: a partition held more entries than one read takes (its counts are floors)."""

    waiting: int = 0
    running: int = 0
    delayed: int = 0
    oldest_ms: int | None = None
    complete: bool = True

    def __add__(self, other: Gauge) -> Gauge:
        oldest = [t for t in (self.oldest_ms, other.oldest_ms) if t is not None]
        return Gauge(self.waiting + other.waiting, self.running + other.running, self.delayed + other.delayed,
                     min(oldest) if oldest else None, self.complete and other.complete)

    @property
    def busy(self) -> bool:
        return bool(self.waiting or self.running or self.delayed)

    @property
    def noise(self) -> int:
        """How much of the queue the group holds: waiting plus running (as the groups view sorts them)."""
        return self.waiting + self.running

    def age_seconds(self, now_ms: int) -> float:
        return 0.0 if self.oldest_ms is None else max(0, now_ms - self.oldest_ms) / 1000

    def values(self, now_ms: int) -> dict[str, float]:
        """The figures under their metric names (FIGURES)."""
        return {"OldestTaskAge": round(self.age_seconds(now_ms), 3), "TasksWaiting": self.waiting,
                "TasksRunning": self.running, "TasksDelayed": self.delayed}


def total(gauges: Iterable[Gauge]) -> Gauge:
    found = Gauge()
    for gauge in gauges:
        found = found + gauge
    return found


@dataclass(frozen=True)
class Entry:
    """One ReadyIndex entry as the gauges read it: its ttl (epoch s), ``notBefore`` (a lease in a ready partition, a
    due time in a delayed one) and the order time of its ready sort key."""

    ttl: int
    not_before_ms: int | None
    order_ms: int


def partition_gauge(entries: Iterable[Entry], now_ms: int, delayed: bool, complete: bool) -> Gauge:
    """The figures of one partition's entries read (``complete``: all of them)."""
    waiting = running = later = 0
    oldest: int | None = None
    for entry in entries:
        if not delayed and entry.not_before_ms is not None:
            running += 1  # a running task's lease mark (taskqueue.core.keys)
            continue
        if entry.ttl <= now_ms // 1000:
            continue  # expired: never served
        if delayed and entry.not_before_ms is not None and entry.not_before_ms > now_ms:
            later += 1
            continue
        waiting += 1
        oldest = entry.order_ms if oldest is None else min(oldest, entry.order_ms)
    return Gauge(waiting, running, later, oldest, complete)


def entry_of(ttl: int, not_before_ms: int | None, sort_key: str, delayed: bool, order: keys.Order) -> Entry:
    """An index entry's ``Entry`` from its stored sort key (a delayed one carries the ready sort key after its due time)."""
    ready_sort = keys.parse_delayed_sort(sort_key)[1] if delayed else sort_key
    return Entry(ttl, not_before_ms, keys.parse_ready_sort(ready_sort, order)[1])


@dataclass(frozen=True)
class QueueGauges:
    """A queue's figures: ``total`` over every group; ``groups`` by name (``fairness.DEFAULT_GROUP`` for the tasks
    without one) when the queue has named groups, else empty; ``groups_complete`` False: the groups read were cut
    by a bound (the ring's cap, the groups read per run), so ``total`` covers those read."""

    queue: str
    now_ms: int
    total: Gauge
    groups: Mapping[str, Gauge] = field(default_factory=dict)
    groups_complete: bool = True

    def noisy(self, top: int | None = None) -> list[str]:
        """The noisy groups (see the module's docstring), noisiest first, names breaking ties; at most ``top``."""
        active = {name: g.noise for name, g in self.groups.items() if g.noise}
        if len(active) < 2:
            return []
        mean = sum(active.values()) / len(active)
        found = sorted((name for name, noise in active.items() if noise > mean), key=lambda n: (-active[n], n))
        return found if top is None else found[:top]

    def quiet(self) -> Gauge:
        """The groups that are not noisy, together."""
        noisy = set(self.noisy())
        return total(g for name, g in self.groups.items() if name not in noisy)


@dataclass(frozen=True)
class Record:
    """One metric blob: its dimensions (beside ``service``) and (metric, unit, value) triples."""

    dimensions: tuple[tuple[str, str], ...]
    values: tuple[tuple[str, str, float], ...]


def _figures(gauge: Gauge, now_ms: int, suffix: str = "") -> tuple[tuple[str, str, float], ...]:
    values = gauge.values(now_ms)
    return tuple((name + suffix, unit, values[name]) for name, unit in FIGURES)


def records(gauges: QueueGauges, groups: Iterable[str]) -> list[Record]:
    """What one run publishes for a queue: its figures (and, with groups, the quiet groups' and the number of noisy
    ones), then each of ``groups`` (the noisy ones this run may publish: ``groups_to_publish``)."""
    queue_values = _figures(gauges.total, gauges.now_ms)
    if gauges.groups:
        queue_values += _figures(gauges.quiet(), gauges.now_ms, QUIET_SUFFIX)
        queue_values += ((NOISY_GROUPS, COUNT, float(len(gauges.noisy()))),)
    found = [Record((("queue", gauges.queue),), queue_values)]
    for name in groups:
        found.append(Record((("queue", gauges.queue), ("group", name)), _figures(gauges.groups[name], gauges.now_ms)))
    return found


def should_publish(busy: bool, last_busy_ms: int | None, now_ms: int) -> bool:
    """Publish while the queue holds tasks, and its zeros for TRAILING_ZEROS_MS after (see TRAILING_ZEROS_MS)."""
    return busy or (last_busy_ms is not None and now_ms - last_busy_ms <= TRAILING_ZEROS_MS)


def groups_to_publish(noisy: list[str], published_this_hour: set[str], top: int) -> list[str]:
    """Of the noisy groups (noisiest first), the ``top`` first that the hour's budget allows: a group published
    already this hour costs nothing more; a new one only while fewer than ``GROUP_HOURS_PER_TOP * top`` were."""
    budget = GROUP_HOURS_PER_TOP * top
    chosen: list[str] = []
    seen = set(published_this_hour)
    for name in noisy:
        if len(chosen) == top:
            break
        if name in seen or len(seen) < budget:
            chosen.append(name)
            seen.add(name)
    return chosen
