"""One attempt of a claimed task: run it under its lease, then record SUCCESS, FAILURE or a release for a retry.

What counts as a failed attempt and how a retry is spaced live here: ``PermanentTaskError`` and an oversized result
dead-letter at once; any other runner error is retried with ``backoff_ms`` while attempts remain. Recording an outcome
DynamoDB refused for a passing reason (throttling past the SDK's retries) is tried again while the lease holds: a
result recorded late is better than a task run twice.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger

from taskqueue.core.clock import Clock
from taskqueue.core.errors import PermanentTaskError, ResultTooLarge, TaskQueueError
from taskqueue.core.model import Task, check_result_size
from taskqueue.core.states import TaskStatus
from taskqueue.observe import tracing
from taskqueue.store import TaskStore, dynamo
from taskqueue.work.lease import Lease, run_with_lease
from taskqueue.work.runner import TaskRunner
from taskqueue.workflows.runtime import with_dependencies

logger = Logger(child=True)

RECORD_ATTEMPTS = 5
RECORD_BACKOFF_SECONDS = 0.5


def backoff_ms(attempt: int, base_seconds: float, max_seconds: float, rng: random.Random) -> int:
    """Exponential backoff with full jitter: uniform in [0, min(max, base * 2**(attempt-1))] seconds."""
    ceiling = min(max_seconds, base_seconds * 2 ** max(0, attempt - 1))
    return int(rng.uniform(0, ceiling) * 1000)


class Outcomes:
    """``count(name)``: add one to the run's report field ``name``; ``released(task, not_before_ms)``: a task
    went back to wait for its retry (the worker forgets its stale entry and knows its delayed head)."""

    def __init__(
        self,
        store: TaskStore,
        runner: TaskRunner,
        owner: str,
        clock: Clock,
        rng: random.Random,
        count: Callable[[str], None],
        released: Callable[[Task, int], None],
    ) -> None:
        self._store = store
        self._runner = runner
        self._owner = owner
        self._clock = clock
        self._rng = rng
        self._settings = store.settings
        self._count = count
        self._released = released

    def attempt(self, lease: Lease, ran: Callable[[], None] | None = None) -> None:
        """Run the task and record what came of it; an error recording it is logged and counted (``errors``): the
        task stays TAKEN until its lease expires, then runs again. ``ran`` is called as the runner returns (or raises),
        before the outcome is written: the runner is free for the next task meanwhile."""
        task = lease.task
        log = {"task_id": task.task_id, "queue": task.queue, "attempt": task.attempts}
        try:
            self._attempt(lease, log, ran)
        except Exception as exc:
            self._count("errors")
            logger.exception(
                "could not record the task's outcome; it stays TAKEN until its lease expires, then runs again",
                extra={**log, "error": f"{type(exc).__name__}: {exc}"},
            )

    def _attempt(self, lease: Lease, log: dict[str, Any], ran: Callable[[], None] | None) -> None:
        task = lease.task
        try:
            try:
                # A workflow's task is given its dependencies' results and errors (taskqueue.workflows.runtime); the
                # attempt is a span of its producer's trace (docs/tracing.md).
                result = run_with_lease(
                    lease, lambda: tracing.run_traced(with_dependencies(self._store, task), self._runner))
            finally:
                if ran is not None:
                    ran()
            outcome = result if isinstance(result, dict) else None
            check_result_size(outcome)
        except (PermanentTaskError, ResultTooLarge) as exc:
            self._finish_failed(lease, f"permanent error: {exc}", log)
        except Exception as exc:  # any other runner error is a failed attempt, retried while attempts remain
            error = f"{type(exc).__name__}: {exc}"
            if task.attempts >= task.max_attempts:
                self._finish_failed(lease, f"attempts exhausted ({task.attempts}); last error {error}", log)
                return
            delay = backoff_ms(task.attempts, self._settings.retry_base_seconds, self._settings.retry_max_seconds, self._rng)
            not_before = self._clock.now_ms() + delay
            if self.record(lease, lambda: self._store.release(task, self._owner, not_before_ms=not_before, error=error)):
                self._released(task, not_before)
                self._count("released")
                logger.info("attempt failed; task released for retry", extra={**log, "error": error, "retry_in_ms": delay})
            else:
                self._count("lost")
                logger.warning("lease lost before release; the task will be recovered by lease expiry", extra=log)
        else:
            if self.record(lease, lambda: self._store.complete(task, self._owner, outcome)):
                self._count("succeeded")
                logger.info("task succeeded", extra=log)
            else:
                self._count("lost")
                logger.warning("lease lost before completion; lease recovery decides whether it runs again", extra=log)

    def record(self, lease: Lease, write: Callable[[], Any]) -> bool:
        """Run one outcome write; a passing refusal (throttling) is retried with backoff while the lease lasts,
        and the lease is renewed meanwhile. Anything else, or the last refusal, propagates to ``attempt``.
        Every refusal retried here is logged and counted (``retried``)."""
        for attempt in range(1, RECORD_ATTEMPTS + 1):
            try:
                return bool(write())
            except Exception as exc:
                if not dynamo.is_retryable(exc) or attempt == RECORD_ATTEMPTS or lease.lost:
                    raise
                self._count("retried")
                logger.warning(
                    "recording the outcome was refused for now; trying again",
                    extra={"task_id": lease.task.task_id, "attempt": attempt, "error": str(exc)},
                )
                self._clock.sleep(self._rng.uniform(0.5, 1.0) * RECORD_BACKOFF_SECONDS * 2 ** (attempt - 1))
                if lease.due():
                    try:
                        lease.renew()
                    except TaskQueueError as renew_error:  # the write below tells whether the lease still holds
                        self._count("retried")
                        logger.warning(
                            "lease renewal failed while recording the outcome; trying the write again",
                            extra={"task_id": lease.task.task_id, "error": str(renew_error)},
                        )
        raise AssertionError("unreachable")

    def _finish_failed(self, lease: Lease, error: str, log: dict[str, Any]) -> None:
        task = lease.task
        if self.record(lease, lambda: self._store.fail(task, self._owner, error)):
            self._count("failed")
            logger.error("task failed (dead-lettered)", extra={**log, "error": error, "status": TaskStatus.FAILURE})
        else:
            self._count("lost")
            logger.warning("lease lost before recording the failure", extra=log)
