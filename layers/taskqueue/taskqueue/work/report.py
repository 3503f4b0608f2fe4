"""What one worker run reports (``WorkerReport``: the handler logs it, turns it into metrics and decides its tail call),
and how the run's threads count into it (``Tally``): every refusal for a passing reason is logged and counted."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from aws_lambda_powertools import Logger

from taskqueue.store import dynamo

logger = Logger(child=True)


@dataclass
class WorkerReport:
    queue: str
    recovered: int = 0
    claimed: int = 0
    succeeded: int = 0
    failed: int = 0
    released: int = 0
    lost: int = 0
    skipped: int = 0  # index entries passed over: stale (this run claimed them, or lost a claim on them, just now)
    errors: int = 0  # outcomes that could not be recorded (logged): the task is recovered after its lease
    # Refusals for a passing reason (throttling past the SDK's retries), each logged and tried again.
    retried: int = 0
    shed: int = 0  # PENDING tasks past their ttl that this run met and shed
    limited: int = 0  # rounds that found every slot of the running limit (or a group's) held
    too_long: int = 0  # claims refused for the task's run time: left for a fresh invocation
    leases_renewed: int = 0
    claim_ages_ms: list[int] = field(default_factory=list)
    stopped_by: str = "empty"
    work_remains: bool = False
    # Past its budget with work left, the run had the next invocation started as its first slot came free, before
    # its own last tasks ended (``tail_call``); the handler then sends none at the end (one tail call a run).
    tail_called_early: bool = False


class Tally:
    """Adds to one run's report from any of its threads."""

    def __init__(self, report: WorkerReport) -> None:
        self.report = report
        self._lock = threading.Lock()

    def add(self, name: str) -> None:
        with self._lock:
            setattr(self.report, name, getattr(self.report, name) + 1)

    def refused_for_now(self, what: str, exc: Exception, then: str = "trying again") -> bool:
        """A request DynamoDB refused for a passing reason (throttling past the SDK's retries) is logged and counted
        (``retried``) instead of failing the invocation; any other error is not handled here (False)."""
        if not dynamo.is_retryable(exc):
            return False
        self.add("retried")
        logger.warning(f"{what} was refused for now; {then}", extra={"queue": self.report.queue, "error": str(exc)})
        return True
