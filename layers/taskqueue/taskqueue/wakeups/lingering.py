"""A watcher's wait on an empty queue (ProcessTasks, the Matcher): linger briefly for new writes, then stop only when
the handshake allows it (``taskqueue.wakeups.watch.Watch.try_stop``)."""

from __future__ import annotations

from collections.abc import Callable

from taskqueue.core.clock import Clock
from taskqueue.core.handshake import LINGER_POLL_SECONDS
from taskqueue.wakeups.watch import RECORD_POLL_SECONDS, STOPPED, LookAgain, Watch


class Lingering:
    """A watcher's wait on an empty queue (or, for the Matcher, on calls no agent fits yet). A helper does not wait.

    After an empty look the watcher waits for new writes, reading the record every ``poll_seconds`` for up to
    ``linger_seconds``: a write ends the wait (look again). If none came, it stops if the handshake allows it;
    if the last look began too soon after the last write it knows of (the index may not have shown it yet), it
    looks once more when the index's lag allowance has passed, and stops then without lingering again.

    A pace below LINGER_POLL_SECONDS (a fast queue's) doubles at each poll that finds nothing, up to it: the first
    poll comes soon after the queue empties, and a queue that went quiet is not peeked at twenty times a second for
    the whole linger."""

    def __init__(
        self, watch: Watch, clock: Clock, linger_seconds: float, poll_seconds: float | Callable[[], float] = LINGER_POLL_SECONDS
    ) -> None:
        """``poll_seconds``: the wait between polls, or a callable that says it at each poll (the worker's pace,
        ``core.handshake.poll_seconds``)."""
        self._watch = watch
        self._clock = clock
        self._linger = linger_seconds
        self._poll: Callable[[], float] = poll_seconds if callable(poll_seconds) else (lambda: poll_seconds)
        self._lingered_for: int | None = None  # the seq after which a whole linger passed without a write
        self.lingered_seconds = 0.0

    def step(self, look_started_ms: int, left_seconds: float) -> bool:
        """``True``: stop now. ``False``: look at the index again (the wait, if any, is over)."""
        watch = self._watch
        if not watch.watching and watch.begin_refused and watch.begin():
            return False  # its watch was refused before: it watches now, so it looks once more and stops as a watcher
        if not watch.watching:
            return True
        if self._lingered_for != watch.latest.seq:
            waited, polls = 0.0, 0
            while waited < min(self._linger, left_seconds):
                base = self._poll()
                pace = base if base >= LINGER_POLL_SECONDS else min(LINGER_POLL_SECONDS, base * 2**polls)
                step = min(pace, self._linger - waited, left_seconds - waited)
                polls += 1
                self._wait(step)
                waited += step
                watch.keep()
                # An index-looking watcher peeks at the index at each poll (producers may skip their touch) and reads
                # the record (pause, delayed head, touches) every third one.
                if watch.arrivals(RECORD_POLL_SECONDS if watch.looks_at_index else 0.0) or watch.index_arrivals():
                    return False
            self._lingered_for = watch.latest.seq
        outcome = watch.try_stop(look_started_ms)
        if outcome == STOPPED:
            return True
        assert isinstance(outcome, LookAgain)
        self._wait(min(max(0.0, (outcome.at_ms - self._clock.now_ms()) / 1000), left_seconds))
        return False

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self._clock.sleep(seconds)
            self.lingered_seconds += seconds
