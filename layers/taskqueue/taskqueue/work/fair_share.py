"""One worker run's part in fair share (``taskqueue.core.fairness``; docs/fairness.md): where it stands on each shard's
ring of groups, which groups it holds back (at a limit or paused), and the per-group limits it applies at claim time.

- **The cursor**: after each claim, the run's next look starts just after the claimed task's group, so every group
  with waiting work comes round in turn, for every worker, with no shared write per claim.
- **Recent use**: each group's runner-seconds on this run, halving every USE_HALF_LIFE_SECONDS, each running task counted
  as at least the run's mean task time; a look's candidates are claimed least used first (``order``), so a quiet group's burst drains
  before the busy group takes another slot.
- **Concurrency** (GROUP_CONCURRENCY or the group's own setting): a claim of a grouped task first takes one of the
  group's slots (leased items until the invocation's end, as the queue's running limit); the slot is freed when
  its runner returns. No free slot: the group is held back for HOLD_SECONDS and the look passes it over.
- **Rate** (GROUP_RATE_LIMIT or the group's own): a claim counts in the group's fixed window first; a full window
  holds the group back until the next one. Held-back work waits; only its TTL sheds it, as any waiting task.

The group's settings are read at most every SETTINGS_SECONDS per group (one BatchGetItem for the groups of a look),
and only for groups a look is about to claim from.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from operator import attrgetter

from aws_lambda_powertools import Logger

from taskqueue.core import fairness
from taskqueue.core.clock import Clock
from taskqueue.core.errors import TaskQueueError
from taskqueue.core.fairness import GroupLimits
from taskqueue.store import Candidate, FairTurn, TaskStore, Token
from taskqueue.work.record_view import RecordView

logger = Logger(child=True)

# A group's own settings (an operator's override, a pause) reach a running worker within this long.
SETTINGS_SECONDS = 5.0
# A group found at its concurrency limit is passed over this long before the run tries its slots again.
HOLD_SECONDS = 0.5
# How long a group's use of the runner weighs against it: halved every this many seconds (a busy group's steady use,
# two slots' worth, stays far above a quiet group's burst of a few tasks).
USE_HALF_LIFE_SECONDS = 5.0
# A running task weighs on its group as at least this run's mean task time; this before any task of the run ended.
EXPECTED_TASK_SECONDS = 1.0


class FairShare:
    """``on_error()``: a group slot could not be freed (it lapses with its lease); the run counts it."""

    def __init__(
        self,
        store: TaskStore,
        queue: str,
        owner: str,
        clock: Clock,
        rng: random.Random,
        on_error: Callable[[], None],
        control: RecordView | None = None,
        until_ms: int | None = None,
    ) -> None:
        """``until_ms``: when the run's invocation ends (its group slots are leased until then)."""
        self._control = control
        self._until_ms = until_ms
        self._store = store
        self._queue = queue
        self._owner = owner
        self._clock = clock
        self._rng = rng
        self._on_error = on_error
        self._after: dict[int, str] = {}
        self._held_until: dict[str, int] = {}  # group -> epoch ms until which looks pass it over
        self._looked_ms = 0  # when the last look began (turn): a hold that lapsed since needs a look of its own
        self._limits: dict[str, tuple[float, GroupLimits]] = {}  # group -> (read at, monotonic; its limits)
        self._lock = threading.RLock()
        self._slots: dict[tuple[str, int], Token] = {}  # (group, index) -> the slot as taken
        self._use = fairness.RecentUse(USE_HALF_LIFE_SECONDS)
        self._running: dict[str, tuple[str | None, float]] = {}  # task id -> (its group, claimed at, monotonic)
        self._ended = (0, 0.0)  # tasks of this run ended, their seconds in all

    @property
    def groups(self) -> bool:
        """May the queue have groups? ``False`` only when the queue's record, as this run last read it, says no group
        was ever put on its ring (``hasGroups``): then a look reads no ring."""
        record = None if self._control is None else self._control.record
        return record is None or record.has_groups

    def turn(self) -> FairTurn:
        """Where this run's next look starts on each shard's ring, and the groups it passes over now."""
        now_ms = self._clock.now_ms()
        with self._lock:
            self._held_until = {g: until for g, until in self._held_until.items() if until > now_ms}
            self._looked_ms = now_ms
            return FairTurn(after=dict(self._after), held_back=frozenset(self._held_until), groups=self.groups,
                            on_paused=self._hold)

    def prepare(self, candidates: Sequence[Candidate]) -> None:
        """Read the settings of the groups among ``candidates`` that this run has not read lately (one request)."""
        now = self._clock.monotonic()
        stale = {c.group for c in candidates if c.group is not None
                 and (c.group not in self._limits or now - self._limits[c.group][0] >= SETTINGS_SECONDS)}
        if not stale:
            return
        for group, limits in self._store.group_settings(self._queue, stale).items():
            self._limits[group] = (now, limits)

    def admit(self, candidate: Candidate) -> Token | None | bool:
        """May this run claim ``candidate`` now? ``True``: yes, no group slot needed; a ``Token``: yes, holding that
        group slot (hand it to ``lost`` if the claim is lost, ``done`` once the task's runner returned);
        ``False``: no: its group is paused, at its concurrency limit or out of rate (held back for now)."""
        group = candidate.group
        if group is None:
            return True
        with self._lock:
            if self._held_until.get(group, 0) > self._clock.now_ms():
                return False
        limits = self._limits_of(group)
        now_ms = self._clock.now_ms()
        if limits.paused(now_ms):
            self._hold(group, limits.paused_until_ms or now_ms)
            return False
        slot: Token | None = None
        if limits.concurrency is not None:
            until_ms = self._until_ms if self._until_ms is not None else now_ms + 15 * 60 * 1000
            slot = self._store.take_group_slot(self._queue, group, self._owner, limits.concurrency, until_ms, self._rng)
            if slot is None:
                self._hold(group, now_ms + int(HOLD_SECONDS * 1000))
                return False
            with self._lock:
                self._slots[(group, slot.index)] = slot
        try:
            counted = self._store.take_rate(self._queue, group, limits, now_ms)
        except TaskQueueError:
            if slot is not None:
                self.done(slot)
            raise
        if not counted:
            self._hold(group, fairness.next_window_ms(now_ms, limits.period_seconds))
            if slot is not None:
                self.done(slot)
            return False
        return True if slot is None else slot

    def holds(self, group: str | None) -> bool:
        """Is ``group`` held back now (paused, at its concurrency limit, out of rate)?"""
        if group is None:
            return False
        with self._lock:
            return self._held_until.get(group, 0) > self._clock.now_ms()

    def held_back_for(self) -> float | None:
        """Seconds until the first held-back group may be claimed from again (``None``: none is held back; 0: a hold
        lapsed since the last look, which has not seen that group's tasks yet): a run with nothing else to claim waits
        for it rather than taking the queue for drained."""
        now_ms = self._clock.now_ms()
        with self._lock:
            until = min((u for u in self._held_until.values() if u > self._looked_ms), default=None)
        return None if until is None else max(0, until - now_ms) / 1000

    def next_hold_end_ms(self) -> int | None:
        """When the first group held back now (a pause with an end, a limit) may be claimed from again: a run that
        stops before it has the queue woken then."""
        now_ms = self._clock.now_ms()
        with self._lock:
            return min((u for u in self._held_until.values() if u > now_ms), default=None)

    def claimed(self, candidate: Candidate) -> None:
        """The next look starts after this task's group on its shard's ring; the task's time counts as its group's use."""
        with self._lock:
            self._after[candidate.shard] = "" if candidate.group is None else fairness.ring_sort(candidate.group)
            self._running[candidate.task_id] = (candidate.group, self._clock.monotonic())

    def ended(self, task_id: str) -> None:
        """A task's runner returned: its time so far joins its group's recent use."""
        now = self._clock.monotonic()
        with self._lock:
            group, started = self._running.pop(task_id, (None, None))
            if started is not None:
                self._use.add(group, now - started, now)
                count, seconds = self._ended
                self._ended = (count + 1, seconds + now - started)

    def order(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """A look's candidates in claim order: the groups that used this run's runner least lately first (a free slot
        to a quiet group before the next of a busy one; a running task weighs as at least the run's mean task time),
        then fewer running, the look's round-robin among equals."""
        now = self._clock.monotonic()
        with self._lock:
            running = list(self._running.values())
            finished = {c.group: self._use.of(c.group, now) for c in candidates}
            count, seconds = self._ended
        expected = seconds / count if count else EXPECTED_TASK_SECONDS
        use = fairness.use_with_running(finished, ((group, now - started) for group, started in running), expected)
        return fairness.least_used_first(candidates, attrgetter("group"), use, (group for group, _ in running))

    def lost(self, admitted: Token | bool | None) -> None:
        if isinstance(admitted, Token):
            self.done(admitted)

    def done(self, slot: Token) -> None:
        """A task's runner returned (or its claim was lost): free its group slot."""
        group = slot.queue.rsplit("#group#", 1)[1]
        with self._lock:
            token = self._slots.pop((group, slot.index), None)
        if token is None:
            return
        try:
            self._store.free_token(token)
        except TaskQueueError as exc:
            self._on_error()
            logger.warning("could not free a group slot; it lapses with its lease", extra={"error": str(exc)})

    def free_all(self) -> None:
        """The run is over: give back every group slot it still holds."""
        with self._lock:
            held = list(self._slots.values())
        for slot in held:
            self.done(slot)

    def _limits_of(self, group: str) -> GroupLimits:
        cached = self._limits.get(group)
        if cached is None:
            self.prepare([Candidate("", "", self._queue, 0, 0, None, group)])
            cached = self._limits[group]
        return cached[1]

    def _hold(self, group: str, until_ms: int) -> None:
        with self._lock:
            self._held_until[group] = max(until_ms, self._held_until.get(group, 0))
