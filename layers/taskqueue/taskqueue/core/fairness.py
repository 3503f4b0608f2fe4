"""Fair share between the groups of one queue (pure rules and key encoding; docs/fairness.md has the semantics).

A task may name a *group* (a tenant, a customer, an API key). Tasks without one form the *default group*. Each
group keeps the queue's own order inside it (priority, then LIFO or FIFO); between groups, claims go round-robin.

Where things live in the ReadyIndex (shard = the task's shard, as for every task):

- the default group's tasks: the shard's plain partitions, as before groups existed (``<queue>#<shard>`` and
  ``<queue>#<shard>#delayed``);
- a named group's tasks: ``<queue>#<shard>#g#<group>`` and, while delayed, ``<queue>#<shard>#gd#<group>``;
- the *ring*: one entry per (group, shard) that may have waiting tasks, in ``<queue>#<shard>#groups``, sorted by
  ``<8 hex digits of crc32(group)>#<group>``: a fixed place per group, so a worker walks the ring from where it
  last claimed (its *cursor*) and every active group comes round in turn without any write per claim.

A queue's name and a group's name hold no ``#`` (both validated), so a partition's parts are never ambiguous.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from taskqueue.core import keys
from taskqueue.core.errors import InvalidTaskInput

T = TypeVar("T")

_GROUP = re.compile(r"^[A-Za-z0-9_.:@/=+-]{1,64}$")
DEFAULT_GROUP = "default"  # how the board, taskq and logs name the tasks without a group
GROUP_PARTITION = "g"
GROUP_DELAYED_PARTITION = "gd"
RING_PARTITION = "groups"
# Ring entries a look reads at once (per shard); a look serves at most this many groups. Past held-back or paused
# entries it reads on, at most RING_READS pages.
RING_PAGE = 25
RING_READS = 4


def validate_group(group: object) -> str:
    """A group name: 1-64 letters, digits or ``_ . : @ / = + -`` (an API key or a tenant id fits); ``#`` is refused
    (it separates key parts), and so is the reserved name of the default group."""
    if not isinstance(group, str) or not _GROUP.match(group):
        raise InvalidTaskInput(
            f"group {group!r:.80} is not valid: use 1-64 letters, digits or '_ . : @ / = + -' (no '#', no spaces)"
        )
    if group == DEFAULT_GROUP:
        raise InvalidTaskInput(
            f"group {DEFAULT_GROUP!r} is the name of the tasks without a group: leave the group out instead"
        )
    return group


def group_ready_key(queue: str, shard: int, group: str) -> str:
    return f"{queue}#{shard}#{GROUP_PARTITION}#{group}"


def group_delayed_key(queue: str, shard: int, group: str) -> str:
    return f"{queue}#{shard}#{GROUP_DELAYED_PARTITION}#{group}"


def ready_partition(queue: str, shard: int, group: str | None) -> str:
    """A group's ready partition in one shard (``None``: the default group's, the shard's plain one)."""
    return keys.ready_key(queue, shard) if group is None else group_ready_key(queue, shard, group)


def delayed_partition(queue: str, shard: int, group: str | None) -> str:
    """A group's delayed partition in one shard (``None``: the default group's, the shard's plain one)."""
    return keys.delayed_key(queue, shard) if group is None else group_delayed_key(queue, shard, group)


def ring_key(queue: str, shard: int) -> str:
    return f"{queue}#{shard}#{RING_PARTITION}"


def ring_sort(group: str) -> str:
    """A group's fixed place on the ring: spread by a hash, so neighbours by name are not neighbours on it."""
    return f"{zlib.crc32(group.encode('utf-8')):08x}#{group}"


def group_of_ring_sort(sort_key: str) -> str:
    return sort_key.split("#", 1)[1]


def is_delayed_partition(ready_key: str) -> bool:
    """Is a ReadyIndex partition a delayed one (plain or a group's)? Parts: queue, shard, then the kind."""
    parts = ready_key.split("#", 3)
    return (len(parts) == 3 and parts[2] == "delayed") or (len(parts) == 4 and parts[2] == GROUP_DELAYED_PARTITION)


def group_of_partition(ready_key: str) -> str | None:
    """The group whose partition this is (``None``: the default group's)."""
    parts = ready_key.split("#", 3)
    return parts[3] if len(parts) == 4 and parts[2] in (GROUP_PARTITION, GROUP_DELAYED_PARTITION) else None


