"""A value read in the background at most every so often, shared by every tab and request of the board, with its age
(the agent table's Scan for the matching page, the groups page's view)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class BackgroundValue(Generic[T]):
    """A value read by ``read`` in a background thread at most every ``every_s`` seconds, once a request has asked
    for it; requests get the last value read and its age (None before the first read has ended)."""

    def __init__(self, read: Callable[[], T], every_s: float, name: str,
                 clock: Callable[[], float] = time.monotonic, background: bool = True) -> None:
        self._read, self.every_s, self._name, self._clock = read, every_s, name, clock
        self._lock = threading.Condition()
        self._value: T | None = None
        self._error: str | None = None
        self._at: float | None = None
        self._running = False
        self._background = background

    def get(self) -> tuple[T | None, float | None, str | None]:
        """(the value, its age in seconds, the last read's error), and a read started in the background when due."""
        now = self._clock()
        with self._lock:
            due = self._at is None or now - self._at >= self.every_s
            if due and not self._running:
                self._running = True
                if self._background:
                    threading.Thread(target=self._refresh, name=f"taskq-board-{self._name}", daemon=True).start()
                else:
                    self._lock.release()
                    try:
                        self._refresh()
                    finally:
                        self._lock.acquire()
            age = None if self._at is None else max(0.0, self._clock() - self._at)
            return self._value, age, self._error

    def _refresh(self) -> None:
        try:
            value, error = self._read(), None
        except Exception as exc:  # noqa: BLE001 - shown on the page; the next due refresh tries again
            value, error = None, str(exc)
        with self._lock:
            if error is None:
                self._value = value
            self._error = error
            self._at = self._clock()
            self._running = False
            self._lock.notify_all()

    def forget(self) -> None:
        """Read again at the next request (after an action changed what the value shows)."""
        with self._lock:
            self._at = None

    def settle(self, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._running:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
        return True
