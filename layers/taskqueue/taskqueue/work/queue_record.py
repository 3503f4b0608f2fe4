"""A claiming run's view of its queue's record (the control item ``queue#<name>``): the last read of it, which every
read or write of the record refreshes, and the pause check that reads it at most every PAUSE_CHECK_SECONDS. Part of
``ClaimControl`` (``taskqueue.work.claim_control``), which holds the run's store, queue, clock and refusal handler.
"""

from __future__ import annotations

from taskqueue.core.errors import TaskQueueError
from taskqueue.core.handshake import WakeRecord
from taskqueue.work.control_parts import ControlPart

# A paused queue (``taskq pause``) is noticed within this long. The check reads the queue's whole record (the item
# that holds ``paused``, the wake-up handshake's fields and the delayed head), half a read unit, eventually
# consistent; any other read of the record (the watch's writes, the linger's polls) counts as a check too.
PAUSE_CHECK_SECONDS = 5.0


class RecordView(ControlPart):
    """Mixed into ``ClaimControl``: the record as this run last read it (``record``, ``record_read_ms``), and pause."""

    _next_pause_check: float
    record: WakeRecord | None
    record_read_ms: int

    def see_record(self, record: WakeRecord) -> None:
        """A read or write of the queue's record returned ``record``: it carries ``paused`` and the delayed head,
        so it also counts as a pause check."""
        self.record = record
        self.record_read_ms = self._clock.now_ms()
        self._next_pause_check = self._clock.monotonic() + PAUSE_CHECK_SECONDS

    def paused_now(self) -> bool:
        """Is the queue paused? The record is read at most every PAUSE_CHECK_SECONDS; unknown counts as not paused."""
        now = self._clock.monotonic()
        if now >= self._next_pause_check:
            self._next_pause_check = now + PAUSE_CHECK_SECONDS
            try:
                self.see_record(self._store.read_wake_record(self._queue, consistent=False))
            except TaskQueueError as exc:
                if not self._refused("reading whether the queue is paused", exc, "claiming as usual"):
                    raise
        return self.record is not None and self.record.paused
