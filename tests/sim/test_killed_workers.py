"""Workers killed between claim and finish lose nothing: the simulation kills ProcessTasks invocations at a request
while they hold a claimed task (the seed decides which, so the kills always happen), and every task still ends
finished, once, with no invariant broken. (It replaces a test on real threads whose kills depended on timing.)"""

from __future__ import annotations

from dataclasses import replace

import pytest

from sim.explore import draw_plan, run_schedule
from sim.faults import Fault, Request
from sim.world import World

pytestmark = pytest.mark.slow

SEEDS = range(1, 11)
KILL_SHARE = 0.1  # of the requests an invocation sends while it holds a claimed task


def kill_between_claim_and_finish(world: World) -> None:
    """Replace the world's faults: a request of a worker invocation that runs a claimed task kills it (before the
    request applies, or once it applied and its answer is lost), at most three times a schedule."""
    world.killed_holding: list[str] = []

    def hook(request: Request) -> Fault | None:
        task = world.kernel.current
        if task is None or task.invocation not in world.live or len(world.killed_holding) >= 3:
            return None
        invocation = task.invocation
        holding = [r.task_id for r in world.runner.running if r.invocation == invocation.name]
        if holding and world.rng.random() < KILL_SHARE:
            world.killed_holding.append(invocation.name)
            world.cost(world.settings.lease_seconds + world.safety_net_s + 5)
            world.kernel.kill(invocation, f"killed holding {holding} at {request.operation}")
        return None

    for service in (world.db, world.sns, world.scheduler):
        service.faults = hook


@pytest.mark.parametrize("seed", SEEDS)
def test_workers_killed_between_claim_and_finish_lose_nothing(seed: int) -> None:
    kept: list[World] = []

    def prepare(world: World) -> None:
        kept.append(world)
        kill_between_claim_and_finish(world)

    quiet = {"kill_rate": 0.0, "throttle_rate": 0.0, "slow_rate": 0.0, "lag_rate": 0.0, "skew_s": 0.0,
             "late_rate": 0.0, "twice_rate": 0.0, "drop_rate": 0.0, "fail_rate": 0.0, "pauses": 0,
             "group_concurrency": None, "producers": 3, "requests": 4}
    outcome = run_schedule(replace(draw_plan(seed), **quiet), prepare=prepare)
    world = kept[0]
    assert world.killed_holding, f"seed {seed}: no worker was killed holding a task: pick another seed"
    assert outcome.violations == [], [str(v) for v in outcome.violations]
    killed_runs = [r for r in world.runner.runs if r.outcome == "killed"]
    assert killed_runs, "the kills ended no run"
    finished = {r.task_id for r in world.runner.runs if r.outcome == "succeeded"}
    assert finished == set(outcome_task_ids(world)), "a task never finished"
    for run in killed_runs:  # each run a kill ended ran again, later, and finished
        assert any(r.task_id == run.task_id and r.start > run.start and r.outcome == "succeeded"
                   for r in world.runner.runs), run


def outcome_task_ids(world: World) -> list[str]:
    return [item["taskId"]["S"] for item in world.db.items(world.settings.queue_table_name)
            if "taskStatus" in item]
