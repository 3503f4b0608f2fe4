"""What the board's reads cost, and counts that stay cheap on a big queue.

A COUNT query is billed for every index entry it passes (about 16 read units per 1,000 ReadyIndex entries,
eventually consistent): counting a queue of 100,000 PENDING tasks in full costs about 1,600 read units, which the
board once paid at every refresh of every open tab. Here:

- ``ReadMeter`` asks DynamoDB what each of the board's reads consumed (``ReturnConsumedCapacity``) and keeps the
  sums: per request (the page says what its refresh read) and over the last hour (the page says what the board has
  cost), background counts included.
- ``CountKeeper`` is one cache of counts per board, shared by every tab and request. A partition (one queue,
  state and shard of an index) is counted in a request by a COUNT query that stops at ``cap`` entries (about 16
  read units at most): below the cap the count is exact, and it is read again at most every ``fresh_s``. A
  partition at the cap is not read again in requests for ``recheck_s``; it shows ">= cap" until a background thread
  has counted it in full, then "~ N" with the age of that count. A full count is made at most every
  ``full_min_s`` and no more often than ``full_entries_per_hour`` allows (a count of 100,000 entries every 10
  minutes), never inside a request.
- Fair share's groups wait in partitions of their own (one ready and one delayed per group and shard, named by the
  ring of groups): ``CountKeeper`` reads the ring (at most ``ring_cap`` entries per shard, shared for ``fresh_s``)
  and counts at most ``group_budget`` of those partitions per request, the least recently counted first; the others
  show their last count, marked "~" with its age, and a partition never counted yet (or a ring read at its cap)
  marks the sum "≥". A handful of groups is counted exactly at every refresh; 10,000 cost the same per request.
- ``background.BackgroundValue`` keeps any other expensive read (the agent table's Scan, the groups page's view,
  CloudWatch's per-minute series) made in the background at most every so often, with its age for the page to show.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from taskq.board.background import BackgroundValue
from taskqueue.store.counts import DepthPartition, PartitionCount

__all__ = ["BackgroundValue", "BoardDepth", "Cell", "CountKeeper", "ReadMeter"]

# Dollars per million on-demand read request units (the board's reads are all eventually consistent but the
# slots' and the pause's GetItem).
DOLLARS_PER_MILLION_READ_UNITS = 0.125
READ_OPERATIONS = frozenset({"Query", "Scan", "GetItem", "BatchGetItem", "TransactGetItems"})

CAP = 1000  # entries a count reads inside a request, at most (~16 read units on the ReadyIndex)
FRESH_S = 2.5  # an exact count this young is shared (every tab, every fragment), not read again
RECHECK_S = 60.0  # a partition at the cap is read again (bounded) at most this often, to see it drain
FULL_MIN_S = 300.0  # a full count of a big partition at most this often ...
FULL_ENTRIES_PER_HOUR = 600_000  # ... and only as often as reading this many entries an hour allows (~9,600 units)
GROUP_BUDGET = 20  # groups' partitions counted per request, at most (~10 read units when they are small)
RING_CAP = 1000  # ring entries read per shard (one query; ~12 read units at the cap)


class ReadMeter:
    """The read units the board's DynamoDB clients consumed: per thread since ``start`` (one request), and over
    the last hour (every thread, the background counts included)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._spent: deque[tuple[float, float]] = deque()
        self._local = threading.local()
        self._attached: set[int] = set()
        self.started = clock()

    def attach(self, client: Any) -> None:
        if client is None or id(client) in self._attached:
            return
        self._attached.add(id(client))
        client.meta.events.register("provide-client-params.dynamodb.*", self._ask)
        client.meta.events.register("after-call.dynamodb.*", self._count)

    def _ask(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in READ_OPERATIONS and "ReturnConsumedCapacity" in model.input_shape.members:
            params.setdefault("ReturnConsumedCapacity", "TOTAL")

    def _count(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name not in READ_OPERATIONS:
            return
        consumed = parsed.get("ConsumedCapacity")
        entries = consumed if isinstance(consumed, list) else [consumed] if consumed else []
        units = sum(float(e.get("CapacityUnits", 0) or 0) for e in entries)
        self.add(units)

    def add(self, units: float) -> None:
        now = self._clock()
        self._local.units = getattr(self._local, "units", 0.0) + units
        with self._lock:
            self._spent.append((now, units))
            while self._spent and self._spent[0][0] < now - 3600:
                self._spent.popleft()

    def start(self) -> None:
        """From now on, count this thread's reads apart (one request's)."""
        self._local.units = 0.0

    def this_request(self) -> float:
        return float(getattr(self._local, "units", 0.0))

    def last_hour(self) -> tuple[float, float]:
        """(read units of the last hour, or since the board started if less, seconds that covers)."""
        now = self._clock()
        with self._lock:
            units = sum(u for at, u in self._spent if at >= now - 3600)
        return units, min(3600.0, max(now - self.started, 1e-9))

    def dollars_per_hour(self) -> float:
        units, seconds = self.last_hour()
        return units / seconds * 3600 * DOLLARS_PER_MILLION_READ_UNITS / 1e6


@dataclass(frozen=True)
class Cell:
    """A count as the page shows it. ``exact``: counted now (or within ``FRESH_S``); else ``lower_bound`` (at least
    ``value``: counting stopped at the cap, the full count not made yet) or approximate (a full count ``age_s``
    seconds old)."""

    value: int
    exact: bool = True
    lower_bound: bool = False
    age_s: float = 0.0

    def __str__(self) -> str:
        if self.exact:
            return str(self.value)
        return f"≥{self.value:,}" if self.lower_bound else f"~{self.value:,}"

    def __add__(self, other: Cell) -> Cell:
        return Cell(self.value + other.value, self.exact and other.exact, self.lower_bound or other.lower_bound,
                    max(self.age_s, other.age_s))

    @property
    def note(self) -> str:
        """What the page says beside a count that is not exact."""
        if self.exact:
            return ""
        if self.lower_bound:
            return f"at least {self.value:,}: the count stopped at {CAP:,} entries per partition; the full count is made in the background"
        return f"counted in full {int(self.age_s)} s ago (in the background, every {int(FULL_MIN_S // 60)} min or more)"


@dataclass(frozen=True)
class BoardDepth:
    """A queue's counts (the cells of ``taskqueue.store.counts.QueueDepth``), each exact or marked."""

    queue: str
    ready: Cell
    delayed: Cell
    expired: Cell
    taken: Cell
    failure: Cell
    cancelled: Cell

    @property
    def pending(self) -> Cell:
        return self.ready + self.delayed + self.expired

    @property
    def exact(self) -> bool:
        return all(c.exact for c in (self.ready, self.delayed, self.expired, self.taken, self.failure, self.cancelled))


@dataclass
class _Known:
    bounded: PartitionCount | None = None
    bounded_at: float = 0.0
    full: PartitionCount | None = None
    full_at: float = 0.0
    full_queued: bool = False


class CountKeeper:
    """The board's counts, one cache for every tab (see the module's docstring)."""

    def __init__(self, store: Any, now_ms: Callable[[], int], *, cap: int = CAP, fresh_s: float = FRESH_S, recheck_s: float = RECHECK_S,
                 full_min_s: float = FULL_MIN_S, full_entries_per_hour: int = FULL_ENTRIES_PER_HOUR,
                 clock: Callable[[], float] = time.monotonic, background: bool = True,
                 group_budget: int = GROUP_BUDGET, ring_cap: int = RING_CAP) -> None:
        self._store = store
        self.group_budget, self.ring_cap = group_budget, ring_cap
        self._rings: dict[str, tuple[list[DepthPartition], bool, float]] = {}
        self._now_ms = now_ms
        self.cap, self.fresh_s, self.recheck_s = cap, fresh_s, recheck_s
        self.full_min_s, self.full_entries_per_hour = full_min_s, full_entries_per_hour
        self._clock = clock
        self._known: dict[str, _Known] = {}
        self._lock = threading.Lock()
        self._wanted: deque[DepthPartition] = deque()
        self._wake = threading.Condition(self._lock)
        self._busy = False
        self._background = background
        self._thread: threading.Thread | None = None

    # ---- in a request --------------------------------------------------------------------------------------------

    def depth(self, queue: str, now_ms: int) -> BoardDepth:
        cells: dict[str, list[Cell]] = {s: [] for s in ("ready", "delayed", "expired", "taken", "failure", "cancelled")}
        for partition in self._store.depth_partitions(queue):
            live, expired, taken = self._cells(partition, now_ms)
            cells[partition.state].append(live)
            if expired is not None:
                cells["expired"].append(expired)
            if taken is not None:
                cells["taken"].append(taken)
        for partition, live, expired, taken in self._group_cells(queue, now_ms):
            cells[partition.state].append(live)
            cells["expired"].append(expired)
            cells["taken"].append(taken)
        summed = {state: _sum(found) for state, found in cells.items()}
        return BoardDepth(queue=queue, **summed)

    def _cells(self, partition: DepthPartition, now_ms: int) -> tuple[Cell, Cell | None, Cell | None]:
        """(waiting, expired, running) of one partition: expired for ReadyIndex partitions, running for ready ones."""
        now = self._clock()
        with self._lock:
            known = self._known.setdefault(partition.key, _Known())
            bounded, bounded_at = known.bounded, known.bounded_at
        stale = bounded is None or now - bounded_at >= (self.fresh_s if bounded.complete else self.recheck_s)
        if stale:
            bounded = self._store.count_partition(partition, now_ms, self.cap)
            with self._lock:
                known.bounded, known.bounded_at = bounded, now
                if bounded.complete:
                    known.full = None
        assert bounded is not None
        split = partition.index == "ReadyIndex"
        runs = partition.state == "ready"
        if bounded.complete:
            return Cell(bounded.live), Cell(bounded.expired) if split else None, Cell(bounded.taken) if runs else None
        with self._lock:
            full, full_at = known.full, known.full_at
            if full is None or now - full_at >= self._full_interval(full):
                self._queue_full(partition, known)
        if full is not None and full.total >= bounded.total:
            age = max(0.0, now - full_at)
            return (Cell(full.live, exact=False, age_s=age),
                    Cell(full.expired, exact=False, age_s=age) if split else None,
                    Cell(full.taken, exact=False, age_s=age) if runs else None)
        return (Cell(bounded.live, exact=False, lower_bound=True),
                Cell(bounded.expired, exact=False, lower_bound=True) if split else None,
                Cell(bounded.taken, exact=False, lower_bound=True) if runs else None)

    def _group_cells(self, queue: str, now_ms: int) -> list[tuple[DepthPartition, Cell, Cell, Cell]]:
        """The groups' partitions (see the module's docstring): counted within the request's budget, else their last
        count marked with its age, else unknown (a lower bound)."""
        now = self._clock()
        with self._lock:
            ring = self._rings.get(queue)
        if ring is None or now - ring[2] >= self.fresh_s:
            partitions, complete = self._store.group_partitions(queue, self.ring_cap)
            ring = (partitions, complete, now)
            with self._lock:
                self._rings[queue] = ring
        partitions, complete, _ = ring
        with self._lock:
            known = {p.key: self._known.setdefault(p.key, _Known()) for p in partitions}
        budget = self.group_budget
        found = []
        for partition in sorted(partitions, key=lambda p: known[p.key].bounded_at if known[p.key].bounded else -1.0):
            entry = known[partition.key]
            bounded, at = entry.bounded, entry.bounded_at
            due = bounded is None or now - at >= (self.fresh_s if bounded.complete else self.recheck_s)
            if due and budget > 0:
                budget -= 1
                bounded, at = self._store.count_partition(partition, now_ms, self.cap), now
                with self._lock:
                    entry.bounded, entry.bounded_at = bounded, at
            if bounded is None:
                unknown = Cell(0, exact=False, lower_bound=True)
                found.append((partition, unknown, unknown, unknown))
                continue
            exact, lower = not due or at == now, not bounded.complete
            age = 0.0 if exact else max(0.0, now - at)
            found.append((partition, Cell(bounded.live, exact and not lower, lower, age),
                          Cell(bounded.expired, exact and not lower, lower, age),
                          Cell(bounded.taken, exact and not lower, lower, age)))
        if not complete:  # the ring held more groups than one read takes: some partitions were not seen at all
            missed = Cell(0, exact=False, lower_bound=True)
            found.append((DepthPartition(queue, "ready", "ReadyIndex", f"{queue}#ring-cap"), missed, missed, missed))
        return found

    def _full_interval(self, full: PartitionCount) -> float:
        return max(self.full_min_s, full.total / self.full_entries_per_hour * 3600)

    # ---- in the background ---------------------------------------------------------------------------------------

    def _queue_full(self, partition: DepthPartition, known: _Known) -> None:
        """(holding the lock) Ask the background thread for a full count of ``partition``."""
        if known.full_queued:
            return
        known.full_queued = True
        self._wanted.append(partition)
        self._wake.notify_all()
        if self._background and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="taskq-board-counts", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._wanted:
                    self._wake.wait()
                partition = self._wanted.popleft()
                self._busy = True
            self.count_in_full(partition)

    def count_in_full(self, partition: DepthPartition) -> None:
        try:
            full = self._store.count_partition(partition, self._now_ms(), None)
        except Exception:  # noqa: BLE001 - the page keeps its lower bound; the next refresh asks again
            full = None
        with self._lock:
            known = self._known.setdefault(partition.key, _Known())
            known.full_queued = False
            if full is not None:
                known.full, known.full_at = full, self._clock()
            self._busy = False
            self._wake.notify_all()

    def run_pending(self) -> int:
        """Make the full counts asked for, in this thread (tests, and a board without a background thread)."""
        done = 0
        while True:
            with self._lock:
                if not self._wanted:
                    return done
                partition = self._wanted.popleft()
            self.count_in_full(partition)
            done += 1

    def settle(self, timeout: float = 60.0) -> bool:
        """Wait until the background thread has made every full count asked for (the benchmark)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._wanted or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._wake.wait(left)
        return True

    def forget(self) -> None:
        """Read every count again at the next request (after an action changed them)."""
        with self._lock:
            for known in self._known.values():
                known.bounded = None
            self._rings.clear()


def _sum(cells: list[Cell]) -> Cell:
    total = Cell(0)
    for cell in cells:
        total = total + cell
    return total