def ring_entry_id(queue: str, shard: int, group: str) -> str:
    """The item that puts (group, shard) on the ring; a control item (``queue#`` prefix), never a task."""
    return f"queue#{queue}#ring#{shard}#{group}"


def group_control_id(queue: str, group: str) -> str:
    """The item that holds one group's run-time settings (limits, pause) and its rate window."""
    return f"queue#{queue}#group#{group}"


def group_token_queue(queue: str, group: str) -> str:
    """The name a group's concurrency slots are leased under (``taskqueue.store.control`` tokens)."""
    return f"{queue}#group#{group}"


@dataclass(frozen=True)
class RingEntry:
    """(group, shard) as the ring shows it: ``paused_until_ms`` when an operator paused the group; ``kept_until_s``
    (epoch seconds, on the activating producer's clock): its last activation plus the deactivation grace; ``stamp``:
    that activation as written (``ring_stamp``; the entry's ``ttl``), another for every write of the entry."""

    group: str
    shard: int
    sort: str
    paused_until_ms: int | None = None
    kept_until_s: float = 0
    stamp: str = ""

    @property
    def place(self) -> tuple[int, str]:
        return self.shard, self.group


def ring_stamp(kept_until_ms: int, nonce: int) -> str:
    """An activation's ``ttl``: its kept-until time in epoch seconds to the millisecond, then six digits of ``nonce``,
    so that two activations never write the same number (a worker tells them apart by it, ``may_leave_ring``)."""
    if not 0 <= nonce < 1_000_000:
        raise ValueError(f"a ring stamp's nonce is 0-999999, got {nonce}")
    return f"{kept_until_ms // 1000}.{kept_until_ms % 1000:03d}{nonce:06d}"


def may_leave_ring(entry: RingEntry, look_ms: int, first_seen_ms: int | None, settle_ms: int) -> bool:
    """May a look that began at ``look_ms`` and found (group, shard) with no task at all take it off the ring?

    Every task of a group is written before a ring write of it (a producer writes the entry before its tasks and
    again after a write that outlasted its reuse), or within ``settle_ms`` less the index's lag after the ring write a
    producer reused. So once ``settle_ms`` passed since this worker first saw the entry's present stamp
    (``first_seen_ms``, its own clock), an empty look saw every task that stamp stands for; a later activation changes
    the stamp, and the removal is conditional on it. Without that sighting, the grace on the producer's clock
    (``kept_until_s``, which allows for its skew) decides. Stamps written before they carried a nonce (whole seconds,
    possibly shared by two activations) use the grace only."""
    if look_ms >= entry.kept_until_s * 1000:
        return True
    return first_seen_ms is not None and "." in entry.stamp and look_ms >= first_seen_ms + settle_ms


@dataclass(frozen=True)
class GroupLimits:
    """One group's limits: at most ``concurrency`` tasks running at once across every worker, at most ``rate``
    claims per ``period_seconds`` window, no claim before ``paused_until_ms``. ``None``: no such limit."""

    concurrency: int | None = None
    rate: int | None = None
    period_seconds: float = 1.0
    paused_until_ms: int | None = None

    def __post_init__(self) -> None:
        if self.concurrency is not None and not 1 <= self.concurrency <= 1000:
            raise InvalidTaskInput(f"a group's concurrency must be 1-1000 (or none), got {self.concurrency}")
        if self.rate is not None and not 1 <= self.rate <= 1_000_000:
            raise InvalidTaskInput(f"a group's rate must be 1-1000000 claims per period (or none), got {self.rate}")
        if not 0.1 <= self.period_seconds <= 86400:
            raise InvalidTaskInput(f"a rate period must be 0.1-86400 seconds, got {self.period_seconds}")

    def paused(self, now_ms: int) -> bool:
        return self.paused_until_ms is not None and now_ms < self.paused_until_ms


def parse_rate(text: str) -> tuple[int, float] | None:
    """``"N/P"``: N claims per P seconds (``"10/1"``, ``"600/60"``); ``""`` or ``"0"``: no limit."""
    text = text.strip()
    if text in ("", "0"):
        return None
    try:
        count, _, period = text.partition("/")
        rate, seconds = int(count), float(period or "1")
    except ValueError:
        raise InvalidTaskInput(f"a rate limit is 'N/P' (N claims per P seconds, e.g. '10/1'), got {text!r}") from None
    GroupLimits(rate=rate, period_seconds=seconds)  # checks the ranges
    return rate, seconds


