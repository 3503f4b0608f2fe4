"""A run's view of its queue's record (``taskqueue.core.record``): the last read of it, which every read of the record
refreshes, and the pause check that reads it at most every PAUSE_CHECK_SECONDS. Shared by a run's parts (the delayed
view, fair share) so that one read serves them all."""

from __future__ import annotations

from collections.abc import Callable

from taskqueue.core.clock import Clock
from taskqueue.core.errors import TaskQueueError
from taskqueue.core.record import QueueRecord
from taskqueue.store import TaskStore

# A paused queue (``taskq pause``) is noticed within this long by a running worker: the check reads the queue's whole
# record (half a read unit, eventually consistent). A run's first check is strongly consistent: a worker started after
# a pause never claims.
PAUSE_CHECK_SECONDS = 1.0
# A refused pause read is tried this many times in all, after pauses doubling from this, before it counts as paused.
PAUSE_READ_ATTEMPTS = 3
PAUSE_READ_PAUSE_SECONDS = 0.1

# refused(what, error, then) -> True when the error was passing and is handled (logged, counted); else False.
Refused = Callable[[str, Exception, str], bool]


class RecordView:
    def __init__(self, store: TaskStore, queue: str, clock: Clock, refused: Refused) -> None:
        self._store = store
        self.queue = queue
        self._clock = clock
        self._refused = refused
        self._next_pause_check = 0.0
        self._consistent = True
        self.record: QueueRecord | None = None  # the queue's record as this run last read it
        self.record_read_ms = 0  # when (epoch ms)

    def see_record(self, record: QueueRecord) -> None:
        """A read of the queue's record returned ``record``: it carries ``paused``, so it counts as a pause check."""
        self.record = record
        self.record_read_ms = self._clock.now_ms()
        self._next_pause_check = self._clock.monotonic() + PAUSE_CHECK_SECONDS

    def read(self) -> QueueRecord:
        """Read the record now (eventually consistent once the run has read it strongly)."""
        record = self._store.read_record(self.queue, consistent=self._consistent)
        self._consistent = False
        self.see_record(record)
        return record

    def paused_now(self) -> bool:
        """Is the queue paused? The record is read at most every PAUSE_CHECK_SECONDS. A read DynamoDB refuses for now
        is tried again after a short pause; one still refused counts as paused: the queue may have been paused since
        the last read, and a paused queue claims nothing (the run stops claiming; the safety net wakes the queue)."""
        if self._clock.monotonic() < self._next_pause_check:
            return self.record is not None and self.record.paused
        for attempt in range(PAUSE_READ_ATTEMPTS):
            try:
                return self.read().paused
            except TaskQueueError as exc:
                if not self._refused("reading whether the queue is paused", exc, "reading it again"):
                    raise
                self._clock.sleep(PAUSE_READ_PAUSE_SECONDS * 2 ** attempt)
        self._next_pause_check = self._clock.monotonic() + PAUSE_CHECK_SECONDS
        return True
