"""Running-limit slots one worker run holds while it claims: taken once, then serving task after task.

A slot taken for a claim is kept when its task's outcome is recorded while the run still claims, so its next claim
needs no read or write of the slots; the spare ones are freed when the run stops claiming, and a running task's
slot when that task ends after. A crashed run's slots lapse with their leases (``store/control.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from aws_lambda_powertools import Logger

from taskqueue.core.errors import TaskQueueError
from taskqueue.store import TaskStore, Token
from taskqueue.work.claim_control import ClaimControl

logger = Logger(child=True)


class HeldSlots:
    """``on_error()``: a slot could not be freed (it lapses with its lease); the run counts it."""

    def __init__(self, store: TaskStore, control: ClaimControl, on_error: Callable[[], None]) -> None:
        self._store = store
        self._control = control
        self._on_error = on_error
        self._lock = threading.Lock()
        self._spare: list[Token] = []  # held, no task uses them now
        self._held = 0
        self._claiming = True

    @property
    def held(self) -> int:
        with self._lock:
            return self._held

    def for_claims(self, wanted: int) -> list[Token] | None:
        """Slots for ``wanted`` claims: spare ones first, then new ones (one read of the slots, a write each);
        ``None`` when the queue has no running limit, ``[]`` when every slot is held."""
        if self._store.running_limit(self._control.queue) is None:
            return None
        with self._lock:
            got, self._spare = self._spare[:wanted], self._spare[wanted:]
        if len(got) < wanted:
            try:
                taken = self._control.take_slots(wanted - len(got)) or []
            except TaskQueueError:
                self.keep(got)
                raise
            with self._lock:
                self._held += len(taken)
            got += taken
        return got

    def keep(self, slots: list[Token]) -> None:
        """Slots taken for claims that were lost: kept for the next ones."""
        with self._lock:
            self._spare.extend(slots)

    def done(self, slot: Token) -> None:
        """A task's slot after its outcome: kept for the next claim while this run claims, else freed."""
        with self._lock:
            if self._claiming:
                self._spare.append(slot)
                return
            self._held -= 1
        self._free(slot)

    def stop_claiming(self) -> None:
        with self._lock:
            self._claiming = False
            spare, self._spare = self._spare, []
            self._held -= len(spare)
        for slot in spare:
            self._free(slot)

    def _free(self, slot: Token) -> None:
        try:
            self._control.free_slot(slot)
        except Exception as exc:  # it lapses with its lease: the limit is one lower until then
            self._on_error()
            logger.warning("could not free a running-limit slot; it lapses with its lease", extra={"error": str(exc)})
