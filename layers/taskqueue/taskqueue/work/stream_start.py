"""Stream starts (issue 29): a ProcessTasks invocation the table's stream started for the new tasks its batch names.

At a task a second or so, a worker kept awake for the next task costs more than an invocation per task: it is billed
for every second it waits, and writes its watch, renewals and stop. So the table's stream hands each batch of new
ready tasks (ProcessTasks' ``TaskStream`` event: INSERTs of PENDING tasks, no batching window) to the worker itself,
and producers of such a queue write their tasks and nothing else (``Settings.stream_started``). Per batch:

- one strongly consistent read of the queue's record. A watcher that looks at the index and has not begun to stop
  sees these tasks before it stops (``taskqueue.core.handshake.touch_needed``: the read comes after the tasks were
  written, as a producer's did); a wake-up in flight starts a worker that looks; a paused queue waits for its resume.
  Either way: end, claiming nothing.
- a busy queue (this execution environment was handed ``BUSY_TASKS`` in the last ``BUSY_SECONDS``) or one with groups
  (fair share picks among groups, not by arrival): the regular worker, which watches and lingers, so the stream's
  next batches find it watching and end at once.
- otherwise claim the named tasks by key, in the queue's order, without reading the index (no wait for its lag), run
  them, record their outcomes and end: no watch, no linger, no look. A task another worker claimed first is passed
  over (one lost claim). When the queue's running limit has no free slot, or a claim was refused for now, what is
  left goes to the regular worker, which waits for slots as a watcher does.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import fields
from enum import StrEnum
from typing import Any

from aws_lambda_powertools import Logger

from taskqueue.core.clock import Clock
from taskqueue.core.errors import InvalidEvent, TaskQueueError, TaskTooLong
from taskqueue.core.fairness import is_delayed_partition
from taskqueue.core.handshake import WakeRecord, lapse_suspected, touch_needed
from taskqueue.core.run_time import InvocationTime
from taskqueue.core.settings import Settings
from taskqueue.core.states import TaskStatus
from taskqueue.store import Candidate
from taskqueue.store.table import candidate_of
from taskqueue.wakeups.producer import LAPSE_MARGIN_SECONDS
from taskqueue.work.claim_control import ClaimControl
from taskqueue.work.delayed_view import DelayedView
from taskqueue.work.fair_share import FairShare
from taskqueue.work.held_slots import HeldSlots
from taskqueue.work.lease import Lease
from taskqueue.work.outcomes import Outcomes
from taskqueue.work.worker import Worker, WorkerReport

logger = Logger(child=True)

# A queue handed this many new tasks in this many seconds (by one execution environment's stream starts) is busy:
# a watcher that lingers costs less there than an invocation per batch (bench/cost_floor.py, docs/wakeups.md).
BUSY_TASKS = 12
BUSY_SECONDS = 4.0
# WorkerReport.stopped_by of a stream start that claimed the tasks it was handed.
NAMED = "named"


class StreamStep(StrEnum):
    """What a stream start does with its batch; the value is its report's ``stopped_by`` when it claims nothing."""

    WATCHED = "watched"  # a watcher that looks at the index and is not stopping has them
    IN_FLIGHT = "in-flight"  # a wake-up is on its way: the worker it starts looks at the index
    PAUSED = "paused"  # `taskq resume` wakes the queue
    WORKER = "worker"  # a busy queue, or one with groups: the regular worker (it watches)
    CLAIM = "claim"  # nobody else will look: claim them here


def stream_step(record: WakeRecord, now_ms: int, busy: bool) -> StreamStep:
    """The rule, on the queue's record read strongly consistently after the batch's tasks were written."""
    if record.paused:
        return StreamStep.PAUSED
    if not touch_needed(record, now_ms):
        return StreamStep.WATCHED
    if record.watched(now_ms):  # a watcher that began to stop: its last look may come too early for these tasks
        return StreamStep.CLAIM
    if record.wake_in_flight(now_ms):
        return StreamStep.IN_FLIGHT
    return StreamStep.WORKER if busy or record.has_groups else StreamStep.CLAIM


