"""A worker's side of the wake-up handshake (ProcessTasks, the Matcher): watch the queue while claiming, and stop only
when the handshake allows it (``taskqueue.core.handshake``); the linger on an empty queue before a stop is
``taskqueue.wakeups.lingering``.

One worker watches a queue at a time (the first of a run's workers to arrive); any other worker of the queue
(a helper, when several may run) claims alongside it and stops as soon as the queue is empty: producers count
on the watcher alone.

A DynamoDB refusal is handed to the run's ``refused`` callback (as ``taskqueue.work.claim_control`` does: it logs and
counts a passing one, or re-raises); without one, a passing refusal (throttling past the SDK's retries) is logged
and anything else raised. A passing refusal never fails a run here: a watch that cannot begin leaves the run a
helper (producers then wake another worker), a renewal is tried again at the next look, and a stop that cannot be
written is looked at again after a pause.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aws_lambda_powertools import Logger

from taskqueue.core.clock import Clock
from taskqueue.core.errors import TaskQueueError
from taskqueue.core.handshake import (
    INDEX_LAG_ALLOWANCE_SECONDS,
    LINGER_POLL_SECONDS,
    READ_REUSE_SECONDS,
    WATCH_LEASE_SECONDS,
    WATCH_RENEW_SECONDS,
    WakeRecord,
    renewal_due,
    stop_look_due_ms,
)
from taskqueue.store import TaskStore, dynamo

logger = Logger(child=True)

# While lingering on an empty queue, or while its runner has a free slot and runs tasks, a watcher looks for new writes
# every LINGER_POLL_SECONDS (an eventually consistent read of one small item: half a read unit; at most 7,200 reads,
# 3,600 read units per worker-hour, $0.00045 on demand), sooner on a fast queue (core.handshake.poll_seconds).
ARRIVALS_POLL_SECONDS = LINGER_POLL_SECONDS
# An index-looking watcher (ProcessTasks) peeks at the index at that pace instead (producers that find it watching
# skip their touch, so ``seq`` does not tell of their writes; one query of a shard's head, half a read unit), and
# reads the record this often for what else it carries (pause, the delayed head, the touches of producers that did
# touch).
RECORD_POLL_SECONDS = 1.5


@dataclass(frozen=True)
class LookAgain:
    """The stop was not allowed yet: look at the index again from ``at_ms`` (epoch ms) on."""

    at_ms: int


STOPPED = "stopped"

# refused(what, error, then) -> True when the error was passing and is handled (logged, counted); else False.
Refused = Callable[[str, Exception, str], bool]


def _log_passing(what: str, exc: Exception, then: str) -> bool:
    if not dynamo.is_retryable(exc):
        return False
    logger.warning(f"{what} was refused for now; {then}", extra={"error": str(exc)})
    return True


class Watch:
    def __init__(
        self,
        store: TaskStore,
        queue: str,
        owner: str,
        clock: Clock,
        *,
        lag_seconds: float = INDEX_LAG_ALLOWANCE_SECONDS,
        lease_seconds: float = WATCH_LEASE_SECONDS,
        renew_seconds: float = WATCH_RENEW_SECONDS,
        refused: Refused = _log_passing,
        on_record: Callable[[WakeRecord], None] | None = None,
        index_peek: Callable[[], bool] | None = None,
        on_leave: Callable[[bool], None] | None = None,
    ) -> None:
        """``on_record``: told every record this watch reads or writes (the worker's ClaimControl keeps the latest:
        it carries ``paused`` and the delayed head, so the worker reads the record no more than the watch does).

        ``index_peek`` (ProcessTasks; issue 29): does the index show claimable work this run has not looked for? With
        it the watcher looks at the index itself for new work, tells producers so (``indexLooks``: a producer that
        finds it watching and not stopping skips its touch, ``core.handshake.touch_needed``), and stops in two steps
        (``try_stop``). Without it (the Matcher) producers always touch and the record alone tells of new work.

        ``on_leave(stopping)`` (ProcessTasks): called before the write that ends the watch (``stopping``: the run stops
        claiming), so the run's running-limit slots give up the watcher's long lease first (work/held_slots.py)."""
        self._on_leave = on_leave
        self._on_record = on_record
        self._index_peek = index_peek
        self.looks_at_index = index_peek is not None
        self._index_peeked_at: float | None = None
        # (seq, when on this run's clock) of the first step of a stop: ``stopping`` set while ``seq`` held.
        self._stop_marked: tuple[int, int] | None = None
        self._unwatched_ms: int | None = None  # when ``end`` stopped the watch (this run's clock)
        self._store = store
        self._queue = queue
        self._owner = owner
        self._clock = clock
        self._lag = lag_seconds
        self._lease = lease_seconds
        self._renew = renew_seconds
        self._refused = refused
        self.watching = False
        self.began = False  # this run watched its queue at some point
        # The watch could not begin for a passing refusal (not because another worker watches): ``keep`` tries again,
        # so the wake-up this run answers does not stay "in flight" for producers while nobody watches.
        self.begin_refused = False
        self._begin_tried: float | None = None  # monotonic time of the last attempt to begin
        self._read_at: float | None = None  # monotonic time of the last look for new writes
        self.seen: WakeRecord | None = None  # the record as this run last read it strongly consistently
        # (seq, when this run first read it, on its own clock): the stop rule's bound on a skewed producer's lastWrite.
        self._seq_first_read: tuple[int, int] = (-1, 0)
        self.latest = WakeRecord()  # the newest record this run has read (any read): what it knows was written
        # Read reuse (``allow_read_reuse``): once asked of a renewal, this watch's stop and end wait READ_REUSE_SECONDS more.
        self.read_reuse_wanted = self._read_reuse_on = False

    def begin(self) -> bool:
        """Watch the queue if no other live worker does; ``False``: this run is a helper."""
        self._begin_tried = self._clock.monotonic()
        try:
            record = self._store.watch(self._queue, self._owner, self._until(), index_looks=self.looks_at_index)
        except TaskQueueError as exc:
            if not self._refused("watching the queue", exc, "running as a helper, trying again"):
                raise
            self.begin_refused = True
            return False
        self.begin_refused = False
        if record is not None:
            self.watching = self.began = True
            self._see(record)
        return self.watching

    def keep(self) -> None:
        """Renew the watch every ``renew_seconds`` (WATCH_RENEW_SECONDS: one write per 1.5 s), whatever the run
        does; a watch whose beginning was refused is tried again at the same pace. The record a renewal returns
        tells of writes too: ``unseen_write`` and ``arrivals`` report them."""
        if self.begin_refused and not self.watching:
            if self._begin_tried is None or self._clock.monotonic() - self._begin_tried >= self._renew:
                self.begin()
            return
        if not self.watching or self.seen is None or not renewal_due(
            self.seen.watch_until_ms, self._clock.now_ms(), self._lease, self._renew
        ):
            return
        self._renew_watch()

    def _renew_watch(self) -> None:
        try:
            # Counted on before the write: a renewal that landed but whose answer was lost still allowed reuse.
            self._read_reuse_on = self._read_reuse_on or self.read_reuse_wanted
            record = self._store.renew_watch(self._queue, self._owner, self._until(), read_reuse=self.read_reuse_wanted)
        except TaskQueueError as exc:  # the next look tries again; the lease still has half its time
            if not self._refused("renewing the watch", exc, "trying again at the next look"):
                raise
            return
        if record is None:  # lapsed, and another worker watches now: it sees every write from here on
            self.watching = False
            logger.warning("the watch lapsed and another worker took it over", extra={"queue": self._queue})
        else:
            # Not ``latest``: a write the renewal shows has not been looked for yet (``arrivals`` reports it).
            self._tell(record)
            self.seen = record

    def allow_read_reuse(self) -> None:
        """Producers may reuse their reads of the record (the worker's call: its run claims fast); a renewal says so
        at once (``readReuse``; one write a watch: a fast burst may be over by the next renewal)."""
        if self.looks_at_index and not self.read_reuse_wanted:
            self.read_reuse_wanted = True
            if self.watching and self.seen is not None:
                self._renew_watch()

    def _reuse_ms(self) -> int:  # how much later a stop's or an end's last look begins once reads may be reused
        return int(READ_REUSE_SECONDS * 1000) if self._read_reuse_on else 0

    def unseen_write(self) -> bool:
        """Has a record this run read (a renewal's) shown a write it has not looked at the index for yet?"""
        return self.seen is not None and self.seen.seq > self.latest.seq

    @property
    def newest_seq(self) -> int:
        """The highest ``seq`` this run has read (renewals, polls)."""
        return max(self.latest.seq, self.seen.seq if self.seen is not None else 0)

    def arrivals(self, every_seconds: float = 0.0) -> bool:
        """Has a producer written since this run last noticed? A write a renewal showed answers at once; else one
        eventually consistent read, unless one was made less than ``every_seconds`` ago (then ``False``): a stale
        answer costs at most one more poll (the stop itself is decided by a consistent write)."""
        if self.unseen_write():
            assert self.seen is not None
            self.latest = self.seen
            return True
        now = self._clock.monotonic()
        if every_seconds > 0 and self._read_at is not None and now - self._read_at < every_seconds:
            return False
        self._read_at = now
        try:
            record = self._store.read_wake_record(self._queue, consistent=False)
        except TaskQueueError as exc:  # the next poll looks again; the stop itself is a consistent write
            if not self._refused("looking for new writes", exc, "looking again at the next poll"):
                raise
            return False
        self._tell(record)
        if record.seq > self.latest.seq:
            self.latest = record
            return True
        # A delayed entry announced earlier than the worker knew (taskqueue.core.delayed_head): look again too.
        if record.seq == self.latest.seq and record.delayed_seq > self.latest.delayed_seq:
            earlier = record.delayed_head_ms is not None and (
                self.latest.delayed_head_ms is None or record.delayed_head_ms < self.latest.delayed_head_ms
            )
            self.latest = record
            return earlier
        return False

    def index_arrivals(self, every_seconds: float = 0.0) -> bool:
        """An index-looking watcher: does the index show claimable work this run has not looked for (at most one
        peek every ``every_seconds``)? Producers that skip their touch move no ``seq``: this is how it hears of them."""
        if self._index_peek is None or not self.watching:
            return False
        now = self._clock.monotonic()
        if every_seconds > 0 and self._index_peeked_at is not None and now - self._index_peeked_at < every_seconds:
            return False
        self._index_peeked_at = now
        try:
            return self._index_peek()
        except TaskQueueError as exc:  # the next poll looks again; the stop's last look is a whole look
            if not self._refused("looking at the index for new work", exc, "looking again at the next poll"):
                raise
            return False

    def resumed(self) -> None:
        """A look found work after the first step of a stop: clear ``stopping``, so producers skip their touch again
        (they touch meanwhile; correct, only dearer)."""
        if self._stop_marked is None or not self.watching:
            return
        self._stop_marked = None
        try:
            record = self._store.clear_stopping(self._queue, self._owner)
        except TaskQueueError as exc:  # left set: producers touch until the next stop or watch clears it
            if not self._refused("clearing the stop", exc, "leaving it; producers touch meanwhile"):
                raise
            return
        if record is not None:
            self._tell(record)

    def try_stop(self, look_started_ms: int) -> LookAgain | str:
        """Stop watching if the handshake allows it: the last empty look (begun at ``look_started_ms``) came late
        enough to see every write this run knows of, and nothing was written since. ``STOPPED``, or when to look
        again (a write arrived, or the look came too early for the index's lag)."""
        if not self.watching or self.seen is None:
            return STOPPED
        due = self._stop_look_due(self.seen)
        if look_started_ms < due:
            return LookAgain(due)
        if self.looks_at_index:
            # Producers may have written without a touch while this watcher was not stopping: first tell them it is
            # (``stopping``, while ``seq`` holds), then count only an empty look that began the index's lag allowance
            # after that write. A producer that read no ``stopping`` read before it, and wrote before its read.
            if self._stop_marked is None or self._stop_marked[0] != self.seen.seq:
                try:
                    marked = self._store.mark_stopping(self._queue, self._owner, self.seen.seq, self._clock.now_ms())
                except TaskQueueError as exc:
                    if not self._refused("beginning to stop", exc, "looking again"):
                        raise
                    return LookAgain(self._clock.now_ms() + int(LINGER_POLL_SECONDS * 1000))
                if marked is None:
                    return self._lost_stop()
                self._tell(marked)
                self._stop_marked = (self.seen.seq, self._clock.now_ms())
            stop_due = self._stop_marked[1] + int(self._lag * 1000) + self._reuse_ms()
            if look_started_ms < stop_due:
                return LookAgain(stop_due)
        try:
            self._leaving(stopping=True)
            if self._store.unwatch(self._queue, self._owner, self.seen.seq):
                self.watching = False
                return STOPPED
            record = self._store.read_wake_record(self._queue)
        except TaskQueueError as exc:  # not written: still watching; look again after a pause
            if not self._refused("stopping the watch", exc, "looking again"):
                raise
            return LookAgain(self._clock.now_ms() + int(LINGER_POLL_SECONDS * 1000))
        return self._after_lost_stop(record)

    def _lost_stop(self) -> LookAgain | str:
        """A conditional step of the stop failed: read the record and say what to do."""
        try:
            record = self._store.read_wake_record(self._queue)
        except TaskQueueError as exc:
            if not self._refused("stopping the watch", exc, "looking again"):
                raise
            return LookAgain(self._clock.now_ms() + int(LINGER_POLL_SECONDS * 1000))
        return self._after_lost_stop(record)

    def _after_lost_stop(self, record: WakeRecord) -> LookAgain | str:
        if record.watcher != self._owner:  # another worker watches now (this one's lease lapsed): it looks from here on
            self.watching = False
            return STOPPED
        self._see(record)  # a producer wrote: look at the index again (at once; the lag rule applies at the next stop)
        return LookAgain(self._clock.now_ms())

    def end(self, look_started_ms: int | None) -> bool:
        """The run ends (budget, pause): stop watching whatever was written. ``True`` if work may have arrived
        that this run's looks did not see, so the caller must wake the queue again (a tail call)."""
        if not self.watching or self.seen is None:
            return False
        self._leaving(stopping=False)
        self.watching = False
        try:
            if self._store.unwatch(self._queue, self._owner, self.seen.seq):
                self._unwatched_ms = self._clock.now_ms()
                return look_started_ms is None or look_started_ms < self._stop_look_due(self.seen)
            self._store.unwatch(self._queue, self._owner, None)
        except TaskQueueError as exc:  # the watch lapses with its lease; wake the queue again to be safe
            if not self._refused("stopping the watch at the end of the run", exc, "letting it lapse and tail-calling"):
                raise
        return True

    def _leaving(self, *, stopping: bool) -> None:
        if self._on_leave is not None:
            self._on_leave(stopping)

    def await_skipped_writes(self) -> None:
        """After ``end``, before the caller looks for work left (its tail-call decision): an index-looking watcher
        waits until the index's lag allowance has passed since its watch ended, so that look shows every write a
        producer made without a touch while it watched (such a write came before the read that found the watch, so
        before the watch ended)."""
        if self.looks_at_index and self._unwatched_ms is not None:
            left = (self._unwatched_ms + int(self._lag * 1000) + self._reuse_ms() - self._clock.now_ms()) / 1000
            if left > 0:
                self._clock.sleep(left)

    @property
    def lag_seconds(self) -> float:
        return self._lag

    def _stop_look_due(self, seen: WakeRecord) -> int:
        first_read_ms = self._seq_first_read[1] if self._seq_first_read[0] == seen.seq else None
        return stop_look_due_ms(seen, self._lag, first_read_ms)

    def _see(self, record: WakeRecord) -> None:
        self._tell(record)
        self.seen = record
        if record.seq >= self.latest.seq:
            self.latest = record

    def _tell(self, record: WakeRecord) -> None:
        self._read_reuse_on = self._read_reuse_on or (record.read_reuse and record.watcher == self._owner)
        if record.seq > self._seq_first_read[0]:  # a stale (eventually consistent) read tells nothing new
            self._seq_first_read = (record.seq, self._clock.now_ms())
        if self._on_record is not None:
            self._on_record(record)

    def _until(self) -> int:
        return self._clock.now_ms() + int(self._lease * 1000)
