"""Running tasks whose lease is not marked on their ReadyIndex entry yet: what a store's looks pass over.

A claim normally marks its lease on the task's ReadyIndex entry (``notBefore`` = the lease's expiry): a projected
attribute, so one index write a task, which is how every other reader tells a running task from a waiting one. A
lone watcher (no other claimer met, no groups) claims without it, and marks the lease only if the task still runs
``LEASE_MARK_AFTER_SECONDS`` later (``WorkerTransitions.mark_leases``): a task that ends sooner leaves the index
with one write fewer (5 write units instead of 6). Until marked, the entry looks like a waiting task's, so:

- this store passes over its own unmarked tasks (``held``), as it passes over marked leases;
- another store that tries to claim one loses the claim's condition (the task is TAKEN) and reads the item the
  refused write returns: it passes the task over until its owner should have marked it (``seen_running``; not for
  the whole lease: a task released for a retry is claimable again), and marks it itself once that time has passed
  (a watcher that died before its mark), so that lease recovery finds it.

One registry per store (one Lambda container's), guarded by a lock: outcomes are written from runner threads.
"""

from __future__ import annotations

import threading

# How long a lone watcher's task runs before its lease is marked on its index entry (the board counts it TAKEN from
# then on; before, as waiting). A task that ends sooner costs no lease mark.
LEASE_MARK_AFTER_SECONDS = 2.0


class UnmarkedLeases:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._own: dict[str, tuple[int, int]] = {}  # task id -> (lease expiry, claimed at), epoch ms
        self._others: dict[str, int] = {}  # task id -> lease expiry (epoch ms), learned from a refused claim

    def claimed(self, task_id: str, expires_ms: int, claimed_ms: int) -> None:
        with self._lock:
            self._own[task_id] = (expires_ms, claimed_ms)
            self._others.pop(task_id, None)

    def is_own(self, task_id: str) -> bool:
        with self._lock:
            return task_id in self._own

    def renewed(self, task_id: str, expires_ms: int) -> None:
        with self._lock:
            if task_id in self._own:
                self._own[task_id] = (expires_ms, self._own[task_id][1])

    def done(self, task_id: str) -> None:
        """The task left this store's hands (finished, released, marked, or its lease lost)."""
        with self._lock:
            self._own.pop(task_id, None)

    def seen_running(self, task_id: str, expires_ms: int) -> None:
        with self._lock:
            self._others[task_id] = expires_ms

    def held(self, now_ms: int) -> frozenset[str]:
        """Ids a look passes over as running: this store's own unmarked tasks while their lease holds (one whose outcome
        was never written, refused past every retry, is forgotten once it lapses: then it is recovered like any other),
        and others' for as long as ``seen_running`` said."""
        with self._lock:
            if self._others:
                self._others = {k: v for k, v in self._others.items() if v > now_ms}
            if any(expires <= now_ms for expires, _ in self._own.values()):
                self._own = {k: v for k, v in self._own.items() if v[0] > now_ms}
            if not self._own and not self._others:
                return frozenset()
            return frozenset(self._own) | frozenset(self._others)

    def due(self, claimed_before_ms: int) -> list[tuple[str, int]]:
        """This store's unmarked tasks claimed at or before ``claimed_before_ms``: (task id, lease expiry)."""
        with self._lock:
            return [(k, expires) for k, (expires, claimed) in self._own.items() if claimed <= claimed_before_ms]
