"""Progress of a running task: a runner reports a number and a short message, which ``taskq show``, the producer
client (``taskqueue.client``) and the table's stream see.

    from taskqueue.progress import report_progress
    report_progress(40, "page 2 of 5 sent")

A report is written to the task's item (``progress``, ``progressMessage``, ``progressUpdated``) by the worker that
holds its lease, at most once every PROGRESS_INTERVAL_SECONDS per task: a runner may report every tiny step and
pays a write only now and then. A report inside the interval is kept only until the next one; the attempt's
outcome (SUCCESS, FAILURE, a retry) follows anyway. Each attempt starts without progress (the claim removes it).
A progress write is a MODIFY on the stream, which Trigger's stream filter (INSERTs of PENDING tasks) never passes
on: reporting wakes nothing.
"""

from __future__ import annotations

import math
import threading

from taskqueue.clock import Clock

# At most one progress write per task this often.
PROGRESS_INTERVAL_SECONDS = 5.0
# A progress message is a short line, not a log: longer ones are clipped.
MAX_MESSAGE_CHARS = 200


def checked_progress(progress: float, message: str | None) -> tuple[float, str | None]:
    """The report as stored: a finite number, and the message clipped to MAX_MESSAGE_CHARS (None when empty)."""
    if isinstance(progress, bool) or not isinstance(progress, (int, float)) or not math.isfinite(progress):
        raise ValueError(f"progress must be a finite number (e.g. percent done, or items processed), got {progress!r}")
    if message is not None and not isinstance(message, str):
        raise ValueError(f"a progress message must be a string, got {type(message).__name__}")
    text = (message or "").strip()
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[: MAX_MESSAGE_CHARS - 1] + "…"
    return float(progress), text or None


class ProgressThrottle:
    """Decides which reports of one task are written: the first, then one per PROGRESS_INTERVAL_SECONDS."""

    def __init__(self, clock: Clock, interval_seconds: float = PROGRESS_INTERVAL_SECONDS) -> None:
        self._clock = clock
        self._interval = interval_seconds
        self._last: float | None = None
        self._lock = threading.Lock()

    def due(self) -> bool:
        """Is a write allowed now? If so, the interval starts again (the caller writes)."""
        with self._lock:
            now = self._clock.monotonic()
            if self._last is not None and now - self._last < self._interval:
                return False
            self._last = now
            return True


def report_progress(progress: float, message: str | None = None) -> bool:
    """For task runners: report how far the task in progress is. ``True`` if this report was written, ``False``
    if it was within the interval of the last write, the lease is no longer this worker's, the write was refused
    for now, or no task is being run (so a runner can be called outside a worker, in its own tests)."""
    from taskqueue.lease import current_lease  # the lease module imports this one

    value, text = checked_progress(progress, message)
    lease = current_lease()
    return False if lease is None else lease.report_progress(value, text)
