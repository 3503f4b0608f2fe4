"""Leases of running tasks: the worker's heartbeat, and a runner's own extension for long work.

A claim gives the worker a lease of LEASE_SECONDS. While the runner works, the worker renews it (extend-only,
owner-conditioned) whenever less than two thirds of it is left, so a long task is never recovered and run a
second time while it still runs. A runner that knows it needs longer calls ``extend_lease(seconds)`` from
inside its task, as SQS consumers call ChangeMessageVisibility and BullMQ workers extend their locks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar

from aws_lambda_powertools import Logger

from taskqueue.core.clock import Clock
from taskqueue.core.errors import TaskQueueError
from taskqueue.core.model import Task
from taskqueue.core.progress_reports import ProgressThrottle
from taskqueue.store import TaskStore, Token

logger = Logger(child=True)

# Renew when less than this share of the lease is left (so two renewals can fail before it lapses).
RENEW_WHEN_LEFT = 2 / 3


class LeaseLost(TaskQueueError):
    """The task's lease is no longer this worker's (it expired and was recovered): stop, the result will not count."""


class Lease:
    """The lease of one running task as its worker knows it; renewals of one task are serialized."""

    def __init__(
        self, task: Task, store: TaskStore, owner: str, clock: Clock, slot: Token | None = None,
        group_slot: Token | None = None,
    ) -> None:
        self.task = task
        # The queue's running-limit slot this task holds (RUNNING_LIMIT): renewed by the run's HeldSlots on its own
        # short cadence (not with this lease: a dead worker's slot comes back within seconds), freed once the
        # runner returns (the outcome is written meanwhile: work/worker.py).
        self.slot = slot
        # Its group's concurrency slot (GROUP_CONCURRENCY; taskqueue.work.fair_share), kept the same way.
        self.group_slot = group_slot
        self.expires_ms = task.lease_expires_ms or 0
        self.lost = False
        self._store = store
        self._owner = owner
        self._clock = clock
        self._lease_ms = store.settings.lease_seconds * 1000
        self._lock = threading.Lock()
        self._progress = ProgressThrottle(clock)

    def due(self) -> bool:
        """Is it time for a heartbeat (less than RENEW_WHEN_LEFT of a lease left)?"""
        return not self.lost and self.expires_ms - self._clock.now_ms() < self._lease_ms * RENEW_WHEN_LEFT

    def renew(self, seconds: float | None = None) -> bool:
        """Extend the lease to now + ``seconds`` (default LEASE_SECONDS); a lease that already lasts longer is
        left alone (extend-only: the worker is the only writer of its own lease, so what it knows is current)."""
        with self._lock:
            if self.lost:
                return False
            now_ms = self._clock.now_ms()
            wanted = now_ms + (self._lease_ms if seconds is None else int(seconds * 1000))
            if wanted <= self.expires_ms:
                return True
            expires = self._store.renew_lease(self.task, self._owner, (wanted - now_ms) / 1000, now_ms)
            if expires is None:
                self.lost = True
                return False
            self.expires_ms = expires
            return True


    def report_progress(self, progress: float, message: str | None) -> bool:
        """Write what the runner reports (taskqueue.work.progress), if the interval allows; never raises for a refused
        write: progress is worth a log line, not the attempt."""
        if self.lost or not self._progress.due():
            return False
        try:
            return self._store.record_progress(self.task, self._owner, progress, message, self._clock.now_ms())
        except TaskQueueError as exc:
            logger.warning("progress not recorded", extra={"task_id": self.task.task_id, "error": str(exc)})
            return False


_current: ContextVar[Lease | None] = ContextVar("taskqueue_current_lease", default=None)


def run_with_lease(lease: Lease, work: Callable[[], object]) -> object:
    """Run ``work`` (a runner call) with ``lease`` as the lease ``extend_lease`` acts on."""
    token = _current.set(lease)
    try:
        return work()
    finally:
        _current.reset(token)


def current_lease() -> Lease | None:
    """The lease of the task the calling runner thread is running (None outside a task run)."""
    return _current.get()


def extend_lease(seconds: float) -> None:
    """For task runners: keep the lease of the task being run for ``seconds`` more from now.

    Raises ``LeaseLost`` if the lease already passed to someone else, and RuntimeError outside a task run."""
    if not seconds > 0:
        raise ValueError(f"seconds must be positive, got {seconds!r}")
    lease = _current.get()
    if lease is None:
        raise RuntimeError("extend_lease() is for task runners: call it while the worker runs your task")
    if not lease.renew(seconds):
        raise LeaseLost(f"the lease of task {lease.task.task_id} is lost: it will be recovered and run again")
