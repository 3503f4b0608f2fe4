"""What a runner's progress report may hold, and which reports of one task are written (pure; the clock handed in).
``taskqueue.progress.report_progress`` is the runner's call; the worker's lease writes what these rules let through.
"""

from __future__ import annotations

import math
import threading

from taskqueue.core.clock import Clock

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
