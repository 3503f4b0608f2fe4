"""The worker of a queue: one loop for every way an invocation starts.

One invocation = one ``Worker.run``. It claims first the tasks it was handed by name (a stream batch's: claimed by key,
strongly consistent, no wait for the index), then the queue's next claimable tasks as the index shows them (newest
first in a LIFO queue), as long as it has a free runner slot, a running-limit slot and time before its claim deadline;
runs them concurrently under their leases (``taskqueue.work.lease``) and records each outcome
(``taskqueue.work.outcomes``). While tasks run and nothing is claimable, it looks again whenever a task ends (a
release may make a retry due) and at least every IDLE_POLL_SECONDS; a retry due within WAIT_HORIZON_SECONDS is waited
for. It ends when nothing is claimable and nothing runs (``empty``), at its claim deadline (``budget``: with claimable
work left, the next invocation is started as the run's first slot comes free, not after its last task: those may
run long, and stream starts meanwhile may have found the running limit full; one tail call a run), when the queue is paused (``paused``), or when the queue's running limit is
held by others and nothing of its own runs (``limit``: the holders look again before they end).

A read, claim or write DynamoDB refuses for a passing reason (throttling past the SDK's retries) is logged, counted
(``retried``) and tried again after a pause. Every runner thread's outcome is read. Index entries of tasks this run
has just claimed, or lost a claim on, are passed over for a moment (a GSI shows writes late).

Its neighbours: ``outcomes`` (one attempt and its recording), ``held_slots`` (the running limit's slots, leased to the
invocation's end), ``fair_share`` (groups), ``delayed_view`` (when a look reads the delayed partitions),
``record_view`` (pause), ``running`` (the claimed tasks' threads and heartbeat), ``stream_batch`` (what a stream
batch names).

Past 400 lines: the run's steps share one state (``_Run``), which splitting them would hand around.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence

from aws_lambda_powertools import Logger

from taskqueue.core.clock import Clock, SystemClock
from taskqueue.core.concurrency import SystemThreads, Threads
from taskqueue.core.errors import ConfigError, TaskQueueError, TaskTooLong
from taskqueue.core.model import Task
from taskqueue.core.record import QueueRecord
from taskqueue.core.run_time import InvocationTime, too_long_message
from taskqueue.core.states import TaskStatus
from taskqueue.core.wake_schedule import WAIT_HORIZON_SECONDS, worth_waiting
from taskqueue.store import Candidate, FairTurn, TaskStore, Token
from taskqueue.work.delayed_view import DelayedView
from taskqueue.work.fair_share import FairShare
from taskqueue.work.held_slots import HeldSlots
from taskqueue.work.lease import Lease
from taskqueue.work.lease_marks import MarkChoice
from taskqueue.work.outcomes import RECORD_BACKOFF_SECONDS, Outcomes
from taskqueue.work.record_view import RecordView
from taskqueue.work.report import Tally, WorkerReport
from taskqueue.work.runner import TaskRunner
from taskqueue.work.running import BEAT_SECONDS, RunningTasks
from taskqueue.work.stale_entries import StaleEntries

logger = Logger(child=True)

# While tasks run and nothing is claimable, look again at least this often (a task behind this run on its stream
# shard, a retry falling due).
IDLE_POLL_SECONDS = 0.5
# After a round whose every claim was lost (another worker won, or a stale index entry), pause this long (jittered)
# before reading the index again, instead of spinning on the same entries.
LOST_ROUND_PAUSE_SECONDS = 0.2

Stopped = Callable[[str, "int | None", "QueueRecord | None"], None]


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
        threads: Callable[[int], Threads] | None = None,
        stopped: Stopped | None = None,
        marks: MarkChoice | None = None,
        tail_call: Callable[[str], None] | None = None,
    ) -> None:
        """``threads(n)``: where the run's tasks run, n at most at once (``SystemThreads`` by default; the simulation
        hands in its own). ``stopped(queue, next_due_ms, record)``: told when a run ends with no claimable work left,
        to schedule a wake-up at the queue's delayed head (``taskqueue.wakeups.delayed_wakeup``); with it the run
        waits only for a delayed entry due within WAIT_HORIZON_SECONDS, without it within its budget. ``marks``: how
        this execution environment's tasks ended lately (whether a claim leaves the lease mark off). ``tail_call(queue)``:
        starts the next invocation; a run past its budget with work left calls it as its first slot comes free,
        rather than after its last task (``tail_called_early``: the handler does not call it again)."""
        self._store = store
        self._runner = runner
        self._capacity = capacity
        self._owner = owner
        self._clock = clock or SystemClock()
        self._rng = rng or random.Random()
        self._threads = threads or (lambda n: SystemThreads(n, "runner"))
        self._stopped = stopped
        self._horizon = WAIT_HORIZON_SECONDS if stopped is not None else float("inf")
        self._marks = marks or MarkChoice()
        self._tail_call = tail_call
        self._settings = store.settings

    def run(
        self, queue: str, claim_seconds: float, hold_seconds: float | None = None, named: Sequence[Candidate] = (),
        *, named_read_first: bool = False,
    ) -> WorkerReport:
        """Claim and run tasks of ``queue`` for ``claim_seconds``, ``named`` ones first (``named_read_first``: they come
        from an old stream batch, so those no longer waiting are left out by one read before any claim).
        ``hold_seconds``: how long this invocation may hold a claimed task (its remaining time): a lease shorter than
        that is refused before any claim, since a task could be recovered and run twice while it still runs if every
        heartbeat failed."""
        lease_seconds = self._settings.lease_seconds
        if hold_seconds is not None and lease_seconds < hold_seconds:
            raise ConfigError(
                f"LEASE_SECONDS={lease_seconds} is shorter than this invocation can hold a task ({hold_seconds:.0f} s, "
                "its remaining time): set LeaseSeconds to at least the function's Timeout"
            )
        if named and named_read_first:
            named = self._store.still_waiting(list(named))
        run = _Run(self, queue, claim_seconds, hold_seconds, named)
        try:
            run.claim()
        finally:
            run.drain()
        run.finish()
        return run.report


class _Run:
    """One invocation's state and steps (a ``Worker.run``)."""

    def __init__(
        self, worker: Worker, queue: str, claim_seconds: float, hold_seconds: float | None, named: Sequence[Candidate]
    ) -> None:
        self.w = w = worker
        self.report = report = WorkerReport(queue=queue)
        self.tally = tally = Tally(report)
        self.queue = queue
        self.clock = w._clock
        self.store = w._store
        self.time = InvocationTime(self.clock, hold_seconds, w._settings.worker_timeout_seconds)
        self.deadline = self.clock.monotonic() + claim_seconds
        # Slots are leased until the invocation cannot run any more (its remaining time, else its Timeout).
        hold = hold_seconds if hold_seconds is not None else (w._settings.worker_timeout_seconds or 900.0)
        until_ms = self.clock.now_ms() + int(hold * 1000) + 1_000

        self.record = RecordView(self.store, queue, self.clock, tally.refused_for_now)
        self.delayed = DelayedView(self.store, self.record, self.clock)
        self.slots = HeldSlots(self.store, queue, w._owner, until_ms, lambda: tally.add("errors"))
        self.fair = FairShare(self.store, queue, w._owner, self.clock, w._rng, lambda: tally.add("errors"),
                              self.record, until_ms)
        self.outcomes = Outcomes(self.store, w._runner, w._owner, self.clock, w._rng,
                                 count=tally.add, released=self._released)
        # A thread more per runner slot: an outcome is written while the next task runs.
        self.threads = w._threads(2 * w._capacity)
        self.tasks = RunningTasks(self.threads, self.store, w._owner, attempt=self.outcomes.attempt, freed=self._freed,
                                  count=tally.add, refused=tally.refused_for_now)
        # Named tasks first, in the queue's order (a descending read of the index: the largest sort key is next).
        self.named = sorted(named, key=lambda c: c.ready_sort, reverse=True)
        self.first_round = True
        self.stale = StaleEntries(self.clock)  # index entries this run claimed (or lost) just now: passed over
        self.left_for_fresh: set[str] = set()  # tasks too long for this invocation's time left: the next one's
        self.early_lock = threading.Lock()

    # ---- claiming -------------------------------------------------------------------------------------------

    def claim(self) -> None:
        report, w = self.report, self.w
        while True:
            self.tasks.collect()
            left = self.deadline - self.clock.monotonic()
            if left <= 0:
                report.stopped_by = "budget"
                return
            free = w._capacity - len(self.tasks.running)
            if free == 0:
                self.tasks.wait(min(left, BEAT_SECONDS), running_only=True)
                continue
            if self.record.paused_now():
                report.stopped_by = "paused"
                return
            try:
                candidates, met_stale = self.next_candidates(free)
            except TaskQueueError as exc:
                if not self.pause_if_refused("reading the queue", exc, left):
                    raise
                continue
            if not candidates:
                if met_stale:
                    report.skipped += met_stale
                    self.clock.sleep(min(left, w._rng.uniform(0.5, 1.0) * LOST_ROUND_PAUSE_SECONDS))
                    continue
                if not self.wait_for_work(left):
                    report.stopped_by = "empty"
                    return
                continue
            if not self.claim_round(candidates, free, left):
                return

    def next_candidates(self, free: int) -> tuple[list[Candidate], int]:
        """What to claim next, and how many stale entries a look met: the named tasks at first (the newest a stream
        batch hands over: no read, no wait for the index); then a look, with the named tasks not tried yet merged in
        the queue's order, so that newer work that arrived meanwhile is served first (LIFO) and a named task the index
        does not show yet (its lag) is still claimed."""
        if self.named and self.first_round:
            self.first_round = False
            return self.named[:free], 0
        looked, met_stale = self.look(free)
        if not self.named:
            return looked, met_stale
        # A named task its group's limit held back stays named (the index may not show it yet) until the hold ends.
        seen = {c.task_id for c in looked}
        named = [c for c in self.named if c.task_id not in seen and not self.fair.holds(c.group)]
        merged = sorted([*looked, *named], key=lambda c: c.ready_sort, reverse=True)
        return merged, met_stale

    def look(self, free: int) -> tuple[list[Candidate], int]:
        skip = self.stale.ids() | self.time.found_too_long
        wanted = max(self.w._settings.page_size, free)
        if self.fair.groups:  # a fair look reads one query per group: ask for what the free slots can take
            wanted = min(wanted, 2 * free + 1)
        candidates, met_stale = self.delayed.look(wanted, self.clock.now_ms(), skip=skip, fair=self.fair.turn())
        self.fair.prepare(candidates)
        return candidates, met_stale

    def wait_for_work(self, left: float) -> bool:
        """Nothing claimable now: wait for a running task to end (or the next poll), or for a retry due soon; ``False``
        when there is nothing to wait for (the run ends)."""
        if self.tasks.busy:
            self.tasks.wait(min(left, IDLE_POLL_SECONDS))
            return True
        due_in = _earliest(self.delayed.due_in_seconds(), self.fair.held_back_for())
        if not worth_waiting(due_in, left, self.w._horizon):
            return False
        assert due_in is not None
        self.clock.sleep(max(0.01, min(due_in, IDLE_POLL_SECONDS, left)))
        return True

    def claim_round(self, candidates: list[Candidate], free: int, left: float) -> bool:
        """Claim what the free slots can take of ``candidates``; ``False`` when the run must end (the running limit is
        held by others and nothing of this run's runs)."""
        report, w = self.report, self.w
        order = self.fair.order(candidates) if self.fair.groups else list(candidates)
        try:
            slots = self.slots.for_claims(min(free, len(order)), guess=not self.tasks.busy)
        except TaskQueueError as exc:  # a refused slot read or write: pause, look again
            if not self.pause_if_refused("taking running-limit slots", exc, left):
                raise
            return True
        if slots is not None and not slots:  # the running limit: other workers' tasks hold every slot
            report.limited += 1
            if self.tasks.busy:
                self.tasks.wait(min(left, IDLE_POLL_SECONDS))
                return True
            report.stopped_by = "limit"
            return False
        free = min(free, len(slots)) if slots is not None else free
        claimed = 0
        untried = list(order)
        while untried and free > 0:
            outcome = self.claim_one(untried.pop(0), slots)
            if outcome is None:  # refused for now: what is left waits for the next round
                self.clock.sleep(min(left, w._rng.uniform(0.5, 1.0) * RECORD_BACKOFF_SECONDS))
                break
            if outcome:
                free -= 1
                claimed += 1
                if self.fair.groups and untried:  # the claim weighs on its group: the next slot may go elsewhere
                    untried = self.fair.order(untried)
        self.slots.keep(slots or [])
        if claimed == 0 and not self.named and not self.tasks.busy:
            self.clock.sleep(min(left, w._rng.uniform(0.5, 1.0) * LOST_ROUND_PAUSE_SECONDS))
        return True

    def claim_one(self, candidate: Candidate, slots: list[Token] | None) -> bool | None:
        """Claim ``candidate`` and start it: ``True`` started, ``False`` not (lost, held back, too long), ``None``
        refused for now (throttled: the round stops)."""
        report, w = self.report, self.w
        admitted: Token | bool | None = None
        try:
            admitted = self.fair.admit(candidate)  # its group's limits: a slot, a place in its rate window
            if admitted is False:
                report.limited += 1
                return False
            # A claim leaves the lease off the task's index entry while this environment's tasks end quickly (one
            # index write fewer), marked only if the task still runs a moment later (store/unmarked_leases.py).
            mark = self.fair.groups or not w._marks.unmarked_pays
            task = self.store.claim(candidate, w._owner, run_within=self.time.run_within(), mark=mark)
        except TaskTooLong as exc:  # left PENDING for a fresh invocation, which has time for it
            self.fair.lost(admitted)
            self.too_long(candidate, exc)
            return False
        except TaskQueueError as exc:  # not applied: the task is still there
            self.fair.lost(admitted)
            if not self.tally.refused_for_now("claiming a task", exc):
                raise
            return None
        finally:
            if admitted is not False:  # held back by its group: still named, tried again once the hold ends
                self.tried(candidate)
        self.stale.add(candidate.task_id)
        if task is None:
            self.fair.lost(admitted)
            report.lost += 1
            return False
        self.delayed.claimed(candidate)
        self.fair.claimed(candidate)
        report.claimed += 1
        report.claim_ages_ms.append(task.updated_ms - task.created_ms)
        self.tasks.start(Lease(task, self.store, w._owner, self.clock, slots.pop() if slots else None,
                               admitted if isinstance(admitted, Token) else None))
        return True

    def tried(self, candidate: Candidate) -> None:
        """A named task was tried: it is not named any more (one refused for now waits in the index for a look)."""
        if self.named:
            self.named = [c for c in self.named if c.task_id != candidate.task_id]

    def too_long(self, candidate: Candidate, exc: TaskTooLong) -> None:
        w = self.w
        self.tally.add("too_long")
        if not self.time.too_long(candidate.task_id, exc.run_seconds):
            logger.info("task left for a fresh invocation: too long for the time left", extra={"task_id": candidate.task_id})
            self.left_for_fresh.add(candidate.task_id)
            return
        # No invocation of this worker could run it (its Timeout was lowered after the task was made): dead-letter it
        # with what to do, rather than leave it to be tail-called for and refused until its ttl.
        error = too_long_message(exc.run_seconds, self.time.timeout)
        try:
            task = self.store.claim(candidate, w._owner)
            if task is not None and self.store.fail(task, w._owner, error):
                self.tally.add("failed")
                logger.error("task failed (dead-lettered)", extra={"task_id": task.task_id, "error": error})
        except TaskQueueError as refused:  # refused for now: the next run meets it again
            if not self.tally.refused_for_now("dead-lettering a task too long for this worker", refused):
                raise

    def pause_if_refused(self, what: str, exc: Exception, left: float) -> bool:
        if not self.tally.refused_for_now(what, exc):
            return False
        self.clock.sleep(min(left, BEAT_SECONDS, self.w._rng.uniform(0.5, 1.0) * RECORD_BACKOFF_SECONDS))
        return True

    def _freed(self, lease: Lease) -> None:
        """A task's runner returned: its running-limit slot serves the run's next claim, its group slot goes back."""
        claimed_ms = lease.task.claimed_ms
        self.w._marks.ran((self.clock.now_ms() - claimed_ms) / 1000 if claimed_ms is not None else 0.0)
        if lease.slot is not None:
            self.slots.keep([lease.slot])
        if lease.group_slot is not None:
            self.fair.done(lease.group_slot)
        self.fair.ended(lease.task.task_id)

    def drain(self) -> None:
        """Claiming is over: the slots no task uses go back, the tasks in flight finish inside their leases (each
        one's slot going back as it ends), then what is left of the run's slots."""
        try:
            self.slots.claims_over(self._slot_came_free if self.wants_early_tail_call() else None)
            self.tasks.drain()
        finally:
            close = getattr(self.threads, "close", None)
            if close is not None:
                close()
            self.slots.free_all()
            self.fair.free_all()

    def wants_early_tail_call(self) -> bool:
        """At its budget, with claimable work left and its own tasks still running: their slots, as they come free,
        are for the next invocation (the stream starts that came meanwhile may have found the limit full and ended)."""
        if self.w._tail_call is None or self.report.stopped_by != "budget" or not self.tasks.busy \
                or self.store.running_limit(self.queue) is None:  # no slot to come free: the run's end decides
            return False
        return self.work_left()

    def _slot_came_free(self) -> None:
        with self.early_lock:
            if self.report.tail_called_early:
                return
            self.report.tail_called_early = True
        assert self.w._tail_call is not None
        try:
            self.w._tail_call(self.queue)
        except Exception as exc:  # noqa: BLE001 - the tail call at the run's end is still decided
            logger.warning("the early tail call failed; the run's end decides again", extra={"error": str(exc)})

    def _released(self, task: Task, not_before_ms: int) -> None:
        self.delayed.released(task.task_id, not_before_ms, (task.shard, task.group))
        self.stale.forget(task.task_id)  # its new index entry is real: claimable again once due

    # ---- the end -------------------------------------------------------------------------------------------

    def finish(self) -> None:
        """What is left: claimable work at the budget, or a retry the next budget reaches, makes the handler tail-call;
        otherwise a delayed head is scheduled (``stopped``)."""
        report = self.report
        if report.stopped_by == "budget":  # one tail call a run: sent already as its first slot came free, or now
            report.work_remains = report.tail_called_early or self.work_left()
        elif report.stopped_by == "empty":  # the last look saw nothing claimable: only what falls due, or is too long
            report.work_remains = bool(self.left_for_fresh) or self.due_soon()
        report.shed += self.store.drain_shed().get(self.queue, 0)
        recovered = self.store.drain_recovered(self.queue)  # dead workers' tasks its looks met (store/claims.py)
        report.recovered += sum(recovered.values())
        report.failed += recovered.get(TaskStatus.FAILURE.value, 0)
        if self.w._stopped is not None and report.stopped_by != "paused" and not report.work_remains:
            # Woken at the delayed head, or as a held-back group (a timed pause, a limit) may be claimed from again.
            wake_ms = _earliest(self.delayed.next_due_ms(), self.fair.next_hold_end_ms())
            self.w._stopped(self.queue, None if wake_ms is None else int(wake_ms), self.record.record)

    def work_left(self) -> bool:
        if self.left_for_fresh:  # a fresh invocation has the time these need
            return True
        try:
            query_delayed = self.delayed.worth_reading(self.clock.now_ms())
            if self.store.has_claimable(self.queue, delayed=query_delayed, fair=FairTurn(groups=self.fair.groups)):
                return True
            if query_delayed:
                self.delayed.refresh()
            return self.due_soon()
        except TaskQueueError as exc:  # not known: tail-call rather than strand work (an empty run costs little)
            if not self.tally.refused_for_now("checking for work left", exc, then="tail-calling in case"):
                raise
            return True

    def due_soon(self) -> bool:
        """A delayed entry falls due within the next budget (and the wait horizon, with a scheduled wake-up)."""
        due_in = self.delayed.due_in_seconds()
        return due_in is not None and due_in < min(self.w._settings.time_budget_seconds, self.w._horizon)

def _earliest(*seconds: float | None) -> float | None:
    return min((s for s in seconds if s is not None), default=None)
