"""Running-limit slots one worker run holds while it claims: taken once, then serving task after task.

A slot taken for a claim is kept when its task's runner returns while the run still claims, so its next claim
needs no read or write of the slots; the spare ones are freed when the run stops claiming, and a running task's
slot when that task ends after. Every slot a task uses is renewed on its own short cadence (``renew``: once
SLOT_RENEW_SECONDS of its lease of SLOT_LEASE_SECONDS have passed, ``store/control.py``), not with its task's lease,
so a crashed run's slots come back within seconds while its tasks come back when their own (long) leases pass. A
spare slot (held, no task on it) is not renewed: it is renewed, or dropped if it lapsed, when it next serves a claim.

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
        # The last read of the slots got fewer than it asked for: every slot of the limit was held, by this run or others
        # (a claim served from this run's spare slots reads nothing, and leaves it as it was).
        self.short = False

    @property
    def held(self) -> int:
        with self._lock:
            return len(self._tokens)

    def for_claims(self, wanted: int) -> list[Token] | None:
        """Slots for ``wanted`` claims: spare ones first, then new ones (one read of the slots, a write each);
        ``None`` when the queue has no running limit, ``[]`` when every slot is held.

        A spare slot is not renewed while no task uses it: before it serves a claim it is renewed if half its lease
        has passed, and dropped if its lease lapsed (another worker may hold it now; a new one is taken instead)."""
        if self._store.running_limit(self._control.queue) is None:
            return None
        with self._lock:
            spare, self._spare = self._spare, []
            got: list[Token] = []
            for index in spare:
                if len(got) == wanted:
                    self._spare.append(index)
                    continue
                token = self._fresh(index)
                if token is not None:
                    got.append(token)
        if len(got) < wanted:
            try:
                taken = self._control.take_slots(wanted - len(got)) or []
            except TaskQueueError:
                self.keep(got)
                raise
            with self._lock:
                self._tokens.update({token.index: token for token in taken})
            self.short = len(taken) < wanted - len(got)
            got += taken
        return got

    def _fresh(self, index: int) -> Token | None:
        """The spare slot ``index`` with at least half its lease left (renewed if need be), or ``None`` (dropped: it
        lapsed, or its renewal was refused; a refused one is kept as spare for the next claim). Holds the lock."""
        token = self._tokens[index]
        now_ms = self._clock.now_ms()
        if token.expires_ms <= now_ms:  # lapsed while spare: maybe another worker's now; nothing to free
            del self._tokens[index]
            return None
        if not self._due(token, now_ms):
            return token
        try:
            renewed = self._store.renew_token(token, now_ms + int(SLOT_LEASE_SECONDS * 1000))
        except TaskQueueError as exc:
            logger.warning("running-limit slot renewal refused; taking another", extra={"error": str(exc)})
            self._spare.append(index)
            return None
        if renewed is None:
            del self._tokens[index]
            return None
        self._tokens[index] = renewed
        return renewed

    @staticmethod
    def _due(token: Token, now_ms: int) -> bool:
        """Half a slot's lease (SLOT_LEASE_SECONDS - SLOT_RENEW_SECONDS) has passed since it was taken or renewed."""
        return token.expires_ms - now_ms <= (SLOT_LEASE_SECONDS - SLOT_RENEW_SECONDS) * 1000

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
        """Renew each slot a task uses once half its lease has passed (SLOT_RENEW_SECONDS; the run's loop calls this
        on each round, and a round never waits longer than a second, so a refused renewal is tried about three times
        before the slot lapses). A spare slot is not renewed: no task runs on it, so its lapse harms nothing, and
        ``for_claims`` renews it (or drops it) before it serves a claim. A slot found lapsed and taken is dropped (its
        task runs on: the limit may be passed by one until it ends, which the log says)."""
        with self._lock:
            if not self._tokens:
                return
            now_ms = self._clock.now_ms()
            spare = set(self._spare)
            for index, token in list(self._tokens.items()):
                if index in spare or not self._due(token, now_ms):
                    continue
                try:
                    renewed = self._store.renew_token(token, now_ms + int(SLOT_LEASE_SECONDS * 1000))
                except TaskQueueError as exc:  # tried again at the next round
                    logger.warning("running-limit slot renewal refused; trying again", extra={"error": str(exc)})
                    continue
                if renewed is None:
                    logger.warning("running-limit slot lost: it lapsed and another worker took it", extra={"slot": index})
                    del self._tokens[index]
                else:
                    self._tokens[index] = renewed

    def _free(self, slot: Token) -> None:
        try:
            self._control.free_slot(slot)
        except Exception as exc:  # it lapses with its lease: the limit is one lower until then
            self._on_error()
            logger.warning("could not free a running-limit slot; it lapses with its lease", extra={"error": str(exc)})
