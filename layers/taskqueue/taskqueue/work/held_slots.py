"""Running-limit slots one worker run holds while it claims: taken once, then serving task after task.

A slot taken for a claim is kept when its task's outcome is recorded while the run still claims, so its next claim
needs no read or write of the slots; the spare ones are freed when the run stops claiming, and a running task's
slot when that task ends after. Every slot the run holds (spare or in use) is renewed on its own short cadence
(``renew``: SLOT_RENEW_SECONDS, a lease of SLOT_LEASE_SECONDS, ``store/control.py``), not with its task's lease, so
a crashed run's slots come back within seconds while its tasks come back when their own (long) leases pass.

This object keeps each slot's current token (a renewal moves its expiry): a ``Lease.slot`` names the slot, and
``done`` frees the token as last renewed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from aws_lambda_powertools import Logger

from taskqueue.core.clock import Clock
from taskqueue.core.errors import TaskQueueError
from taskqueue.store import TaskStore, Token
from taskqueue.store.control import SLOT_LEASE_SECONDS, SLOT_RENEW_SECONDS
from taskqueue.work.claim_control import ClaimControl

logger = Logger(child=True)


class HeldSlots:
    """``on_error()``: a slot could not be freed (it lapses with its lease); the run counts it."""

    def __init__(self, store: TaskStore, control: ClaimControl, on_error: Callable[[], None], clock: Clock) -> None:
        self._store = store
        self._control = control
        self._on_error = on_error
        self._clock = clock
        # One lock for the tokens and their writes: a renewal and a free of one slot never cross (a free with the
        # expiry before a renewal would fail its condition and leave the slot to lapse).
        self._lock = threading.RLock()
        self._tokens: dict[int, Token] = {}  # slot index -> its token as last taken or renewed: every slot held
        self._spare: list[int] = []  # held, no task uses them now
        self._claiming = True
        self._renewed_at: float | None = None

    @property
    def held(self) -> int:
        with self._lock:
            return len(self._tokens)

    def for_claims(self, wanted: int) -> list[Token] | None:
        """Slots for ``wanted`` claims: spare ones first, then new ones (one read of the slots, a write each);
        ``None`` when the queue has no running limit, ``[]`` when every slot is held."""
        if self._store.running_limit(self._control.queue) is None:
            return None
        with self._lock:
            got = [self._tokens[index] for index in self._spare[:wanted]]
            self._spare = self._spare[wanted:]
        if len(got) < wanted:
            try:
                taken = self._control.take_slots(wanted - len(got)) or []
            except TaskQueueError:
                self.keep(got)
                raise
            with self._lock:
                if not self._tokens:
                    self._renewed_at = self._clock.monotonic()
                self._tokens.update({token.index: token for token in taken})
            got += taken
        return got

    def keep(self, slots: list[Token]) -> None:
        """Slots taken for claims that were lost: kept for the next ones."""
        with self._lock:
            self._spare.extend(slot.index for slot in slots if slot.index in self._tokens)

    def done(self, slot: Token) -> None:
        """A task's slot after its outcome: kept for the next claim while this run claims, else freed."""
        with self._lock:
            if slot.index not in self._tokens:  # lost to another worker after it lapsed: nothing to free
                return
            if self._claiming:
                self._spare.append(slot.index)
                return
            self._free(self._tokens.pop(slot.index))

    def stop_claiming(self) -> None:
        with self._lock:
            self._claiming = False
            spare, self._spare = self._spare, []
            for index in spare:
                self._free(self._tokens.pop(index))

    def renew(self) -> None:
        """Renew every slot held, once SLOT_RENEW_SECONDS have passed since the last renewal (the run's loop calls
        this on each round; a round never waits longer than a second). A refused renewal is tried again at the next
        round; a slot found lapsed and taken is dropped (its task, if any, runs on: the limit may be passed by one
        until it ends, which the log says)."""
        now = self._clock.monotonic()
        with self._lock:
            if not self._tokens or (self._renewed_at is not None and now - self._renewed_at < SLOT_RENEW_SECONDS):
                return
            self._renewed_at = now
            expires = self._clock.now_ms() + int(SLOT_LEASE_SECONDS * 1000)
            for index, token in list(self._tokens.items()):
                try:
                    renewed = self._store.renew_token(token, expires)
                except TaskQueueError as exc:  # about three renewals may fail before the slot lapses
                    logger.warning("running-limit slot renewal refused; trying again", extra={"error": str(exc)})
                    self._renewed_at = None
                    continue
                if renewed is None:
                    logger.warning("running-limit slot lost: it lapsed and another worker took it", extra={"slot": index})
                    del self._tokens[index]
                    self._spare = [spare for spare in self._spare if spare != index]
                else:
                    self._tokens[index] = renewed

    def _free(self, slot: Token) -> None:
        try:
            self._control.free_slot(slot)
        except Exception as exc:  # it lapses with its lease: the limit is one lower until then
            self._on_error()
            logger.warning("could not free a running-limit slot; it lapses with its lease", extra={"error": str(exc)})
