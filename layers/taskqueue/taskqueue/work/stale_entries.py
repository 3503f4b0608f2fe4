"""Index entries one run has just claimed, or lost a claim on: passed over for a moment.

A global secondary index shows writes late: right after a claim the index still lists the task as waiting, and a claim
of such an entry fails and still costs a write. So the entry of a task this run has just claimed, or lost a claim on,
is passed over for STALE_ENTRY_SECONDS (a task it released for a retry is not: that entry is real)."""

from __future__ import annotations

import threading

from taskqueue.core.clock import Clock

STALE_ENTRY_SECONDS = 2.0


class StaleEntries:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._until: dict[str, float] = {}  # task id -> monotonic time until which its entry is passed over
        self._lock = threading.Lock()

    def ids(self) -> set[str]:
        """The ids passed over now (forgetting those whose time passed)."""
        now = self._clock.monotonic()
        with self._lock:
            self._until = {task_id: until for task_id, until in self._until.items() if until > now}
            return set(self._until)

    def add(self, task_id: str) -> None:
        with self._lock:
            self._until[task_id] = self._clock.monotonic() + STALE_ENTRY_SECONDS

    def forget(self, task_id: str) -> None:
        with self._lock:
            self._until.pop(task_id, None)
