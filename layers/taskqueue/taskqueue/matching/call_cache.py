"""What the Matcher remembers of the calls it has seen, for the life of its execution environment: the agent queue a
call's preferences name and when it was created. Neither ever changes, so a warm Matcher reads a call's payload
once (BatchGetItem), not once per wake-up: a deep queue whose calls no agent fits costs its index pages per pass, and
no payload reads after the first pass.

Bounded: past ``limit`` calls the oldest learned are forgotten first (a forgotten call is read again if it still
waits). ~150 bytes a call: 200,000 calls hold about 30 MB of the function's memory. Calls whose preferences are
invalid are not kept: they are dead-lettered when met, and met again only if that lost a race. A call is known by
its id and its ``ttl`` together: a caller's own id may come back as a new call once the old one's item is deleted
(its TTL passed), and that call has another ttl.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

CALL_CACHE_LIMIT = 200_000


@dataclass(frozen=True)
class KnownCall:
    key: str  # the agent queue the call's preferences name
    created_ms: int


class CallCache:
    def __init__(self, limit: int = CALL_CACHE_LIMIT) -> None:
        if limit < 1:
            raise ValueError(f"a call cache holds at least one call, got limit={limit}")
        self.limit = limit
        self._calls: OrderedDict[str, KnownCall] = OrderedDict()
        self._lock = threading.Lock()  # matchers of one environment are one at a time; a test may share one

    def get(self, task_id: str, ttl: int) -> KnownCall | None:
        with self._lock:
            return self._calls.get(_key(task_id, ttl))

    def knows(self, task_id: str, ttl: int) -> bool:
        with self._lock:
            return _key(task_id, ttl) in self._calls

    def __len__(self) -> int:
        with self._lock:
            return len(self._calls)

    def put(self, task_id: str, ttl: int, known: KnownCall) -> None:
        with self._lock:
            self._calls[_key(task_id, ttl)] = known
            while len(self._calls) > self.limit:
                self._calls.popitem(last=False)


def _key(task_id: str, ttl: int) -> str:
    return f"{task_id}#{ttl}"  # a task id never holds '#'