def rate_window(now_ms: int, period_seconds: float) -> int:
    """The fixed window a claim at ``now_ms`` counts in: at most N claims in each (windows start at epoch + k P)."""
    return now_ms // int(period_seconds * 1000)


def next_window_ms(now_ms: int, period_seconds: float) -> int:
    period_ms = int(period_seconds * 1000)
    return (now_ms // period_ms + 1) * period_ms


def ring_from(entries: Sequence[RingEntry], after: str | None) -> list[RingEntry]:
    """The ring read from just after ``after`` (a worker's cursor) round to it again: entries are in ring order."""
    if after is None:
        return list(entries)
    later = [e for e in entries if e.sort > after]
    return later + [e for e in entries if e.sort <= after]


class RecentUse:
    """Each group's runner-seconds on one worker, halving every ``half_life`` seconds: how much of the runner a group
    had lately. Pure bookkeeping on times handed in (a monotonic clock's seconds)."""

    PRUNE_AT = 4096  # groups remembered before the nearly-forgotten ones are dropped (a run meets few groups)

    def __init__(self, half_life: float) -> None:
        if half_life <= 0:
            raise ValueError(f"a half-life is positive, got {half_life}")
        self._half_life = half_life
        self._use: dict[str | None, tuple[float, float]] = {}  # group -> (seconds, as of)

    def add(self, group: str | None, seconds: float, now: float) -> None:
        self._use[group] = (self.of(group, now) + max(0.0, seconds), now)
        if len(self._use) > self.PRUNE_AT:
            self._use = {g: (v, t) for g, (v, t) in self._use.items() if self.of(g, now) >= 0.001}

    def of(self, group: str | None, now: float) -> float:
        seconds, as_of = self._use.get(group, (0.0, now))
        return seconds * 0.5 ** (max(0.0, now - as_of) / self._half_life)


def use_with_running(finished: Mapping[str | None, float], running: Iterable[tuple[str | None, float]],
                     expected: float) -> dict[str | None, float]:
    """Each group's use of the runner as a free slot's choice weighs it: its finished tasks' recent runner-seconds
    (``finished``) plus, for each task of it running now (``(group, seconds so far)``), at least ``expected`` seconds
    (a task just claimed will hold its slot about as long as tasks do): so slots that free together do not all go to
    the group that had least before the first of them was claimed."""
    use = dict(finished)
    for group, elapsed in running:
        use[group] = use.get(group, 0.0) + max(elapsed, expected)
    return use


def least_used_first(candidates: Sequence[T], group_of: Callable[[T], str | None], use: Mapping[str | None, float],
                     running: Iterable[str | None]) -> list[T]:
    """``candidates`` (a look's, round-robin across groups) with the groups that used the runner least lately first
    (``use``: runner-seconds, the running tasks' time so far included), then those with fewer tasks running, the look's
    order kept among equals: a free slot goes to a quiet group's task before the next of a group that has had the
    runner, as SQS fair queues serve a tenant with few messages in flight before one with many."""
    counts = Counter(running)
    return sorted(candidates, key=lambda c: (use.get(group_of(c), 0.0), counts[group_of(c)]))


def round_robin(sources: Iterable[Iterator[T]]) -> Iterator[T]:
    """One item from each source in turn, dropping sources as they run dry: the first of every group, then the second
    of every group, ... Each source is read lazily, only when its turn comes."""
    live = list(sources)
    while live:
        still = []
        for source in live:
            try:
                yield next(source)
            except StopIteration:
                continue
            still.append(source)
        live = still


@dataclass(frozen=True)
class FairTurn:
    """A worker's place in fair share: its cursor on each shard's ring (the ring sort of the group it claimed from
    last; ``""``: the default group) and the groups it holds back for now (at a concurrency or rate limit)."""

    after: Mapping[int, str] = field(default_factory=dict)
    held_back: frozenset[str] = frozenset()
    # False: the queue's record says no group was ever put on its ring (``hasGroups``): the look reads no ring.
    groups: bool = True
    # Told (group, pause end, epoch ms) of each paused group the look passes over: when to wake the queue for it.
    on_paused: Callable[[str, int], None] | None = field(default=None, compare=False)
