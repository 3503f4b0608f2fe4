"""Which matcher of the matching queue reads and plans: the *planner*, on a short lease on the queue's record.

Matchers start for every new call and every agent who becomes available (the tables' streams), so several may run at
once. One plans (reads the idle agents and the waiting calls, pairs them); the others help commit its shared plans
when many agents are idle (``shared_plan``), or end. A matcher that finds a live planner *knocks* (one write): the
planner ends only by a write conditional on the knocks it last saw, so work that arrived during its last pass is
always passed over again, by it or by the next planner. A planner that dies is trusted until its lease lapses
(PLANNER_LEASE_SECONDS); the next start, or the safety net, takes over.
"""

from __future__ import annotations

from taskqueue.core.clock import Clock
from taskqueue.store import TaskStore
from taskqueue.store.record import PLANNER_LEASE_SECONDS

# A planner renews its lease at each pass, and at least this often.
PLANNER_RENEW_SECONDS = 1.5


class Planner:
    def __init__(self, store: TaskStore, queue: str, owner: str, clock: Clock) -> None:
        self._store = store
        self._queue = queue
        self._owner = owner
        self._clock = clock
        self._knocks: int | None = None
        self._renewed = 0.0
        self.planning = False

    def begin(self) -> bool:
        """Plan, if no other live matcher does; else knock (its next pass sees what brought this one) and return
        ``False``."""
        knocks = self._store.take_planner(self._queue, self._owner, self._clock.now_ms())
        if knocks is None:
            self._store.knock(self._queue)
            return False
        self._knocks, self._renewed, self.planning = knocks, self._clock.monotonic(), True
        return True

    def keep(self) -> None:
        """Before a pass: renew the lease when due (and learn the knocks so far: this pass sees their work)."""
        if self.planning and self._clock.monotonic() - self._renewed >= min(PLANNER_RENEW_SECONDS, PLANNER_LEASE_SECONDS / 2):
            self.begin_again()

    def begin_again(self) -> None:
        knocks = self._store.take_planner(self._queue, self._owner, self._clock.now_ms())
        if knocks is not None:
            self._knocks, self._renewed = knocks, self._clock.monotonic()

    def may_end(self) -> bool:
        """End planning, unless a matcher knocked since this planner's last pass began (then: pass again)."""
        if not self.planning or self._knocks is None:
            return True
        if self._store.release_planner(self._queue, self._owner, self._knocks):
            self.planning = False
            return True
        self.begin_again()  # knocked: the next pass sees what arrived
        return False

    def end(self) -> None:
        """The run is over (its budget, a pause): let the next matcher plan at once."""
        if self.planning and self._knocks is not None:
            self._store.release_planner(self._queue, self._owner, self._knocks)
            self.planning = False