class ArrivalHistory:
    """How many new tasks this execution environment's stream starts were handed lately (``Services.arrivals``,
    shared by its invocations): the observed rate that chooses between claiming here and a watcher."""

    def __init__(self, busy_tasks: int = BUSY_TASKS, busy_seconds: float = BUSY_SECONDS) -> None:
        self._busy_tasks = busy_tasks
        self._busy_seconds = busy_seconds
        self._seen: deque[tuple[float, int]] = deque()
        self._lock = threading.Lock()

    def note(self, count: int, now: float) -> None:
        """``count`` tasks handed at ``now`` (monotonic seconds)."""
        with self._lock:
            self._seen.append((now, count))
            self._forget(now)

    def busy(self, now: float) -> bool:
        with self._lock:
            self._forget(now)
            return sum(count for _, count in self._seen) >= self._busy_tasks

    def _forget(self, now: float) -> None:
        while self._seen and self._seen[0][0] <= now - self._busy_seconds:
            self._seen.popleft()


def named_tasks(records: Iterable[Mapping[str, Any]], settings: Settings) -> dict[str, list[Candidate]]:
    """The new ready tasks a stream batch names, per stream-started queue, as claimable candidates (the task's item
    is its NewImage, raw). Anything else (a delayed task, another queue's, a control item) is not theirs: skipped."""
    found: dict[str, list[Candidate]] = {}
    for n, record in enumerate(records):
        if not isinstance(record, Mapping) or not isinstance(record.get("dynamodb"), Mapping):
            raise InvalidEvent(f"Records[{n}] is not a DynamoDB stream record: it has no dynamodb object")
        image = record["dynamodb"].get("NewImage") or {}
        try:
            if record.get("eventName") != "INSERT" or image.get("taskStatus", {}).get("S") != TaskStatus.PENDING.value:
                continue
            queue = image.get("queue", {}).get("S")
            partition = image.get("readyKey", {}).get("S", "")
            if not queue or not settings.stream_started(queue) or "notBefore" in image or is_delayed_partition(partition):
                continue
            shard = int(image["shard"]["N"]) if "shard" in image else int(partition.split("#")[1])
            found.setdefault(queue, []).append(candidate_of(image, queue, shard))
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
            # Not a task as this version writes it: left PENDING in the table, where the safety net finds it.
            logger.warning("stream record skipped: not a claimable task", extra={"record": n, "error": repr(exc)})
    return found


