"""How long a task may run, and what a worker may claim with the time its invocation has left (pure rules).

A task declares how long it may run (``runSeconds``); one that names none takes its queue's DEFAULT_RUN_SECONDS.
A worker invocation claims a task only if the task can finish inside that same invocation, with time kept after
it to record the outcome:

    run seconds + FINISH_RESERVE_SECONDS <= the invocation's remaining time

so a worker near its end claims nothing long: it leaves the task PENDING and tail-calls, and a fresh invocation
(a whole Timeout ahead of it) takes it. The longest a task may declare is what a fresh invocation can give:
the worker function's Timeout less START_RESERVE_SECONDS (what an invocation spends before its first claim:
start-up, lease recovery) and FINISH_RESERVE_SECONDS. CreateTasks refuses a longer task; a worker dead-letters
one that reaches it anyway (its Timeout was lowered after the task was made), since no invocation could run it.

Declaring is a promise, not a limit the worker enforces: Python cannot stop a runner's thread. A runner that
overruns is killed with its invocation at the Timeout, and its task runs again after its lease (see docs/runner.md).
"""

from __future__ import annotations

import math
from typing import Protocol

# Kept after a task's declared run to record its outcome: the worker retries a throttled write with backoff
# (worker.RECORD_ATTEMPTS: about 7.5 s at most) and renews the lease meanwhile.
FINISH_RESERVE_SECONDS = 10.0
# What an invocation may have spent before its first claim: start-up (a cold start), lease recovery.
START_RESERVE_SECONDS = 5.0
# Lambda's longest Timeout: no task can run longer on any worker.
LAMBDA_MAX_TIMEOUT_SECONDS = 900
# The shortest run a task may declare.
MIN_RUN_SECONDS = 1


def longest_run_seconds(timeout_seconds: float) -> int:
    """The longest run a task may declare for a worker function whose Timeout is ``timeout_seconds`` (0: none)."""
    return max(0, math.floor(timeout_seconds - START_RESERVE_SECONDS - FINISH_RESERVE_SECONDS))


def run_within(remaining_seconds: float) -> float:
    """The longest declared run an invocation with ``remaining_seconds`` left may claim now (negative: none)."""
    return remaining_seconds - FINISH_RESERVE_SECONDS


def fits(run_seconds: float, remaining_seconds: float) -> bool:
    """May an invocation with ``remaining_seconds`` left claim a task that declares ``run_seconds``?"""
    return run_seconds <= run_within(remaining_seconds)


def effective_run_seconds(declared: int | None, queue_default: int) -> int:
    """What a task may run: its own ``runSeconds``, else its queue's default."""
    return queue_default if declared is None else declared


def claim_window_seconds(time_budget: float, remaining_seconds: float) -> float:
    """How long a worker invocation keeps claiming: its time budget, but never past the moment the shortest task
    could no longer finish. Each claim is bounded by ``fits`` besides, so what is claimed late is short."""
    return max(0.0, min(time_budget, run_within(remaining_seconds) - MIN_RUN_SECONDS))


def claim_lease_seconds(lease_seconds: float, worker_timeout_seconds: float | None) -> float:
    """The lease a worker's claim takes: LEASE_SECONDS, but never shorter than the worker's Timeout, so a claim
    outlasts the invocation that holds it even if every heartbeat failed (no second run while the first runs)."""
    return lease_seconds if worker_timeout_seconds is None else max(lease_seconds, worker_timeout_seconds)


def too_long_message(run_seconds: int, timeout_seconds: float | None, setting: str = "WORKER_TIMEOUT_SECONDS") -> str:
    """Why a task of ``run_seconds`` cannot run on a worker whose Timeout is ``timeout_seconds``, and what to do."""
    timeout_seconds = LAMBDA_MAX_TIMEOUT_SECONDS if timeout_seconds is None else timeout_seconds
    longest = longest_run_seconds(timeout_seconds)
    return (
        f"runSeconds ({run_seconds}) is longer than a ProcessTasks invocation can run a task: its Timeout "
        f"({setting}={timeout_seconds:g} s) leaves {longest} s once {START_RESERVE_SECONDS:g} s to start and "
        f"{FINISH_RESERVE_SECONDS:g} s to record the outcome are kept; raise the stack's ProcessTasksTimeout "
        f"(Lambda allows up to {LAMBDA_MAX_TIMEOUT_SECONDS} s, so at most {longest_run_seconds(LAMBDA_MAX_TIMEOUT_SECONDS)} s "
        "of work per task) or split the work into shorter tasks"
    )


class InvocationTime:
    """One worker invocation's time: the longest run it may still claim, and the tasks it found too long for it
    (skipped for the rest of the invocation: its remaining time only shrinks). ``hold_seconds``: the invocation's
    remaining time when it started (None: not bounded, claim anything); ``worker_timeout_seconds``: the worker
    function's Timeout, which bounds what any invocation could run (None: not known, so no task is judged
    too long for every invocation)."""

    def __init__(self, clock: _Monotonic, hold_seconds: float | None, worker_timeout_seconds: float | None) -> None:
        self._clock = clock
        self._end = None if hold_seconds is None else clock.monotonic() + hold_seconds
        self.timeout = worker_timeout_seconds
        self.longest_run = None if worker_timeout_seconds is None else longest_run_seconds(worker_timeout_seconds)
        self._too_long: set[str] = set()

    def run_within(self) -> float | None:
        """The longest declared run a claim may take now (None: any)."""
        return None if self._end is None else run_within(self._end - self._clock.monotonic())

    def too_long(self, task_id: str, run_seconds: int) -> bool:
        """Note a task refused for its run time; True if no invocation of this worker could ever run it."""
        self._too_long.add(task_id)
        return self.longest_run is not None and run_seconds > self.longest_run

    @property
    def found_too_long(self) -> frozenset[str]:
        """The tasks found too long for this invocation (a look passes them over)."""
        return frozenset(self._too_long)


class _Monotonic(Protocol):
    def monotonic(self) -> float: ...
