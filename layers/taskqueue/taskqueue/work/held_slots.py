"""Running-limit slots one worker run holds while it claims: taken once, then serving task after task.

A slot taken for a claim is kept when its task's runner returns while the run still claims, so its next claim
needs no read or write of the slots; the spare ones are freed when the run stops claiming, and a running task's
slot when that task ends after. Every slot a task uses is renewed on its own short cadence (``renew``: once
SLOT_RENEW_SECONDS of its lease of SLOT_LEASE_SECONDS have passed, ``store/control.py``), not with its task's lease,
so a crashed run's slots come back within seconds while its tasks come back when their own (long) leases pass. A
spare slot (held, no task on it) is not renewed: it is renewed, or dropped if it lapsed, when it next serves a claim.

The queue's watcher holds its slots on a long lease (WATCHER_SLOT_LEASE_SECONDS, renewed at half of it; issue 29:
the renewals were a third of a run's writes at 10 tasks/s), good only while it watches: before its watch ends
(``leave_watch``, called by the watch before its last write) it frees its spare slots or shortens them with the others
to SLOT_LEASE_SECONDS, so a long-leased slot of an owner that does not watch is a lapsed watcher's, which the next
watcher takes at once (``store/control.py``).

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
from taskqueue.work.claim_control import ClaimControl

logger = Logger(child=True)


class HeldSlots:
    """``on_error()``: a slot could not be freed (it lapses with its lease); the run counts it."""

    def __init__(
        self, store: TaskStore, control: ClaimControl, on_error: Callable[[], None], clock: Clock,
        watching: Callable[[], bool] = lambda: False, *, guess: bool = False,
    ) -> None:
        """``watching()``: does the run watch its queue now (its slots then take the watcher's long lease)? ``guess``:
        take slots by trying them before reading them (a stream start, which mostly finds every slot free)."""
        self._guess = guess
        self._store = store
        self._control = control
        self._on_error = on_error
        self._clock = clock
        self._watching = watching
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
                taken = self._control.take_slots(wanted - len(got), watcher=self._watching(), guess=self._guess) or []
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
            return self._relet(index, self._watching(), now_ms)
        except TaskQueueError as exc:
            logger.warning("running-limit slot renewal refused; taking another", extra={"error": str(exc)})
            self._spare.append(index)
            return None

    def _relet(self, index: int, watched: bool, now_ms: int) -> Token | None:
        """Lease the held slot ``index`` anew (the watcher's lease or a helper's); ``None``, and dropped from the run's
        slots, if another worker took it after it lapsed. A refused write raises. Holds the lock."""
        renewed = self._store.relet_slot(self._tokens[index], watched=watched, now_ms=now_ms)
        if renewed is None:
            del self._tokens[index]
            if index in self._spare:
                self._spare.remove(index)
        else:
            self._tokens[index] = renewed
        return renewed

    def _due(self, token: Token, now_ms: int) -> bool:
        """Half a slot's lease has passed since it was taken or renewed (SLOT_RENEW_SECONDS of SLOT_LEASE_SECONDS, or
        half the watcher's), or its lease is not the one the run's watch calls for now (a helper that became the
        watcher; a watch that ended without ``leave_watch``, which a lapse does)."""
        if token.watched != self._watching():
            return True
        return token.expires_ms - now_ms <= token.lease_ms // 2

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
                    if self._relet(index, self._watching(), now_ms) is None:
                        logger.warning("running-limit slot lost: it lapsed and another worker took it", extra={"slot": index})
                except TaskQueueError as exc:  # tried again at the next round
                    logger.warning("running-limit slot renewal refused; trying again", extra={"error": str(exc)})

    def leave_watch(self, *, free_spare: bool) -> None:
        """The run's watch is about to end (the watch calls this before its last write): its slots may not keep the
        watcher's long lease, which the next watcher would take. Spare ones are freed (``free_spare``: the run stops)
        or shortened with the others to SLOT_LEASE_SECONDS (it claims on, or its tasks run on). A slot that could
        not be shortened is dropped if another worker took it, else kept and tried again by ``renew``."""
        with self._lock:
            now_ms = self._clock.now_ms()
            if free_spare:
                spare, self._spare = self._spare, []
                for index in spare:
                    self._free(self._tokens.pop(index))
            for index, token in list(self._tokens.items()):
                if not token.watched:
                    continue
                try:
                    if self._relet(index, False, now_ms) is None:
                        logger.warning("running-limit slot lost: another worker took it", extra={"slot": index})
                except TaskQueueError as exc:
                    self._on_error()
                    logger.warning("could not shorten a running-limit slot as the watch ends; trying again",
                                   extra={"error": str(exc)})

    def _free(self, slot: Token) -> None:
        try:
            self._control.free_slot(slot)
        except Exception as exc:  # it lapses with its lease: the limit is one lower until then
            self._on_error()
            logger.warning("could not free a running-limit slot; it lapses with its lease", extra={"error": str(exc)})