class StreamStart(Worker):
    """Claims the tasks a stream batch names by key, runs them and ends (the claim, the run, the outcome and the
    heartbeat are the worker's own: ``Worker``)."""

    def run_named(self, queue: str, named: list[Candidate], record: WakeRecord, hold_seconds: float) -> tuple[WorkerReport, bool]:
        """Claim and run ``named`` (``record``: the queue's record as just read). Returns the report and whether tasks
        are left for the regular worker (no running-limit slot free, or a claim refused for now)."""
        report = WorkerReport(queue=queue, stopped_by=NAMED)
        self._time = InvocationTime(self._clock, hold_seconds, self._settings.worker_timeout_seconds)

        def refused(what: str, exc: Exception, then: str) -> bool:
            return self._refused_for_now(report, what, exc, then=then)

        control = ClaimControl(self._store, queue, self._owner, self._clock, self._rng, refused)
        control.see_record(record)
        self._delayed = DelayedView(self._store, control, self._clock)
        self._slots = HeldSlots(self._store, control, lambda: self._add(report, "errors"), self._clock, guess=True)
        self._fair = FairShare(self._store, queue, self._owner, self._clock, self._rng, lambda: self._add(report, "errors"), control)
        self._outcomes = Outcomes(self._store, self._runner, self._owner, self._clock, self._rng,
                                  count=lambda name: self._add(report, name), released=self._released)
        # The index's order, as a look reads it (descending: the largest sort key is the queue's next task, LIFO or FIFO).
        pending = sorted(named, key=lambda c: c.ready_sort, reverse=True)
        left = False
        running: dict[Future[None], Lease] = {}
        recording: dict[Future[None], Lease] = {}
        with ThreadPoolExecutor(max_workers=2 * self._capacity, thread_name_prefix=f"{queue}-stream") as pool:
            while pending:
                running = self._collect(running, report)
                recording = self._collect(recording, report)
                self._heartbeat(running.values(), report)
                self._slots.renew()
                free = self._capacity - len(running)
                if free == 0:
                    wait(running, timeout=self._beat_seconds(), return_when=FIRST_COMPLETED)
                    continue
                try:
                    slots = self._slots.for_claims(min(free, len(pending)))
                except TaskQueueError as exc:
                    if not self._refused_for_now(report, "taking running-limit slots", exc, then="leaving it to the worker"):
                        raise
                    left = True
                    break
                if slots is not None and not slots:  # the running limit: other workers' tasks hold every slot
                    report.limited += 1
                    if running:
                        wait(running, timeout=self._beat_seconds(), return_when=FIRST_COMPLETED)
                        continue
                    left = True
                    break
                take = len(slots) if slots is not None else free
                while pending and take > 0:
                    candidate = pending.pop(0)
                    try:
                        task = self._store.claim(candidate, self._owner, run_within=self._time.run_within(),
                                                 mark=not self._marks.unmarked_pays)
                    except TaskTooLong as exc:
                        self._too_long(candidate, exc, report)
                        continue
                    except TaskQueueError as exc:  # not applied: the task is still PENDING
                        if not self._refused_for_now(report, "claiming a task", exc, then="leaving it to the worker"):
                            raise
                        pending.insert(0, candidate)
                        left = True
                        break
                    if task is None:  # another worker's already (a watcher, a stream record delivered twice)
                        report.lost += 1
                        continue
                    take -= 1
                    report.claimed += 1
                    report.claim_ages_ms.append(task.updated_ms - task.created_ms)
                    lease = Lease(task, self._store, self._owner, self._clock, slots.pop() if slots else None)
                    self._start(lease, report, pool, running, recording)
                self._slots.keep(slots or [])
                if left:
                    break
            self._slots.stop_claiming()
            self._drain(running, recording, report)
        report.shed += self._store.drain_shed().get(queue, 0)
        recovered = self._store.drain_recovered(queue)
        report.recovered += sum(recovered.values())
        report.failed += recovered.get(TaskStatus.FAILURE.value, 0)
        if report.released and self._stopped is not None and not left:
            self._stopped(queue, self._delayed.next_due_ms(), record)  # a wake-up when its retries fall due
        return report, left


def start(
    queue: str,
    named: list[Candidate],
    *,
    read_record: Callable[[str], WakeRecord],
    history: ArrivalHistory,
    clock: Clock,
    claim_here: Callable[[WakeRecord], tuple[WorkerReport, bool]],
    run_worker: Callable[[], WorkerReport],
) -> WorkerReport:
    """One queue's part of a stream batch: the record read, the rule (``stream_step``), then claiming here or the
    regular worker. A watcher that looks dead (it missed a renewal: ``lapse_suspected``) is not trusted on its word:
    the start waits until its lease ends (a few seconds at most) and reads the record again, as Trigger's stream
    backstop did for producers' writes."""
    record = read_record(queue)
    history.note(len(named), clock.monotonic())
    step = stream_step(record, clock.now_ms(), history.busy(clock.monotonic()))
    if step is StreamStep.WATCHED and lapse_suspected(record, clock.now_ms()):
        clock.sleep(max(0.0, (record.watch_until_ms - clock.now_ms()) / 1000) + LAPSE_MARGIN_SECONDS)
        record = read_record(queue)
        step = stream_step(record, clock.now_ms(), history.busy(clock.monotonic()))
    if step is StreamStep.CLAIM:
        report, left = claim_here(record)
        if not left:
            return report
        logger.info("stream start leaves tasks to the worker", extra={"queue": queue, "claimed": report.claimed})
        return _merged(report, run_worker())
    if step is StreamStep.WORKER:
        return run_worker()
    return WorkerReport(queue=queue, stopped_by=step.value)


def _merged(first: WorkerReport, then: WorkerReport) -> WorkerReport:
    """One report for a stream start that claimed some tasks, then ran the worker for the rest: every count summed (the
    worker's flags and its stop kept)."""
    for spec in fields(WorkerReport):
        value = getattr(first, spec.name)
        if isinstance(value, int) and not isinstance(value, bool):
            setattr(then, spec.name, value + getattr(then, spec.name))
    then.claim_ages_ms = first.claim_ages_ms + then.claim_ages_ms
    return then
