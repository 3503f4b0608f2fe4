"""The actors of a schedule: producers (CreateTasks requests: ready, delayed and grouped tasks), an operator who pauses
and resumes the queue or a group (``taskq pause``, group settings: the store's calls), and the runner, the
``TaskRunner`` the workers hand each claimed task to, which counts its own concurrent runs per queue and per group and
records every run (task, start, end, the lease it ran under)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sim.world import FUNCTION_SKEW_S, World
from taskqueue.core.model import Task
from taskqueue.store import TaskStore

QUEUE = "work"
GROUPS = ("red", "blue", "green")
TTL_SECONDS = 3 * 3600  # longer than any schedule: no task is shed by its TTL (not exercised here)


@dataclass
class Run:
    task_id: str
    group: str | None
    invocation: str
    lease_owner: str | None
    start: float
    end: float | None = None
    outcome: str = "running"


class Runner:
    """Runs a task for the time its payload says (``ms``), failing those whose payload says ``fail`` with the plan's
    rate. ``started(run, running)`` is told of each run with the runs in progress (the invariants' hook)."""

    def __init__(self, world: World, started: Callable[[Run, list[Run]], None]) -> None:
        self.world = world
        self.started = started
        self.runs: list[Run] = []
        self.running: list[Run] = []

    def __call__(self, task: Task) -> dict[str, Any]:
        kernel = self.world.kernel
        current = kernel.current
        assert current is not None
        run = Run(task.task_id, task.group, current.invocation.name, task.lease_owner, kernel.now)
        self.runs.append(run)
        self.started(run, self.running)
        self.running.append(run)
        self.world.log(f"run {task.task_id[:8]} in {run.invocation} (attempt {task.attempts}, group {task.group})")
        try:
            kernel.sleep(float(task.payload.get("ms", 100)) / 1000)
            if task.payload.get("doom"):  # a workflow task that fails every attempt: it ends FAILURE for good
                run.outcome = "failed"
                raise RuntimeError("the runner fails this task at every attempt (its payload's doom)")
            if task.payload.get("fail") and self.world.rng.random() < self.world.plan.fail_rate:
                run.outcome = "failed"
                raise RuntimeError("the runner failed this attempt (the plan's fail_rate)")
            run.outcome = "succeeded"
            return {"ran": task.task_id}
        except BaseException:
            if run.outcome == "running":
                run.outcome = "killed"
            raise
        finally:
            run.end = kernel.now
            self.running.remove(run)
            self.world.log(f"ran {task.task_id[:8]} in {run.invocation}: {run.outcome}")


def _duration_ms(world: World) -> int:
    rng = world.rng
    return int(rng.uniform(5_000, 30_000)) if rng.random() < 0.05 else int(rng.uniform(20, 3_000))


def start_producers(world: World) -> None:
    """``plan.producers`` producers, each sending ``plan.requests`` CreateTasks requests at times spread over the
    plan's minutes: one to three tasks each, a third delayed (up to 90 s), grouped when the plan limits groups."""
    plan, rng = world.plan, world.rng
    for _ in range(plan.producers):
        for _ in range(plan.requests):
            request: dict[str, Any] = {"queue": QUEUE, "count": rng.randint(1, 3), "ttlSeconds": TTL_SECONDS,
                                       "payload": {"ms": _duration_ms(world), "fail": rng.random() < 0.3}}
            if rng.random() < 0.3:
                request["delaySeconds"] = rng.randint(1, 90)
            if plan.group_concurrency is not None or plan.pauses:
                request["group"] = rng.choice(GROUPS)
            world.kernel.call_at(rng.uniform(0, plan.minutes * 60), lambda r=request: world.create(r))


@dataclass
class Pause:
    group: str | None  # None: the whole queue
    start: float  # when the pause was written (its answer back)
    end: float  # when the resume was sent (or the group's pause ends)


class Operator:
    """Pauses the queue or a group ``plan.pauses`` times, for 5-120 s each, through the store (as ``taskq`` does);
    ``pauses`` records each as the invariants judge it."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.pauses: list[Pause] = []

    def start(self) -> None:
        world, rng = self.world, self.world.rng
        for _ in range(world.plan.pauses):
            group = rng.choice(GROUPS) if rng.random() < 0.5 else None
            at, length = rng.uniform(0, world.plan.minutes * 60), rng.uniform(5, 120)
            world.kernel.call_at(at, lambda g=group, n=length: self._pause(g, n))

    def _pause(self, group: str | None, seconds: float) -> None:
        world = self.world
        store = TaskStore(world.db, world.settings, world.kernel.clock)

        def act() -> None:
            if any(p.group == group and p.end > world.kernel.now for p in self.pauses):
                return  # already paused: one pause at a time each
            if group is None:
                store.pause(QUEUE)
                pause = Pause(None, world.kernel.now, float("inf"))
                self.pauses.append(pause)
                world.log("operator paused the queue")
                world.kernel.sleep(seconds)
                pause.end = world.kernel.now
                store.resume(QUEUE)
                world.log("operator resumed the queue")
            else:
                sent, until_ms = world.kernel.now, world.kernel.clock.now_ms() + int(seconds * 1000)
                store.set_group_settings(QUEUE, group, paused_until_ms=until_ms)
                # It ends by the workers' clocks, which may be ahead by FUNCTION_SKEW_S.
                self.pauses.append(Pause(group, world.kernel.now, sent + seconds - FUNCTION_SKEW_S - 0.01))
                world.log(f"operator paused group {group} for {seconds:.1f} s")

        world.kernel.invoke(act, "operator")
