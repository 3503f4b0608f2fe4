"""Whether a lone watcher's claims leave the lease mark off (store/unmarked_leases.py): while its tasks end quickly.

A task that ends within LEASE_MARK_AFTER_SECONDS of an unmarked claim saves the mark's index write; one that runs on
is marked by a write of its own (its item and its index entry), one write unit more than a claim that marks. So the
unmarked claim pays while fewer than half of the run's tasks run on: the run judges by its last RECENT_RUNS tasks,
and claims unmarked until it has seen any (a run of long tasks pays one late mark, then marks as it claims).
"""

from __future__ import annotations

import threading
from collections import deque

from taskqueue.store.unmarked_leases import LEASE_MARK_AFTER_SECONDS

RECENT_RUNS = 8


class MarkChoice:
    def __init__(self) -> None:
        self._ran_on: deque[bool] = deque(maxlen=RECENT_RUNS)  # per recent task: did it run past the mark's time?
        self._lock = threading.Lock()

    def ran(self, seconds: float) -> None:
        """A task's runner returned ``seconds`` after its claim."""
        with self._lock:
            self._ran_on.append(seconds >= LEASE_MARK_AFTER_SECONDS)

    @property
    def unmarked_pays(self) -> bool:
        with self._lock:
            return 2 * sum(self._ran_on) < len(self._ran_on) or not self._ran_on
