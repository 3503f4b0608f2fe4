"""The claim loop shared by the workers: claim only with a free runner slot, run, record the outcome.

One invocation = one ``Worker.run``: recover expired leases, then until the claim deadline query the
queue's next claimable tasks, claim as many as there are free runner slots, run them concurrently, and
record SUCCESS / FAILURE, or release for a retry with backoff. It reports whether claimable work remains,
so the handler can tail-call.
"""

from __future__ import annotations

import random
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Logger

from taskqueue.clock import Clock, SystemClock
from taskqueue.errors import PermanentTaskError
from taskqueue.model import Task
from taskqueue.runner import TaskRunner
from taskqueue.states import TaskStatus
from taskqueue.store import TaskStore

logger = Logger(child=True)

# While tasks run and the queue looks empty, look again this often for new arrivals.
IDLE_POLL_SECONDS = 1.0


@dataclass
class WorkerReport:
    queue: str
    recovered: int = 0
    claimed: int = 0
    succeeded: int = 0
    failed: int = 0
    released: int = 0
    lost: int = 0
    claim_ages_ms: list[int] = field(default_factory=list)
    stopped_by: str = "empty"
    work_remains: bool = False


def backoff_ms(attempt: int, base_seconds: float, max_seconds: float, rng: random.Random) -> int:
    """Exponential backoff with full jitter: uniform in [0, min(max, base * 2**(attempt-1))] seconds."""
    ceiling = min(max_seconds, base_seconds * 2 ** max(0, attempt - 1))
    return int(rng.uniform(0, ceiling) * 1000)


def claim_window_seconds(time_budget: float, remaining_seconds: float) -> float:
    """Claim for the time budget, but never past half the invocation's remaining time, so tasks in
    flight when claiming stops can still finish before the Lambda timeout."""
    return max(0.0, min(time_budget, remaining_seconds / 2))


class Worker:
    def __init__(
        self,
        store: TaskStore,
        runner: TaskRunner,
        *,
        capacity: int,
        owner: str,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._store = store
        self._runner = runner
        self._capacity = capacity
        self._owner = owner
        self._clock = clock or SystemClock()
        self._rng = rng or random.Random()
        self._settings = store.settings

    def recover_leases(self, queue: str, report: WorkerReport) -> None:
        # No extra backoff: a task whose lease expired has already waited a whole lease.
        outcome = self._store.recover_expired_leases(queue, None, self._clock.now_ms())
        report.recovered += sum(outcome.values())
        # A lease that expired on the last attempt dead-letters the task: count it as failed too.
        report.failed += outcome[TaskStatus.FAILURE.value]
        if report.recovered:
            logger.warning("expired leases recovered", extra={"queue": queue, **outcome})

    def run(self, queue: str, claim_seconds: float) -> WorkerReport:
        report = WorkerReport(queue=queue)
        self.recover_leases(queue, report)
        deadline = self._clock.monotonic() + claim_seconds
        running: dict[Future[None], Task] = {}
        with ThreadPoolExecutor(max_workers=self._capacity, thread_name_prefix=f"{queue}-runner") as pool:
            while True:
                running = {f: t for f, t in running.items() if not f.done()}
                left = deadline - self._clock.monotonic()
                if left <= 0:
                    report.stopped_by = "budget"
                    break
                free = self._capacity - len(running)
                if free == 0:
                    wait(running, timeout=left, return_when=FIRST_COMPLETED)
                    continue
                candidates = self._store.candidates(queue, self._settings.page_size)
                if not candidates:
                    if running:
                        wait(running, timeout=min(left, IDLE_POLL_SECONDS), return_when=FIRST_COMPLETED)
                        continue
                    due_in = self._due_in_seconds(queue)
                    if due_in is None or due_in >= left:
                        report.stopped_by = "empty"
                        break
                    # A retry (or delayed task) falls due inside the budget: wait for it rather than strand it.
                    self._clock.sleep(due_in)
                    continue
                for candidate in candidates:
                    if free == 0:
                        break
                    task = self._store.claim(candidate, self._owner)
                    if task is None:
                        report.lost += 1
                        continue
                    free -= 1
                    report.claimed += 1
                    report.claim_ages_ms.append(task.updated_ms - task.created_ms)
                    running[pool.submit(self._run_one, task, report)] = task
            # Leaving the with-block waits for the tasks in flight: they finish inside their lease.
        # Tail-call for claimable work, or for a retry the next invocation's budget will reach.
        due_in = self._due_in_seconds(queue)
        report.work_remains = self._store.has_claimable(queue) or (
            due_in is not None and due_in < self._settings.time_budget_seconds
        )
        return report

    def _due_in_seconds(self, queue: str) -> float | None:
        due = self._store.next_due_ms(queue)
        return None if due is None else max(0.0, (due - self._clock.now_ms()) / 1000)

    def _run_one(self, task: Task, report: WorkerReport) -> None:
        log = {"task_id": task.task_id, "queue": task.queue, "attempt": task.attempts}
        try:
            result = self._runner(task)
        except PermanentTaskError as exc:
            self._finish_failed(task, f"permanent error: {exc}", report, log)
        except Exception as exc:  # any other runner error is a failed attempt, retried while attempts remain
            error = f"{type(exc).__name__}: {exc}"
            if task.attempts >= task.max_attempts:
                self._finish_failed(task, f"attempts exhausted ({task.attempts}); last error {error}", report, log)
                return
            delay = backoff_ms(task.attempts, self._settings.retry_base_seconds, self._settings.retry_max_seconds, self._rng)
            if self._store.release(task, self._owner, not_before_ms=self._clock.now_ms() + delay, error=error):
                report.released += 1
                logger.info("attempt failed; task released for retry", extra={**log, "error": error, "retry_in_ms": delay})
            else:
                report.lost += 1
                logger.warning("lease lost before release", extra=log)
        else:
            outcome = result if isinstance(result, dict) else None
            if self._store.complete(task, self._owner, outcome):
                report.succeeded += 1
                logger.info("task succeeded", extra=log)
            else:
                report.lost += 1
                logger.warning("lease lost before completion; the task will be recovered and retried", extra=log)

    def _finish_failed(self, task: Task, error: str, report: WorkerReport, log: dict[str, Any]) -> None:
        if self._store.fail(task, self._owner, error):
            report.failed += 1
            logger.error("task failed (dead-lettered)", extra={**log, "error": error, "status": TaskStatus.FAILURE})
        else:
            report.lost += 1
            logger.warning("lease lost before recording the failure", extra=log)
