"""What one worker run knows of its queue's delayed partitions, so it reads them only when an entry may be due.

The queue's record carries the delayed head (``taskqueue.core.delayed_head``, ``store/delayed.py``); this run adds its
own retries, which the record it last read may not show yet, and the earliest entry its last look at the delayed
partitions found. A look that finds none due raises the record's head if it may. While the head is due, a look reads
only the delayed partitions the last refresh found entries in and those of this run's own retries (the scope,
``DelayedScope``), until an entry is announced that is not this run's.
"""

from __future__ import annotations

import threading
from collections.abc import Collection

from taskqueue.core import delayed_head
from taskqueue.core.clock import Clock
from taskqueue.core.delayed_head import DelayedScope, Part
from taskqueue.core.record import INDEX_LAG_ALLOWANCE_SECONDS
from taskqueue.store import Candidate, FairTurn, TaskStore
from taskqueue.work.record_view import RecordView

# A look that read the delayed partitions and got no delayed entry refreshes the head (``refresh``: every delayed
# partition of the queue, one per group on the ring). When the last refresh found an entry due already, which the looks
# keep passing over (an old retry behind newer work in a LIFO queue), the next refresh would find the same entry: it
# is made again only after this long. Meanwhile the looks read the delayed partitions anyway.
DUE_REFRESH_SECONDS = 2.0


class DelayedView:
    def __init__(self, store: TaskStore, control: RecordView, clock: Clock) -> None:
        self._store = store
        self._control = control
        self._clock = clock
        self._lock = threading.Lock()
        # This run's own retries, task id -> (not-before, when announced, its delayed partition): forgotten once
        # claimed, or once a look late enough saw them.
        self._own: dict[str, tuple[int, int, Part]] = {}
        self._scope: DelayedScope | None = None  # the delayed partitions the last refresh found entries in
        self._own_announced = 0  # this run's announcements since that refresh began
        self._announced_ms: int | None = None  # when this run last announced a retry of its own
        self._dirty = False  # this run claimed a delayed entry: the head may be raised at its next look
        self._found: tuple[int, int | None] | None = None  # (look ms, earliest delayed entry that look found)

    def worth_reading(self, now_ms: int) -> bool:
        """Whether a look at ``now_ms`` reads the delayed partitions."""
        return self._dirty or delayed_head.delayed_due(self._known_head(), now_ms)

    def look(
        self, wanted: int, look_ms: int, skip: Collection[str] = (), fair: FairTurn | None = None
    ) -> tuple[list[Candidate], int]:
        """The next ``wanted`` claimable tasks not in ``skip``, and how many entries of ``skip`` the look met; the
        delayed partitions only when an entry may be due. A look at them that finds none due finds the next one
        and raises the record's head to it if it may."""
        query_delayed = self.worth_reading(look_ms)
        candidates, skipped = self._store.look(
            self._control.queue, wanted, look_ms, delayed=query_delayed, skip=skip, fair=fair,
            delayed_parts=self.parts() if query_delayed else None,
        )
        if query_delayed and not any(c.delayed for c in candidates) and not self._due_found_lately(look_ms):
            self.refresh()
        return candidates, skipped

    def parts(self) -> frozenset[Part] | None:
        """The delayed partitions a look reads now (``None``: every one): the scope's and this run's own retries'."""
        record = self._control.record
        with self._lock:
            if record is None or not delayed_head.scope_holds(self._scope, record.delayed_seq, self._own_announced):
                return None
            assert self._scope is not None
            return self._scope.parts | {part for _, _, part in self._own.values()}

    def _due_found_lately(self, now_ms: int) -> bool:
        """The last refresh, less than DUE_REFRESH_SECONDS ago, found an entry due already (and no delayed entry was
        claimed since, which could have been it)."""
        if self._found is None or self._dirty:
            return False
        at, found = self._found
        return found is not None and found <= at and now_ms - at < DUE_REFRESH_SECONDS * 1000

    def refresh(self) -> None:
        """Find the earliest delayed entry, and raise the record's head to it when the record allows."""
        queue = self._control.queue
        started_ms = self._clock.now_ms()
        self._dirty = False
        with self._lock:
            announced = self._announced_ms
            # Own retries that a look now sees for sure (the index's lag allowance passed): the found head covers them.
            lag_ms = int(INDEX_LAG_ALLOWANCE_SECONDS * 1000)
            self._own = {t: v for t, v in self._own.items() if started_ms < v[1] + lag_ms}
            self._own_announced = 0
        if announced is not None and announced >= self._control.record_read_ms:
            # The record this run holds predates its own announcement: read it, or the raise would name a stale seq.
            self._control.read()
        seen = self._control.record
        heads = self._store.due_heads(queue, started_ms)
        found = min(heads.values(), default=None)
        self._found = (started_ms, found)
        with self._lock:
            self._scope = delayed_head.scope_of(heads, seen, started_ms)
        if seen is not None:
            record = self._store.raise_delayed_head(queue, seen, found, started_ms)
            if record is not None:
                self._control.see_record(record)

    def due_in_seconds(self) -> float | None:
        """When the next delayed entry falls due (seconds from now; 0: due), or ``None``: none known."""
        now_ms = self._clock.now_ms()
        due = self._known_head()
        if due is not None and due <= now_ms and self._found is not None:
            due = delayed_head.earliest(self._found[1], self._own_head())
        return None if due is None else max(0.0, (due - now_ms) / 1000)

    def next_due_ms(self) -> int | None:
        """When the next delayed entry falls due (epoch ms), or ``None``: none known."""
        due_in = self.due_in_seconds()
        return None if due_in is None else self._clock.now_ms() + int(due_in * 1000)

    def released(self, task_id: str, not_before_ms: int, part: Part) -> None:
        """This run released a task for a retry at ``not_before_ms`` into the delayed partition ``part`` (and the
        release announced it)."""
        with self._lock:
            self._announced_ms = self._clock.now_ms()
            self._own[task_id] = (not_before_ms, self._announced_ms, part)
            self._own_announced += 1

    def claimed(self, candidate: Candidate) -> None:
        with self._lock:
            self._own.pop(candidate.task_id, None)  # its retry is claimed: no longer waiting
        if candidate.delayed:
            self._dirty = True  # a delayed entry left: the next look may raise the head

    def _own_head(self) -> int | None:
        with self._lock:
            return min((nb for nb, _, _ in self._own.values()), default=None)

    def _known_head(self) -> int | None:
        """The earliest not-before this run knows of: the record's head (unknown record: 0, look), its own retries'."""
        record = self._control.record
        return delayed_head.earliest(0 if record is None else record.delayed_head_ms, self._own_head())
