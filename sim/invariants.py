"""What every schedule must keep, checked as it runs: at each run the runner starts (a task run twice while a lease
on it is valid, the running limit and per-group limits counted by the runner, a paused queue or group claiming) and
at each tick of CHECK_S (every change the queue table's stream recorded since: a terminal state lost; and every
waiting task's claimable time against its bound), then once at the end (no endless invocations once nothing is
claimable; every task finished).

A task *waits* while it is PENDING and due (its ``notBefore`` passed), or TAKEN with its lease passed and no run of it
in progress (a crashed worker's: the safety net recovers it). Its wait counts only while it could be claimed: not
while its queue or group is paused, nor while the runner counts the running limit (or its group's limit) reached;
it starts again from zero each time it could not.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from sim.actors import Operator, Pause, Run
from sim.world import SLOW_S, World

CHECK_S = 0.25
TERMINAL = frozenset({"SUCCESS", "FAILURE", "CANCELLED", "SHED"})
PAUSE_GRACE_S = 1.0 + 1.0  # the worker reads the pause at most every PAUSE_CHECK_SECONDS (1 s); a claim in flight
NO_FAULT_BOUND_S = 1.0
# Invocations a queue may still start once nothing is claimable: a tail call in flight, delivered twice, and the
# wake-up a worker's last release may owe.
QUIET_INVOCATIONS = 4


@dataclass
class Violation:
    invariant: str  # "run-twice", "claim-bound", "terminal-lost", "endless", "limit", "paused", "stuck"
    at: float
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant} at {self.at:.3f} s: {self.detail}"


@dataclass
class Tracked:
    status: str | None = None
    group: str | None = None
    due_s: float | None = None  # kernel seconds it is (or its lease is) due; None: not waiting
    taken: bool = False
    waited: float = 0.0
    flagged: bool = False


@dataclass
class Invariants:
    world: World
    operator: Operator
    violations: list[Violation] = field(default_factory=list)
    tasks: dict[str, Tracked] = field(default_factory=dict)
    position: int = 0
    last_change: float = 0.0
    starts: list[float] = field(default_factory=list)  # ProcessTasks invocations' start times
    _sums: list[float] = field(default_factory=list)  # running sums of the world's fault costs

    def bound_s(self, due_s: float) -> float:
        """How long a task due at ``due_s`` may wait claimable: NO_FAULT_BOUND_S, plus the skew both ways, plus the cost
        of every fault since a lease (or a Timeout) before it was due (``World.cost``: a crash, its Timeout and the
        safety net's next round; a throttled request, a round of the safety net; a dropped batch, the same; a slow
        request, its latency and a round of the safety net; a late delivery, an index lag: their own delay)."""
        costs = self.world.stats.costs  # in time order: the sum from the first at or after ``since``
        while len(self._sums) < len(costs):
            self._sums.append((self._sums[-1] if self._sums else 0.0) + costs[len(self._sums)][1])
        first = bisect.bisect_left(costs, (due_s - self.window_s, -1.0))
        total = (self._sums[-1] if self._sums else 0.0) - (self._sums[first - 1] if first else 0.0)
        return NO_FAULT_BOUND_S + 2 * self.world.plan.skew_s + total

    @property
    def window_s(self) -> float:
        return max(self.world.settings.lease_seconds, self.world.settings.worker_timeout_seconds or 900) + 1

    def start(self) -> None:
        self.world.on_invoke.append(lambda f, _i: self.starts.append(self.world.kernel.now) if f == "ProcessTasks" else None)
        self.world.kernel.call_later(CHECK_S, self._tick)

    def fail(self, invariant: str, detail: str) -> None:
        self.violations.append(Violation(invariant, self.world.kernel.now, detail))
        self.world.log(f"VIOLATION {invariant}: {detail}")

    # ---- at each run -------------------------------------------------------------------------------------------

    def run_started(self, run: Run, running: list[Run]) -> None:
        plan, now = self.world.plan, self.world.kernel.now
        same = [r for r in running if r.task_id == run.task_id]
        if same:
            self.fail("run-twice", f"task {run.task_id} started by {run.invocation} while {same[0].invocation} "
                      f"runs it (since {same[0].start:.3f} s, lease of {same[0].lease_owner})")
        if len(running) + 1 > plan.running_limit:
            self.fail("limit", f"{len(running) + 1} runs at once, running limit {plan.running_limit}")
        limit = plan.group_concurrency
        in_group = sum(1 for r in running if r.group == run.group) + 1
        if limit is not None and run.group is not None and in_group > limit:
            self.fail("limit", f"{in_group} runs of group {run.group} at once, its limit {limit}")
        # The limits reached, however briefly (between two ticks): a wait starts again from here.
        queue_full = len(running) + 1 >= plan.running_limit
        group_full = limit is not None and run.group is not None and in_group >= limit
        if queue_full or group_full:
            for tracked in self.tasks.values():
                if queue_full or tracked.group == run.group:
                    tracked.waited = 0.0
        grace = PAUSE_GRACE_S + (2 * SLOW_S if plan.slow_rate else 0.0)
        for pause in self.operator.pauses:
            if (pause.group is None or pause.group == run.group) and pause.start + grace < now < pause.end:
                self.fail("paused", f"task {run.task_id} (group {run.group}) started {now - pause.start:.1f} s into a "
                          f"pause of {'the queue' if pause.group is None else 'group ' + pause.group}")

    # ---- at each tick --------------------------------------------------------------------------------------------

    def _tick(self) -> None:
        self._read_stream()
        self._accrue()
        self.world.kernel.call_later(CHECK_S, self._tick)

    def _read_stream(self) -> None:
        log = self.world.db.streams[self.world.settings.queue_table_name]
        records = log.records[self.position:]
        self.position += len(records)
        for record in records:
            body = record["dynamodb"]
            task_id = body["Keys"]["taskId"]["S"]
            image = body.get("NewImage")
            old = body.get("OldImage")
            if "taskStatus" not in (image or old or {}):
                continue  # a control item (the queue's record, slots, ring entries)
            self.last_change = self.world.kernel.now
            tracked = self.tasks.setdefault(task_id, Tracked())
            if image is None:
                if tracked.status not in TERMINAL and tracked.status is not None:
                    self.fail("terminal-lost", f"task {task_id} deleted while {tracked.status}")
                tracked.due_s = None
                continue
            status = image["taskStatus"]["S"]
            if tracked.status in TERMINAL and status != tracked.status:
                self.fail("terminal-lost", f"task {task_id} went from {tracked.status} to {status}")
            if status != tracked.status or status == "TAKEN":
                tracked.waited, tracked.flagged = 0.0, False
            tracked.status, tracked.group = status, _text(image, "taskGroup")
            tracked.taken = status == "TAKEN"
            if status == "PENDING":
                tracked.due_s = self._kernel_s(_number(image, "notBefore"))
            elif status == "TAKEN":
                tracked.due_s = self._kernel_s(_number(image, "leaseExpires"))
            else:
                tracked.due_s = None

    def _kernel_s(self, epoch_ms: int | None) -> float:
        now = self.world.kernel.now
        return now if epoch_ms is None else max(now, (epoch_ms - self.world.kernel.start_ms) / 1000)

    def _accrue(self) -> None:
        """A wait counts while the task could be claimed, from the moment it last could not (each stretch on its own:
        a task of a group at its limit gets each freed slot within the bound, however many it waits for)."""
        now, plan = self.world.kernel.now, self.world.plan
        running = self.world.runner.running
        blocked = len(running) >= plan.running_limit or self._paused(None, now)
        live = {r.task_id for r in running}
        for task_id, tracked in self.tasks.items():
            if tracked.due_s is None or tracked.due_s > now or tracked.flagged:
                continue
            if tracked.taken and task_id in live:
                continue  # its lease was renewed (the stream shows the last write only when it changes)
            if blocked or (tracked.group is not None and (self._paused(tracked.group, now)
                                                          or self._group_full(tracked.group))):
                tracked.waited = 0.0
                continue
            tracked.waited += CHECK_S
            if tracked.waited > NO_FAULT_BOUND_S and tracked.waited > (bound := self.bound_s(tracked.due_s)):
                tracked.flagged = True
                self.fail("claim-bound", f"task {task_id} ({tracked.status}, group {tracked.group}) waited "
                          f"{tracked.waited:.2f} s claimable, due at {tracked.due_s:.3f} s (bound {bound:.1f} s)")

    def _paused(self, group: str | None, now: float) -> bool:
        return any(p.group == group and p.start - PAUSE_GRACE_S <= now < p.end + 1.0 for p in self.operator.pauses) \
            or (group is not None and self._paused(None, now))

    def _group_full(self, group: str) -> bool:
        limit = self.world.plan.group_concurrency
        return limit is not None and sum(1 for r in self.world.runner.running if r.group == group) >= limit

    # ---- at the end ----------------------------------------------------------------------------------------------

    def finish(self) -> None:
        self._read_stream()
        unfinished = sorted(t for t, s in self.tasks.items() if s.status not in TERMINAL)
        if unfinished:
            self.fail("stuck", f"{len(unfinished)} task(s) not finished at the end: {', '.join(unfinished[:3])}")
            return
        after = [s for s in self.starts if s > self.last_change + 1.0]
        if len(after) > QUIET_INVOCATIONS:
            self.fail("endless", f"{len(after)} ProcessTasks invocations after the last task finished at "
                      f"{self.last_change:.3f} s (at most {QUIET_INVOCATIONS})")


def _number(image: dict[str, Any], name: str) -> int | None:
    value = image.get(name)
    return int(value["N"]) if value and "N" in value else None


def _text(image: dict[str, Any], name: str) -> str | None:
    value = image.get(name)
    return value["S"] if value and "S" in value else None


__all__ = ["Invariants", "Pause", "Violation"]
