"""The emulator's changes, followed for the engine's pollers (local/emulator/changes.py says why).

One thread long-polls ``GET /_local/changes`` and keeps the generations it last heard. A poller reads the
generation of its kind before it asks the emulator for work (``seen``); when it found nothing, it waits at its
usual cadence and then until that generation moves (``wait_past``). No change is missed: the emulator counts a
request after applying it, so a change the poller's request did not see is counted past what the poller read.
An endpoint that is not this project's emulator (``/_local/changes`` refused) leaves the pollers at their cadence.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
import urllib.request

from local.emulator.changes import KINDS

log = logging.getLogger("local.delivery")

LONG_POLL_SECONDS = 20.0


class ChangeFeed:
    def __init__(self, endpoint_url: str) -> None:
        self._url = endpoint_url.rstrip("/") + "/_local/changes"
        self._cond = threading.Condition()
        self._generations = dict.fromkeys(KINDS, 0)
        self._available = True
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="change-feed", daemon=True)

    def start(self) -> ChangeFeed:
        try:
            heard = self._ask(0.0)
        except (OSError, ValueError) as exc:
            log.info("no change feed at %s (%s): pollers keep their cadence", self._url, exc)
            self._set_unavailable()
            return self
        with self._cond:
            self._generations = heard
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def seen(self, kind: str) -> int:
        with self._cond:
            return self._generations[kind]

    def wait_past(self, kind: str, seen: int, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for ``kind`` to pass ``seen``; True when it has, or when the feed cannot
        tell (stopped, or no feed): the poller then polls."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._stopped or not self._available or self._generations[kind] > seen, timeout)

    def _ask(self, timeout: float) -> dict[str, int]:
        query = "&".join(f"{kind}={self._generations[kind]}" for kind in KINDS) + f"&timeout={timeout}"
        with urllib.request.urlopen(f"{self._url}?{query}", timeout=timeout + 10) as response:
            answer = json.loads(response.read())
        return {kind: int(answer[kind]) for kind in KINDS}

    def _loop(self) -> None:
        while not self._stopped:
            try:
                heard = self._ask(LONG_POLL_SECONDS)
            except (OSError, ValueError, KeyError) as exc:
                if not self._stopped:
                    log.warning("change feed lost (%s): pollers keep their cadence", exc)
                    self._set_unavailable()
                return
            with self._cond:
                self._generations = heard
                self._cond.notify_all()

    def _set_unavailable(self) -> None:
        with self._cond:
            self._available = False
            self._cond.notify_all()


def wait_for_change(feed: ChangeFeed | None, kind: str, seen: int, stop: threading.Event, cadence: float,
                    started: float, deadline: float | None = None) -> None:
    """A poller that found nothing: wait for a change of ``kind`` past ``seen`` (or ``stop``, or the ``deadline``,
    time.monotonic, of something due by time alone), then for the next tick of its cadence counted from ``started``
    (time.monotonic), so a poll still comes when it would have come had it kept asking: the delivery delays are
    those of a poller that never stops. Without a feed, one period."""
    if feed is None:
        stop.wait(cadence)
        return
    while not stop.is_set():
        left = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
        if left <= 0 or feed.wait_past(kind, seen, left):
            break
    now = time.monotonic()
    next_tick = started + math.ceil((now - started) / cadence) * cadence
    stop.wait(max(0.0, next_tick - now))
