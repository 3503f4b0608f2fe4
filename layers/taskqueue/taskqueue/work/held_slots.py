"""The running-limit slots one worker run holds: taken when a claim needs one, kept for the run's next claims, and
given back when the run ends. Each is leased until the end of the invocation (``until_ms``: its remaining time when
it started), which no task of the run outlives, so a slot never needs renewing and never lapses under a running task,
however slow a request or a thread is (``store/control.py``)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from aws_lambda_powertools import Logger

from taskqueue.core.errors import TaskQueueError
from taskqueue.store import TaskStore, Token

logger = Logger(child=True)

class HeldSlots:
    """``on_error()``: a slot could not be given back (it lapses at its lease's end); the run counts it."""

    def __init__(self, store: TaskStore, queue: str, owner: str, until_ms: int, on_error: Callable[[], None]) -> None:
        self._store = store
        self._queue = queue
        self._owner = owner
        self._until_ms = until_ms
        self._on_error = on_error
        self._spare: list[Token] = []  # held, no task on them now
        self._held: dict[int, Token] = {}
        self._lock = threading.Lock()  # the lists only: no request is made under it
        self.short = False  # the last request for slots got fewer than it asked for: the limit was reached
        self._claiming = True  # False once claiming is over: a slot no task uses goes back at once
        self._came_free: Callable[[], None] | None = None

    @property
    def held(self) -> int:
        return len(self._held)

    def for_claims(self, wanted: int, *, guess: bool = False) -> list[Token] | None:
        """Slots for ``wanted`` claims: spare ones first, then new ones; ``None`` when the queue has no running limit,
        ``[]`` when every slot is held. ``guess``: try slots before reading them (most likely all free)."""
        if self._store.running_limit(self._queue) is None:
            return None
        with self._lock:
            got, self._spare = self._spare[:wanted], self._spare[wanted:]
        if len(got) < wanted:
            try:
                taken = self._store.acquire_slots(self._queue, self._owner, wanted - len(got), self._until_ms, guess=guess)
            except TaskQueueError:
                self.keep(got)
                raise
            with self._lock:
                self._held.update({token.index: token for token in taken})
            self.short = len(taken) < wanted - len(got)
            got += taken
        return got

    def keep(self, slots: list[Token]) -> None:
        """Slots taken for claims that were not made, or whose task's runner returned: kept for the next claims (given
        back once claiming is over)."""
        with self._lock:
            mine = [slot for slot in slots if slot.index in self._held]
            if self._claiming:
                self._spare.extend(mine)
                return
            for slot in mine:
                del self._held[slot.index]
        for slot in mine:
            self._free(slot)

    def claims_over(self, came_free: Callable[[], None] | None = None) -> None:
        """The run claims no more (its budget, the queue paused or drained): the spare slots go back now, and each
        slot whose task ends from now on, rather than all at the run's end. Another worker's claims may use them
        while this run's last tasks still run; ``came_free()`` is told after each (to have that worker started)."""
        with self._lock:
            self._claiming = False
            self._came_free = came_free
            spare, self._spare = self._spare, []
            for slot in spare:
                self._held.pop(slot.index, None)
        for slot in spare:
            self._free(slot)

    def free_all(self) -> None:
        """The run is over: give every slot back (a refusal leaves it to lapse at the invocation's end)."""
        with self._lock:
            held, self._held, self._spare = list(self._held.values()), {}, []
        for slot in held:
            self._free(slot)

    def _free(self, slot: Token) -> None:
        try:
            self._store.free_token(slot)  # tried a few times by the store
        except TaskQueueError as exc:
            self._on_error()
            logger.warning("could not free a running-limit slot; it lapses with its lease", extra={"error": str(exc)})
            return
        if not self._claiming and self._came_free is not None:
            self._came_free()
