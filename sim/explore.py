"""The explorer: seeded schedules of the queue's world (``sim.world``), each checked by ``sim.invariants``.

    python -m sim.explore --schedules 1000 --seed 1     # schedules seed 1 .. 1000: counts, violations, replay lines
    python -m sim.explore --schedules 100000 --jobs 2   # split over processes
    python -m sim.explore --replay 123                  # one schedule, its trace printed
    python -m sim.explore --workflows --schedules 200   # schedules that also create workflows (--replay N --workflows)

A seed decides everything: the plan (load, limits, which faults and how often: ``draw_plan``), every choice of the
kernel and of the fakes, the product's own randomness. A schedule's producers act for its plan's minutes; the world
then runs until every task is finished, and QUIET_S more (or until HORIZON_S), and the end checks are made.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from sim.actors import Operator, Runner, start_producers
from sim.invariants import TERMINAL, Invariants, Violation
from sim.kernel import Kernel, SimulationFailure
from sim.lanes import StreamMapping
from sim.wiring import wired
from sim.workflow_actors import WorkflowProducer
from sim.workflow_invariants import WorkflowInvariants
from sim.world import QUEUE_TABLE, Plan, Stats, World, handler_module
from taskqueue.core.record import PRODUCER_CLOCK_SKEW_SECONDS

HORIZON_S = 3600.0  # the world's last moment: far past any lease, retry and safety-net round of a plan
QUIET_S = 120.0  # once every task is finished, the world runs this much longer (endless invocations)
STEP_BUDGET = 400_000
HASH_SEED = "0"  # PYTHONHASHSEED of every run and replay (sim.determinism)


def draw_plan(seed: int, workflows: bool = False) -> Plan:
    """A schedule's plan: a third with no fault at all (the 1 s bound), the rest with a seeded mix of faults.
    ``workflows``: the same plan, plus 1-3 workflows drawn apart (a seed's plan without them is unchanged)."""
    import random

    plan = _draw_plain(seed)
    if workflows:
        plan.workflows = random.Random(f"workflows/{seed}").randint(1, 3)
    return plan


def _draw_plain(seed: int) -> Plan:
    import random

    rng = random.Random(f"plan/{seed}")
    plan = Plan(seed=seed, producers=rng.randint(1, 3), requests=rng.randint(1, 4), minutes=rng.uniform(0.5, 2.5),
                running_limit=rng.choice([2, 3]), group_concurrency=rng.choice([None, None, 1, 2]),
                lanes=rng.choice([1, 1, 2, 4]), pauses=rng.choice([0, 0, 1, 2]), fail_rate=rng.choice([0.0, 0.3]))
    if rng.random() < 1 / 3:
        return plan
    for name, rates in (("kill_rate", (0.002, 0.01, 0.03)), ("throttle_rate", (0.001, 0.005)),
                        ("slow_rate", (0.002, 0.01)), ("lag_rate", (0.1, 0.5)), ("skew_s", (1.0, PRODUCER_CLOCK_SKEW_SECONDS)),
                        ("late_rate", (0.05, 0.2)), ("twice_rate", (0.05, 0.2)), ("drop_rate", (0.02, 0.1))):
        if rng.random() < 0.4:
            setattr(plan, name, rng.choice(rates))
    return plan


@dataclass
class Outcome:
    plan: Plan
    violations: list[Violation]
    stats: Stats
    tasks: int = 0
    runs: int = 0
    steps: int = 0
    virtual_s: float = 0.0
    trace: list[str] = field(default_factory=list)
    workflows: dict[str, int] = field(default_factory=dict)  # what its workflows exercised (WorkflowInvariants.summary)


def run_schedule(plan: Plan, *, trace: bool = False, prepare: Callable[[World], None] | None = None) -> Outcome:
    """Run one schedule; ``prepare(world)`` may change the world before it starts (tests that break the product)."""
    lines: list[str] = []
    for directory in ("process_tasks", "trigger", "create_tasks"):
        handler_module(directory)  # imported before the kernel's entropy: an import's draws would shift the first run
    with Kernel(plan.seed, trace=False, step_budget=STEP_BUDGET) as kernel:
        world = World(plan, kernel, lines.append if trace else None)
        operator = Operator(world)
        invariants = Invariants(world, operator)
        world.runner = Runner(world, invariants.run_started)
        mapping = StreamMapping(world, QUEUE_TABLE)
        producer = WorkflowProducer(world)
        workflow_invariants = WorkflowInvariants(invariants, producer)
        if prepare is not None:
            prepare(world)
        with wired(world):
            world.start()
            mapping.start()
            invariants.start()
            start_producers(world)
            operator.start()
            if plan.workflows:
                producer.start()
                workflow_invariants.start()
            try:
                _run_to_quiescence(world, invariants)
            except SimulationFailure as failure:
                invariants.fail("kernel", f"{type(failure).__name__}: {failure}")
            invariants.finish()
            if plan.workflows:
                workflow_invariants.finish()
        outcome = Outcome(plan, invariants.violations, world.stats, len(invariants.tasks), len(world.runner.runs),
                          kernel.steps, kernel.now, lines,
                          workflow_invariants.summary() if plan.workflows else {})
    return outcome


def _run_to_quiescence(world: World, invariants: Invariants) -> None:
    kernel = world.kernel
    kernel.run(until=world.plan.minutes * 60 + 1)
    quiet_since: float | None = None
    while kernel.now < HORIZON_S:
        kernel.run(until=kernel.now + 10.0)
        done = all(t.status in TERMINAL for t in invariants.tasks.values())
        if not done:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = kernel.now
        elif kernel.now - quiet_since >= QUIET_S:
            return


def replay_command(seed: int, workflows: bool = False) -> str:
    return f"python -m sim.explore --replay {seed}" + (" --workflows" if workflows else "")


def explore(schedules: int, first_seed: int, out: Callable[[str], None] = print, workflows: bool = False) -> list[Outcome]:
    """Run seeds first_seed .. first_seed + schedules - 1; print each violation with its replay line, then totals."""
    found: list[Outcome] = []
    kinds: Counter[str] = Counter()
    started = time.monotonic()
    steps = tasks = 0
    exercised: Counter[str] = Counter()
    for seed in range(first_seed, first_seed + schedules):
        outcome = run_schedule(draw_plan(seed, workflows))
        steps += outcome.steps
        tasks += outcome.tasks
        exercised.update(outcome.workflows)
        if outcome.violations:
            found.append(outcome)
            kinds.update({v.invariant for v in outcome.violations})
            out(f"seed {seed}: {outcome.violations[0]} (+{len(outcome.violations) - 1} more)  replay: "
                f"{replay_command(seed, workflows)}")
    elapsed = time.monotonic() - started
    out(f"schedules explored: {schedules} (seeds {first_seed}-{first_seed + schedules - 1}), tasks {tasks}, "
        f"steps {steps}, in {elapsed:.1f} s ({schedules / elapsed:.1f} schedules/s)")
    if workflows:
        out(f"workflows: {dict(exercised)}")
    out(f"violations: {len(found)} schedule(s)" + (f" ({dict(sorted(kinds.items()))})" if kinds else ""))
    return found


def explore_in(jobs: int, schedules: int, first_seed: int, out: Callable[[str], None] = print,
               workflows: bool = False) -> int:
    """``explore`` split over ``jobs`` processes (seeds in contiguous ranges); returns the schedules with a
    violation."""
    share, extra = divmod(schedules, jobs)
    children, seed = [], first_seed
    for job in range(jobs):
        count = share + (1 if job < extra else 0)
        if count:
            command = [sys.executable, "-m", "sim.explore", "--schedules", str(count), "--seed", str(seed)]
            command += ["--workflows"] if workflows else []
            children.append(subprocess.Popen(command, stdout=subprocess.PIPE, text=True,
                                             env={**os.environ, "PYTHONHASHSEED": HASH_SEED}))
        seed += count
    started, found, explored = time.monotonic(), 0, 0
    for child in children:
        output, _ = child.communicate()
        for line in output.splitlines():
            if line.startswith(("seed ", "workflows: ")):
                out(line)
            elif match := re.match(r"schedules explored: (\d+)", line):
                explored += int(match.group(1))
            elif match := re.match(r"violations: (\d+)", line):
                found += int(match.group(1))
    elapsed = time.monotonic() - started
    out(f"schedules explored: {explored} (seeds {first_seed}-{first_seed + schedules - 1}) in {jobs} processes, "
        f"in {elapsed:.1f} s ({explored / elapsed:.1f} schedules/s)")
    out(f"violations: {found} schedule(s)")
    return found


def replay(seed: int, out: Callable[[str], None] = print, workflows: bool = False) -> Outcome:
    plan = draw_plan(seed, workflows)
    out(f"plan: {plan}")
    outcome = run_schedule(plan, trace=True)
    for line in outcome.trace:
        out(line)
    out(f"tasks {outcome.tasks}, runs {outcome.runs}, steps {outcome.steps}, virtual {outcome.virtual_s:.1f} s, "
        f"stats {outcome.stats}" + (f", workflows {outcome.workflows}" if outcome.workflows else ""))
    out(f"violations: {len(outcome.violations)}")
    for violation in outcome.violations:
        out(f"  {violation}")
    return outcome


def main(argv: list[str] | None = None) -> int:
    if os.environ.get("PYTHONHASHSEED") != HASH_SEED:  # a set's order follows it: one value, so any run replays
        os.execve(sys.executable, [sys.executable, "-m", "sim.explore", *(sys.argv[1:] if argv is None else argv)],
                  {**os.environ, "PYTHONHASHSEED": HASH_SEED})
    parser = argparse.ArgumentParser(prog="python -m sim.explore", description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=100, help="how many seeded schedules to run")
    parser.add_argument("--seed", type=int, default=1, help="the first seed")
    parser.add_argument("--replay", type=int, help="run this one seed and print its trace")
    parser.add_argument("--jobs", type=int, default=1, help="processes to split the schedules over")
    parser.add_argument("--workflows", action="store_true", help="schedules that also create workflows")
    args = parser.parse_args(argv)
    if args.replay is not None:
        return 1 if replay(args.replay, workflows=args.workflows).violations else 0
    if args.jobs > 1:
        return 1 if explore_in(args.jobs, args.schedules, args.seed, workflows=args.workflows) else 0
    return 1 if explore(args.schedules, args.seed, workflows=args.workflows) else 0


if __name__ == "__main__":
    sys.exit(main())
