"""The claim loop shared by the workers: claim only with a free runner slot, run, record the outcome.

One invocation = one ``Worker.run``: recover expired leases, then until the claim deadline query the
queue's next claimable tasks, claim as many as there are free runner slots, run them concurrently, and
record SUCCESS / FAILURE, or release for a retry with backoff. While tasks run, their leases are renewed
(``taskqueue.work.lease``). Every runner thread's outcome is read: an error recording it (throttling past the
SDK's retries, a refused request) is logged and counted, never dropped. A read, claim or renewal DynamoDB
refuses for a passing reason (throttling past the SDK's retries) is logged, counted (``retried``) and tried
again after a pause, so throttling slows a run down instead of failing it. Index entries of tasks this run has
just claimed, or lost a claim on, are skipped for a moment (a GSI shows writes late). It reports whether
claimable work remains, so the handler can tail-call.

Its neighbours: ``outcomes`` (one attempt and its recording, retries and backoff), ``held_slots`` (the running
limit's slots a run holds), ``delayed_view`` (when a look reads the delayed partitions), ``claim_control`` (lanes,
pause, slots), ``taskqueue.wakeups.watch`` (watching and lingering). Past 400 lines for one reason: ``Worker.run`` is the claim
loop as one piece, each branch a state of the same loop; split, the states' order would be hard to follow.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Logger

from taskqueue.core.clock import Clock, SystemClock
from taskqueue.core.errors import ConfigError, TaskQueueError, TaskTooLong
from taskqueue.core.handshake import READ_REUSE_MIN_CLAIMS_PER_SECOND, WakeRecord, poll_seconds
from taskqueue.core.model import Task
from taskqueue.core.run_time import InvocationTime, too_long_message
from taskqueue.core.states import TaskStatus
from taskqueue.core.wake_schedule import WAIT_HORIZON_SECONDS, worth_waiting
from taskqueue.store import Candidate, FairTurn, TaskStore, Token, dynamo
from taskqueue.wakeups.lingering import Lingering
from taskqueue.wakeups.watch import ARRIVALS_POLL_SECONDS, RECORD_POLL_SECONDS, Watch
from taskqueue.work.claim_control import ClaimControl
from taskqueue.work.delayed_view import DelayedView
from taskqueue.work.fair_share import FairShare
from taskqueue.work.held_slots import HeldSlots
from taskqueue.work.lease import Lease
from taskqueue.work.lease_marks import MarkChoice
from taskqueue.work.outcomes import RECORD_BACKOFF_SECONDS, Outcomes
from taskqueue.work.runner import TaskRunner

logger = Logger(child=True)

# While tasks run, or while a retry is not yet due, look again this often for new arrivals.
IDLE_POLL_SECONDS = 1.0
# A full run (every slot taken) peeks at the index this often for writes that skipped their touch (to call for help).
FULL_POLL_SECONDS = 1.5
# After a round whose every claim was lost (another worker won, or a stale index entry), pause this long
# (jittered) before reading the index again, instead of spinning on the same entries.
LOST_ROUND_PAUSE_SECONDS = 0.2
# A global secondary index shows writes late (typically well under a second): right after a claim, the index
# still lists the task as waiting. A claim of such a stale entry is a conditional write that fails and still
# costs a write. So the entry of a task this run has just claimed, or lost a claim on, is skipped for this long
# (a task it released for a retry is not: that entry is real).
STALE_ENTRY_SECONDS = 2.0
# A look's candidates that its round did not claim (the run was full) serve the run's next claims for this long instead
# of a new look: tasks started together end together, and each freed slot took a look of its own, one after another
# (the third slot of a burst waited for two looks and two claims). Not in a queue with groups: a group that activates
# after the look must get the next free slot (fair share's promise to a quiet group), which would go to the busy one.
LEFTOVER_SECONDS = 0.25
# A worker whose runner is full while claimable work waits wakes another worker at most this often (CLAIM_LANES > 1).
HELP_SECONDS = 2.0
# A watcher that finds every running-limit slot held reads the slots again after this long, for LIMIT_FLAT_SECONDS, then
# doubling up to IDLE_POLL_SECONDS: a run started by a hand-over finds its predecessor's slots held for their last
# tasks, which end within about a task's time (a second in the tenants scenario), each slot taken within 0.1 s of it.
LIMIT_POLL_SECONDS = 0.1
LIMIT_FLAT_SECONDS = 2.0
# A run that knows of work left hands over this long before its budget ends (at most half the budget), about a wake-up's
# delivery and a warm start: its successor starts as claiming stops instead of that long after. Meanwhile the run, no
# longer watching, claims on into the slots its tasks free; its successor takes them once it stops (``hand_over``).
# Only where several workers may run (CLAIM_LANES > 1): with reserved concurrency 1 Lambda would throttle the successor.
HAND_OVER_LEAD_SECONDS = 0.5


@dataclass
class WorkerReport:
    queue: str
    recovered: int = 0
    claimed: int = 0
    succeeded: int = 0
    failed: int = 0
    released: int = 0
    lost: int = 0
    skipped: int = 0  # index entries passed over: stale (this run claimed them, or lost a claim on them, just now), or too long for it
    errors: int = 0  # outcomes that could not be recorded (logged): the task is recovered after its lease
    # Refusals for a passing reason (throttling past the SDK's retries) met while recording an outcome or renewing
    # a lease, each logged and tried again: with ``errors`` and a failed run, every refusal is accounted for.
    retried: int = 0
    shed: int = 0  # PENDING tasks past their ttl that this run met and shed
    limited: int = 0  # rounds that found every slot of the queue's running limit held
    watched: bool = False  # this run watched its queue (the wake-up handshake); else it was a helper
    helpers_woken: int = 0  # other workers this run woke because its runner was full and claimable work waited
    lingered_ms: int = 0  # time spent waiting on an empty queue (or on a reached running limit) for new work
    too_long: int = 0  # claims refused for the task's run time (taskqueue.core.run_time): left for a fresh invocation
    leases_renewed: int = 0
    claim_ages_ms: list[int] = field(default_factory=list)
    stopped_by: str = "empty"
    work_remains: bool = False
    handed_over: bool = False  # the tail call went out as claiming stopped, before the run's last tasks ended


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
        call_for_help: Callable[[str], None] | None = None,
        stopped: Callable[[str, int | None, WakeRecord | None], None] | None = None,
        hand_over: Callable[[str], None] | None = None,
        marks: MarkChoice | None = None,
    ) -> None:
        """``call_for_help(queue)``: wake one more worker of the queue (a publish on WorkerWakeUpTopic); used when
        several workers may run (CLAIM_LANES > 1) and this one's runner is full with claimable work left over.
        ``stopped(queue, next_due_ms, record)``: told when a run ends without a tail call (its queue's next delayed
        entry and record), to schedule a wake-up at the delayed head (``taskqueue.wakeups.delayed_wakeup``); with it
        the run waits only for a delayed entry due within WAIT_HORIZON_SECONDS, without it within its budget.
        ``hand_over(queue)``: tail-call now (the handler's tail call, raising TaskQueueError if it could not be sent).
        Called HAND_OVER_LEAD_SECONDS before the budget ends when the run's last look saw claimable work it did not take
        (else at the budget, when work is seen then): the watch ends first, the run claims on until the budget, and the
        next invocation starts as claiming stops, taking the run's running-limit slots as they free."""
        self._stopped = stopped
        # How this execution environment's tasks ended lately: a lone watcher's claims leave the lease mark off while
        # they end quickly (work/lease_marks.py); shared by its invocations (``Services.marks``).
        self._marks = marks or MarkChoice()
        self._hand_over = hand_over
        self._horizon = WAIT_HORIZON_SECONDS if stopped is not None else float("inf")
        self._store = store
        self._runner = runner
        self._call_for_help = call_for_help
        self._helped_at: float | None = None
        self._helped_for: int | None = None  # the record's seq for which a full run last called for help
        self._peek_reported: set[str] = set()  # task ids the index peek reported this run (``_index_peek``)
        self._capacity = capacity
        self._owner = owner
        self._clock = clock or SystemClock()
        self._rng = rng or random.Random()
        self._settings = store.settings
        self._count_lock = threading.Lock()
        self._stale: dict[str, float] = {}  # task id -> monotonic time until which its index entry is taken as stale
        self._stale_lock = threading.Lock()

    def recover_leases(self, queue: str, report: WorkerReport) -> None:
        # No extra backoff: a task whose lease expired has already waited a whole lease.
        outcome = self._store.recover_expired_leases(queue, None, self._clock.now_ms())
        report.recovered += sum(outcome.values())
        # A lease that expired on the last attempt dead-letters the task: count it as failed too.
        report.failed += outcome[TaskStatus.FAILURE.value]
        if report.recovered:
            logger.warning("expired leases recovered", extra={"queue": queue, **outcome})

    def run(self, queue: str, claim_seconds: float, hold_seconds: float | None = None) -> WorkerReport:
        """Claim and run tasks of ``queue`` for ``claim_seconds``. ``hold_seconds`` is how long this invocation
        may hold a claimed task (its remaining time): a lease shorter than that is refused before any claim,
        since a task could be recovered and run twice while it still runs if every heartbeat failed."""
        lease_seconds = self._settings.lease_seconds
        if hold_seconds is not None and lease_seconds < hold_seconds:
            raise ConfigError(
                f"LEASE_SECONDS={lease_seconds} is shorter than this invocation can hold a task ({hold_seconds:.0f} s, "
                "its remaining time): set LeaseSeconds to at least the function's Timeout"
            )
        report = WorkerReport(queue=queue)
        self._time = InvocationTime(self._clock, hold_seconds, self._settings.worker_timeout_seconds)
        with self._stale_lock:
            self._stale.clear()
        try:
            self.recover_leases(queue, report)
        except TaskQueueError as exc:  # refused for now: the next run (or the safety net) recovers them
            if not self._refused_for_now(report, "recovering expired leases", exc):
                raise
        control = ClaimControl(
            self._store,
            queue,
            self._owner,
            self._clock,
            self._rng,
            lambda what, exc, then: self._refused_for_now(report, what, exc, then=then),
        )
        delayed = self._delayed = DelayedView(self._store, control, self._clock)
        slots_held = self._slots = HeldSlots(
            self._store, control, lambda: self._add(report, "errors"), self._clock, watching=lambda: watch.watching
        )
        fair = self._fair = FairShare(
            self._store, queue, self._owner, self._clock, self._rng, lambda: self._add(report, "errors"), control
        )
        self._outcomes = Outcomes(
            self._store, self._runner, self._owner, self._clock, self._rng,
            count=lambda name: self._add(report, name), released=self._released,
        )
        # Producers count on the watcher to see what they write; it lingers on an empty queue before it stops.
        self._peek_reported.clear()
        watch = Watch(
            self._store, queue, self._owner, self._clock,
            refused=lambda what, exc, then: self._refused_for_now(report, what, exc, then=then),
            on_record=control.see_record,
            index_peek=lambda: self._index_peek(queue),
            on_leave=lambda stopping: slots_held.leave_watch(free_spare=stopping),
        )
        report.watched = watch.begin()
        # Claim lanes only once another claimer is met: a helper meets the watcher at once; the watcher, alone as a
        # rule, joins at its first lost claim or before it wakes a helper (ClaimControl.join_now).
        control.join(claim_seconds, eager=False)
        if not report.watched:
            control.join_now(settle=True)
        started = self._clock.monotonic()
        deadline = started + claim_seconds

        def pace() -> float:  # the wait between looks for new work: sooner on a fast queue
            return poll_seconds(report.claimed, self._clock.monotonic() - started)

        lingering = Lingering(watch, self._clock, self._settings.worker_linger_seconds, pace)
        look_started_ms: int | None = None
        # The start of a look that saw the whole queue (fewer entries than it asked for) and claimed all of it: a look
        # right after it would find nothing new the record would not show first, so the watcher lingers on the
        # record instead (the lag rule still applies to its stop: ``Lingering.step``).
        drained_look: int | None = None
        # The last look (or a full run's index peek) saw claimable work this run did not take: a hand-over is due.
        more_seen = False
        missed = False  # the watch ended with writes this run may not have looked for: it must wake the queue again
        lead = min(HAND_OVER_LEAD_SECONDS, claim_seconds / 2) if self._settings.claim_lanes > 1 else 0.0
        limit_poll, limited_since = LIMIT_POLL_SECONDS, None
        slot_wait = False  # the last look found every running-limit slot held and nothing of this run's running
        leftovers: list[Candidate] = []  # the last look's candidates not claimed yet, and when that look began
        leftovers_at = 0.0
        saw_all = False  # that look saw the whole queue (fewer entries than it asked for, none stale, no group held back)
        # ``running``: tasks whose runner has not returned (each takes one of ``capacity``); ``recording``: every task
        # until its outcome is written. The pool has a thread more per slot, for outcomes written as the next task runs.
        running: dict[Future[None], Lease] = {}
        recording: dict[Future[None], Lease] = {}
        with ThreadPoolExecutor(max_workers=2 * self._capacity, thread_name_prefix=f"{queue}-runner") as pool:
            while True:
                running = self._collect(running, report)
                recording = self._collect(recording, report)
                self._heartbeat(running.values(), report)
                slots_held.renew()  # the slots' and the watch's short leases: renewed on their cadence, full or not
                fair.renew()
                watch.keep()
                left = deadline - self._clock.monotonic()
                if left <= 0:
                    report.stopped_by = "budget"
                    break
                if left <= lead and more_seen and watch.watching and self._hand_over is not None:
                    # The watch ends before the tail call (a tail call finds no wake-up needed while a worker watches).
                    missed = watch.end(look_started_ms)
                    report.handed_over = self._hand_over_now(queue, report)
                free = self._capacity - len(running)
                if free == 0:
                    # Full: the watch is still renewed on its cadence (``watch.keep`` above: it never lapses while
                    # the run lives), and a write a renewal shows either calls for help (when another worker may
                    # run) or is looked for once a slot frees (``watch.arrivals`` reports it).
                    # A renewal's record tells of producers that touched; the index (every FULL_POLL_SECONDS) of
                    # those that skipped their touch (issue 29).
                    in_index = watch.index_arrivals(FULL_POLL_SECONDS)
                    if in_index:
                        drained_look = None  # look once a slot frees
                        more_seen = True
                    if (watch.unseen_write() and self._helped_for != watch.newest_seq) or in_index:
                        self._helped_for = watch.newest_seq
                        self._help(queue, control, report)
                    wait(running, timeout=min(left, self._heartbeat_seconds(), ARRIVALS_POLL_SECONDS),
                         return_when=FIRST_COMPLETED)
                    continue
                if control.paused_now():
                    report.stopped_by = "paused"
                    break
                if drained_look is not None and watch.watching:
                    if running or recording:
                        # The look saw the whole queue: while its tasks run, the record (not the index: a look per
                        # ending task would read an empty index each time) tells of new writes, read every ``pace()``
                        # (ARRIVALS_POLL_SECONDS, sooner on a fast queue) whether or not tasks end meanwhile (with many
                        # slots one ends almost every second: a read only after a quiet interval left new work waiting).
                        done, _ = wait([*running, *recording], timeout=min(left, pace()), return_when=FIRST_COMPLETED)
                        running = self._collect(running, report)
                        due_now = delayed.due_in_seconds() == 0  # a retry (this run's, say) fell due: look
                        # Producers that found this watcher awake skipped their touch: the index tells of them
                        # (every ``pace()``), the record of the others (every RECORD_POLL_SECONDS).
                        if (due_now or watch.arrivals(RECORD_POLL_SECONDS)
                                or watch.index_arrivals(pace() if done else 0.0)):
                            drained_look = None
                        continue
                    look_from, drained_look = drained_look, None
                    due_in = delayed.due_in_seconds()
                    if not worth_waiting(due_in, left, self._horizon):
                        if lingering.step(look_from, left):
                            report.stopped_by = "empty"
                            break
                        continue
                if slot_wait and not running and not recording:
                    # Held back by the running limit with nothing running: read the slots alone until one frees (a look
                    # each poll read every group's first pages ten times a second beside a hand-over's last tasks).
                    try:
                        got = slots_held.for_claims(1)
                    except TaskQueueError as exc:
                        if not self._paused_if_refused(report, "taking running-limit slots", exc, left):
                            raise
                        continue
                    if got is not None and not got:
                        report.limited += 1
                        limit_poll, limited_since = self._slot_pause(left, limit_poll, limited_since, report)
                        continue
                    slots_held.keep(got or [])  # spare: the claim below takes it first
                slot_wait = False
                stale = self._stale_ids()
                skip = stale | self._time.found_too_long
                fresh = self._clock.monotonic() - leftovers_at < LEFTOVER_SECONDS
                candidates = [c for c in leftovers if c.task_id not in skip] if fresh else []
                leftovers, met_stale, looked = [], 0, not candidates
                try:
                    if looked:  # else served from the last look, whose ``look_started_ms`` stands for the stop rule
                        look_started_ms = self._clock.now_ms()
                        leftovers_at = self._clock.monotonic()
                        # Stale entries and tasks too long for this run are passed over by the read itself, so the look
                        # reads what it can claim and no more (one request when the index holds it).
                        wanted = max(self._settings.page_size, control.window(self._capacity))
                        if fair.groups:  # a fair look reads one query per group: ask for what the free slots can take
                            wanted = min(wanted, 2 * free + 1)
                        candidates, met_stale = delayed.look(wanted, look_started_ms, skip=skip, fair=fair.turn())
                        fair.prepare(candidates)
                        due_in = None if candidates or running or recording else _earliest(delayed.due_in_seconds(), fair.held_back_for())
                except TaskQueueError as exc:  # throttled past the SDK's retries: back off, look again
                    if not self._paused_if_refused(report, "reading the queue", exc, left):
                        raise
                    continue
                if not candidates and not met_stale:  # nothing claimable: wait for work (a stale entry: look again)
                    # An empty look while tasks run is not taken as a drained queue: with other claimers and a lagging
                    # index it is often empty for a moment only (8 workers over 1,000 tasks took twice as long when
                    # the watcher waited on the record here); it looks again once a task ends, at least every second.
                    if running or recording:  # an outcome still being written may release a retry
                        wait([*running, *recording], timeout=min(left, IDLE_POLL_SECONDS), return_when=FIRST_COMPLETED)
                        continue
                    if not worth_waiting(due_in, left, self._horizon):
                        # Empty: a watcher lingers, then stops only as the handshake allows (a helper stops now).
                        if lingering.step(look_started_ms, left):
                            report.stopped_by = "empty"
                            break
                        continue
                    # A retry (or delayed task) falls due inside the budget: wait for it rather than strand it,
                    # looking again at least every poll interval for new arrivals.
                    self._clock.sleep(max(0.01, min(due_in, IDLE_POLL_SECONDS)))
                    continue
                report.skipped += met_stale
                if candidates:
                    watch.resumed()  # work after a stop's first step: producers may skip their touch again
                order = control.plan(candidates, self._capacity)
                if fair.groups:  # a free slot to the group that had this run's runner least lately
                    order = fair.order(order)
                try:
                    slots = slots_held.for_claims(min(free, len(order))) if order else None
                except TaskQueueError as exc:  # not the limit: a refused slot read or write; pause, look again
                    if not self._paused_if_refused(report, "taking running-limit slots", exc, left):
                        raise
                    continue
                if slots is not None:
                    if not slots:  # the queue-wide running limit is reached: other workers' tasks hold every slot
                        report.limited += 1
                        if running or recording:
                            wait([*running, *recording], timeout=min(left, IDLE_POLL_SECONDS), return_when=FIRST_COMPLETED)
                            continue
                        if watch.watching:
                            # The watcher waits for a slot instead of leaving its queue idle until the safety net:
                            # slots free as other workers' tasks end (read strongly consistently).
                            limit_poll, limited_since = self._slot_pause(left, limit_poll, limited_since, report)
                            slot_wait = True
                            continue
                        report.stopped_by = "limit"  # a helper: the watcher (or the holders' tail calls) take over
                        break
                    free = min(free, len(slots))
                    limit_poll, limited_since = LIMIT_POLL_SECONDS, None
                claimed_now = 0
                untried = list(order)
                while untried and free > 0:
                    candidate = untried.pop(0)
                    admitted: Token | bool | None = None
                    try:
                        admitted = fair.admit(candidate)  # its group's limits: a slot, a place in its rate window
                        if admitted is False:
                            report.limited += 1
                            continue
                        # A lone watcher's claim leaves the lease off the task's index entry (one index write
                        # fewer), marked only if the task still runs a moment later (store/unmarked_leases.py).
                        lone = watch.watching and control.alone and not fair.groups and self._marks.unmarked_pays
                        task = self._store.claim(candidate, self._owner, run_within=self._time.run_within(), mark=not lone)
                    except TaskTooLong as exc:  # left PENDING for a fresh invocation, which has time for it
                        fair.lost(admitted)
                        self._too_long(candidate, exc, report)
                        continue
                    except TaskQueueError as exc:  # not applied: the task is still there; pause, look again
                        fair.lost(admitted)
                        if not self._refused_for_now(report, "claiming a task", exc):
                            raise
                        untried = []
                        break
                    self._mark_stale(candidate.task_id)
                    if task is None:
                        fair.lost(admitted)
                        report.lost += 1
                        control.lost_a_claim()
                        continue
                    delayed.claimed(candidate)
                    fair.claimed(candidate)
                    free -= 1
                    claimed_now += 1
                    report.claimed += 1
                    report.claim_ages_ms.append(task.updated_ms - task.created_ms)
                    lease = Lease(
                        task, self._store, self._owner, self._clock, slots.pop() if slots else None,
                        admitted if isinstance(admitted, Token) else None,
                    )
                    self._start(lease, report, pool, running, recording)
                    if fair.groups and untried:  # the claim weighs on its group now: the next free slot may go elsewhere
                        untried = fair.order(untried)
                slots_held.keep(slots or [])
                if claimed_now and not watch.read_reuse_wanted and report.claimed >= READ_REUSE_MIN_CLAIMS_PER_SECOND and (
                        report.claimed >= READ_REUSE_MIN_CLAIMS_PER_SECOND * (self._clock.monotonic() - started)):
                    watch.allow_read_reuse()  # a fast queue: producers may reuse their reads of its record
                left_over = free == 0 and len(order) > claimed_now  # claimable work this run has no slot for
                if left_over:
                    self._help(queue, control, report)
                held_back = fair.held_back_for() is not None  # groups at a limit: their work is not seen, wait for it
                if free == 0 and claimed_now and untried and not fair.groups:
                    leftovers = untried  # for the next claims, while LEFTOVER_SECONDS of this look last
                if not looked:
                    more_seen = more_seen or bool(untried)
                    if saw_all and claimed_now == len(candidates):  # the last of what that look saw: as a drained look
                        drained_look = look_started_ms
                    continue
                more_seen = len(candidates) >= wanted or left_over
                saw_all = len(candidates) < wanted and not met_stale and not held_back
                if saw_all and claimed_now == len(candidates):
                    drained_look = look_started_ms
                if claimed_now == 0:
                    # Every claim lost or refused, or only stale entries left (another worker, or index entries
                    # not yet updated): do not spin on them.
                    self._clock.sleep(min(left, self._rng.uniform(0.5, 1.0) * LOST_ROUND_PAUSE_SECONDS))
            control.leave()
            slots_held.stop_claiming()
            # Claiming is over: stop watching, so producers wake a new worker from now on; writes this run may
            # have missed make it tail-call.
            missed = (watch.end(look_started_ms) if report.stopped_by != "empty" else False) or missed
            if report.stopped_by == "budget" and (more_seen or missed) and not report.handed_over:
                report.handed_over = self._hand_over_now(queue, report)
            report.lingered_ms += int(lingering.lingered_seconds * 1000)
            report.watched = watch.began  # a watch refused at first may have begun later
            self._drain(running, recording, report)
        # Tail-call for claimable work, or for a retry the next invocation's budget will reach; not for a paused
        # queue, nor when the running limit stopped this run (the workers holding the slots tail-call).
        if report.handed_over:
            report.work_remains = True
        elif report.stopped_by not in ("paused", "limit"):
            if not missed:
                watch.await_skipped_writes()  # the look below must show what producers wrote without a touch
            report.work_remains = missed or self._work_left(queue, report)
        report.shed += self._store.drain_shed().get(queue, 0)
        recovered = self._store.drain_recovered(queue)  # dead workers' tasks its looks met (store/claims.py)
        report.recovered += sum(recovered.values())
        report.failed += recovered.get(TaskStatus.FAILURE.value, 0)
        if self._stopped is not None and report.stopped_by != "paused" and not report.work_remains:
            self._stopped(queue, delayed.next_due_ms(), control.record)  # a wake-up at the delayed head
        return report

    def _slot_pause(
        self, left: float, poll: float, since: float | None, report: WorkerReport
    ) -> tuple[float, float | None]:
        """Wait for a running-limit slot: ``poll`` seconds (LIMIT_POLL_SECONDS for LIMIT_FLAT_SECONDS, then doubling up
        to IDLE_POLL_SECONDS); the next poll and when the wait began."""
        now = self._clock.monotonic()
        since = now if since is None else since
        pause = min(left, poll)
        if now - since >= LIMIT_FLAT_SECONDS:
            poll = min(IDLE_POLL_SECONDS, 2 * poll)
        self._clock.sleep(pause)
        report.lingered_ms += int(pause * 1000)
        return poll, since

    def _hand_over_now(self, queue: str, report: WorkerReport) -> bool:
        """Tail-call before the run's last tasks end; ``False`` (the run tail-calls at its end as before) when there is
        no hand-over or it could not be sent."""
        if self._hand_over is None:
            return False
        try:
            self._hand_over(queue)
        except TaskQueueError as exc:
            self._add(report, "errors")
            logger.warning("hand-over not sent; the run tail-calls once its tasks end", extra={"queue": queue, "error": str(exc)})
            return False
        return True

    def _help(self, queue: str, control: ClaimControl, report: WorkerReport) -> None:
        """More claimable work than this run can take: producers wake a queue only when nobody watches it, so
        with several workers allowed the busy one wakes another (at most every HELP_SECONDS, while a claim
        lane is free, and not when every slot of the queue's running limit is held, by this run or by others, as its
        last request for slots found: a helper could run nothing). A refused publish is logged; the next round asks
        again."""
        now = self._clock.monotonic()
        if self._call_for_help is None or report.handed_over:  # handed over: the successor is on its way
            return
        limit = self._store.running_limit(queue)
        if limit is not None and (self._slots.held >= limit or self._slots.short):
            return
        if not control.room_for_another():
            return
        if self._helped_at is not None and now - self._helped_at < HELP_SECONDS:
            return
        self._helped_at = now
        try:
            self._call_for_help(queue)
        except TaskQueueError as exc:
            logger.warning("could not wake another worker", extra={"queue": queue, "error": str(exc)})
            return
        report.helpers_woken += 1

    def _too_long(self, candidate: Candidate, exc: TaskTooLong, report: WorkerReport) -> None:
        self._add(report, "too_long")
        if not self._time.too_long(candidate.task_id, exc.run_seconds):
            logger.info("task left for a fresh invocation: too long for the time left", extra={"task_id": candidate.task_id})
            return
        # No invocation of this worker could run it (its Timeout was lowered after the task was made): dead-letter
        # it with what to do, rather than leave it to be tail-called for and refused until its ttl.
        error = too_long_message(exc.run_seconds, self._time.timeout)
        try:
            task = self._store.claim(candidate, self._owner)
            if task is not None and self._store.fail(task, self._owner, error):
                self._add(report, "failed")
                logger.error("task failed (dead-lettered)", extra={"task_id": task.task_id, "error": error})
        except TaskQueueError as refused:  # refused for now: the next run meets it again
            if not self._refused_for_now(report, "dead-lettering a task too long for this worker", refused):
                raise

    def _work_left(self, queue: str, report: WorkerReport) -> bool:
        try:
            query_delayed = self._delayed.worth_reading(self._clock.now_ms())
            # Held-back groups count as work left (a tail call waits for their window): no ``held_back`` here.
            if self._store.has_claimable(queue, delayed=query_delayed, fair=FairTurn(groups=self._fair.groups)):
                return True
            if query_delayed:
                self._delayed.refresh()
            due_in = self._delayed.due_in_seconds()
            return due_in is not None and due_in < min(self._settings.time_budget_seconds, self._horizon)
        except TaskQueueError as exc:  # not known: tail-call rather than strand work (an empty run costs little)
            if not self._refused_for_now(report, "checking for work left", exc, then="tail-calling in case"):
                raise
            return True

    def _refused_for_now(self, report: WorkerReport, what: str, exc: Exception, then: str = "trying again") -> bool:
        """A read or claim DynamoDB refused for a passing reason (throttling past the SDK's retries) is logged,
        counted (``retried``) and tried again after a pause, instead of failing the invocation: a failed
        invocation tail-calls nobody, so its queue would wait for Lambda's retry or the safety net. Any other
        error is not handled here (False)."""
        if not dynamo.is_retryable(exc):
            return False
        self._add(report, "retried")
        logger.warning(f"{what} was refused for now; {then}", extra={"queue": report.queue, "error": str(exc)})
        return True

    def _paused_if_refused(self, report: WorkerReport, what: str, exc: Exception, left: float) -> bool:
        """The claim loop's refused read or write: ``_refused_for_now``, then a pause before it tries again (jittered,
        and short enough that the heartbeat of the tasks in flight keeps its pace); ``False``: not a passing refusal."""
        if not self._refused_for_now(report, what, exc):
            return False
        self._clock.sleep(min(left, self._heartbeat_seconds(), self._rng.uniform(0.5, 1.0) * RECORD_BACKOFF_SECONDS))
        return True

    def _index_peek(self, queue: str) -> bool:
        """Does the index show a claimable task this run has neither claimed, passed over, nor reported already? One
        eventually consistent query of the head (per shard), no shedding. A task reported once is not reported
        again: a look that could not take it (another worker's, too long) must not keep the watcher awake."""
        skip = self._stale_ids() | self._time.found_too_long | self._peek_reported
        fair = FairTurn(groups=self._fair.groups)  # every group's head too, once the queue has groups
        found = {c.task_id for c in self._store.candidates(queue, 1, shed=False, delayed=False, skip=skip, fair=fair)}
        self._peek_reported |= found
        return bool(found)

    def _stale_ids(self) -> set[str]:
        """Ids whose index entries are taken as stale now (forgetting those whose time passed)."""
        now = self._clock.monotonic()
        with self._stale_lock:
            self._stale = {task_id: until for task_id, until in self._stale.items() if until > now}
            return set(self._stale)

    def _mark_stale(self, task_id: str) -> None:
        with self._stale_lock:
            self._stale[task_id] = self._clock.monotonic() + STALE_ENTRY_SECONDS

    def _heartbeat_seconds(self) -> float:
        return max(0.05, self._settings.lease_seconds * (1 - 2 / 3) / 2)

    def _beat_seconds(self) -> float:
        """The longest wait on running tasks: short enough for the slots' renewal (at half their 5 s lease) and the
        lease mark (2 s after a claim), which the loop's rounds make."""
        return min(self._heartbeat_seconds(), ARRIVALS_POLL_SECONDS)

    def _start(self, lease: Lease, report: WorkerReport, pool: ThreadPoolExecutor,
               running: dict[Future[None], Lease], recording: dict[Future[None], Lease]) -> None:
        """Run a claimed task on a runner thread: in ``running`` until its runner returns, in ``recording`` until its
        outcome is written (``_run_one``)."""
        ran: Future[None] = Future()
        recording[pool.submit(self._run_one, lease, report, ran)] = lease
        running[ran] = lease

    def _drain(self, running: dict[Future[None], Lease], recording: dict[Future[None], Lease], report: WorkerReport) -> None:
        """Claiming is over: the tasks in flight finish inside their leases, which the heartbeat keeps, their running-limit
        and group slots renewed on their cadence meanwhile."""
        while running or recording:
            wait(recording, timeout=self._beat_seconds(), return_when=FIRST_COMPLETED)
            running = self._collect(running, report)
            recording = self._collect(recording, report)
            self._heartbeat(running.values(), report)
            self._slots.renew()
            self._fair.renew()

    def _heartbeat(self, leases: Any, report: WorkerReport) -> None:
        try:  # unmarked leases of tasks still running a moment after their claim: marked on their index entries
            self._store.mark_leases(self._owner)
        except TaskQueueError as exc:  # the next beat tries again; meanwhile only this store knows they run
            if not self._refused_for_now(report, "marking leases", exc):
                raise
        for lease in leases:
            if not lease.due():
                continue
            try:
                renewed = lease.renew()
            except TaskQueueError as exc:  # throttled past the SDK's retries: the next beat tries again
                self._add(report, "retried")
                logger.warning("lease renewal failed; trying again", extra={"task_id": lease.task.task_id, "error": str(exc)})
                continue
            if renewed:
                self._add(report, "leases_renewed")
            else:
                logger.warning(
                    "lease lost while the task runs: it may be recovered and run again",
                    extra={"task_id": lease.task.task_id, "queue": lease.task.queue},
                )

    def _collect(self, running: dict[Future[None], Lease], report: WorkerReport) -> dict[Future[None], Lease]:
        """Keep the futures still running; read every finished one, so no runner thread's error is lost."""
        still: dict[Future[None], Lease] = {}
        for future, lease in running.items():
            if not future.done():
                still[future] = lease
                continue
            error = future.exception()
            if error is not None:  # _run_one reports its own errors: this is a defect in it, still counted
                self._add(report, "errors")
                logger.error(
                    "runner thread failed", extra={"task_id": lease.task.task_id, "error": repr(error)}, exc_info=error
                )
        return still

    def _add(self, report: WorkerReport, name: str) -> None:
        with self._count_lock:
            setattr(report, name, getattr(report, name) + 1)

    def _run_one(self, lease: Lease, report: WorkerReport, ran: Future[None]) -> None:
        """Run one task, then record its outcome. As the runner returns, its slots (the running limit's, its group's)
        go to the next task and ``ran`` completes, which frees the run's capacity: the next claim does not wait for
        the outcome's write (the runner does no work meanwhile)."""

        def freed() -> None:
            if ran.done():
                return
            claimed_ms = lease.task.claimed_ms
            self._marks.ran((self._clock.now_ms() - claimed_ms) / 1000 if claimed_ms is not None else 0.0)
            if lease.slot is not None:
                self._slots.done(lease.slot)
            if lease.group_slot is not None:
                self._fair.done(lease.group_slot)
            self._fair.ended(lease.task.task_id)
            ran.set_result(None)

        try:
            self._outcomes.attempt(lease, ran=freed)
        finally:
            freed()

    def _released(self, task: Task, not_before_ms: int) -> None:
        self._delayed.released(task.task_id, not_before_ms, (task.shard, task.group))
        with self._stale_lock:  # its new index entry is real: claimable again once due
            self._stale.pop(task.task_id, None)


def _earliest(*seconds: float | None) -> float | None:
    return min((s for s in seconds if s is not None), default=None)
