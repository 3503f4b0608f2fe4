"""Workflows in the simulation (docs/simulation.md, "Workflows"): seeded schedules that also create diamonds and fan-ins
through CreateTasks, with every fault mixed in, break no workflow invariant; a plain seed's plan is unchanged by them;
and each workflow invariant can fail: the product broken on purpose, a schedule that breaks the invariant is found."""

from __future__ import annotations

import ast
import os
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import pytest

from sim.explore import draw_plan, explore, run_schedule
from sim.faults import Fault, Request
from sim.world import World
from taskqueue.core.states import TaskStatus
from taskqueue.core.workflow_rules import EdgeEffect, Policy
from taskqueue.store import workflow_fan_out
from taskqueue.store.workflow_fan_out import WorkflowFanOut
from taskqueue.store.workflows import WorkflowStore

SCHEDULES = int(os.environ.get("SIM_WORKFLOW_SCHEDULES", "40"))
QUIET_PLAN = {"kill_rate": 0.0, "throttle_rate": 0.0, "slow_rate": 0.0, "lag_rate": 0.0, "skew_s": 0.0,
              "late_rate": 0.0, "twice_rate": 0.0, "drop_rate": 0.0, "pauses": 0}


def first_violation(kind: str, seeds: Iterable[int], plan: dict[str, Any],
                    prepare: Callable[[World], None] | None = None) -> tuple[int, str]:
    """The first seed whose workflow schedule (its drawn plan with ``plan``'s changes) breaks invariant ``kind``."""
    for seed in seeds:
        outcome = run_schedule(replace(draw_plan(seed, workflows=True), **plan), prepare=prepare)
        found = [v for v in outcome.violations if v.invariant == kind]
        if found:
            print(f"{kind}: seed {seed}: {found[0]}")  # shown with pytest -s
            return seed, str(found[0])
    raise AssertionError(f"no schedule of seeds {seeds} broke {kind!r}")


def test_a_plain_seeds_plan_is_the_same_with_workflows_off_and_only_adds_them_on() -> None:
    for seed in (1, 98, 331):
        plain = draw_plan(seed)
        assert plain.workflows == 0 and draw_plan(seed, workflows=False) == plain
        with_workflows = draw_plan(seed, workflows=True)
        assert 1 <= with_workflows.workflows <= 3
        assert replace(with_workflows, workflows=0) == plain


def test_a_workflow_seed_gives_the_same_schedule_twice() -> None:
    first, again = run_schedule(draw_plan(7, workflows=True)), run_schedule(draw_plan(7, workflows=True))
    assert (first.steps, first.virtual_s, first.workflows) == (again.steps, again.virtual_s, again.workflows)
    assert first.workflows["workflows"] >= 1 and first.workflows["committed"] == first.workflows["workflows"]


@pytest.mark.slow
def test_seeded_workflow_schedules_break_no_invariant_and_exercise_every_policy_path() -> None:
    lines: list[str] = []
    found = explore(SCHEDULES, 1, lines.append, workflows=True)
    assert [str(o.violations[0]) for o in found] == [], "\n".join(lines)
    exercised = next(line for line in lines if line.startswith("workflows: "))
    counts = ast.literal_eval(exercised.removeprefix("workflows: "))
    for name in ("waited", "blocked", "failed", "on_failure_ran", "on_failure_skipped"):
        assert counts[name] > 0, (name, counts)
    assert counts["committed"] == counts["workflows"], counts


# ---- each invariant can fail ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_fan_in_that_does_not_count_readies_a_dependent_before_its_dependencies_end(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workflow_fan_out, "counter_path", lambda slot, total, fan_in=100: [])  # the first end readies
    seed, violation = first_violation("dependency-order", range(1, 20), QUIET_PLAN)
    assert "while its dependency" in violation, (seed, violation)


@pytest.mark.slow
def test_a_fan_out_that_never_readies_leaves_a_task_waiting_forever(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(WorkflowFanOut, "ready_waiting", lambda self, task_id, now_ms, attempts=3: (None, None))
    seed, violation = first_violation("waits-forever", range(1, 10), QUIET_PLAN)
    assert "dependencies all ended" in violation, (seed, violation)


@pytest.mark.slow
def test_a_dependent_made_ready_twice_leaves_waiting_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    ready = WorkflowFanOut.ready_waiting

    def ready_twice(self: WorkflowFanOut, task_id: str, now_ms: int, attempts: int = 3) -> tuple[str | None, str | None]:
        done = ready(self, task_id, now_ms, attempts)
        if done[0] is not None:
            self._db.update_item(TableName=self._table, Key={"taskId": {"S": task_id}},
                                 UpdateExpression="SET taskStatus = :w", ExpressionAttributeValues={":w": {"S": "WAITING"}})
            ready(self, task_id, now_ms, attempts)
        return done

    monkeypatch.setattr(WorkflowFanOut, "ready_waiting", ready_twice)
    seed, violation = first_violation("leaves-waiting-once", range(1, 10), QUIET_PLAN)
    assert "WAITING" in violation, (seed, violation)


@pytest.mark.slow
def test_a_failed_dependency_that_counts_under_policy_fail_runs_its_dependent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workflow_fan_out, "edge_effect",
                        lambda outcome, policy: EdgeEffect(counts=True, failed=outcome is not TaskStatus.SUCCESS))
    seed, violation = first_violation("failure-policy", range(1, 30), QUIET_PLAN)
    assert "under policy" in violation, (seed, violation)


@pytest.mark.slow
def test_an_on_failure_task_told_of_no_failure_is_skipped_though_a_task_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    effect = workflow_fan_out.edge_effect

    def failures_unseen(outcome: TaskStatus, policy: Policy) -> EdgeEffect:
        return EdgeEffect(counts=True, failed=False) if policy is Policy.ON_FAILURE else effect(outcome, policy)

    monkeypatch.setattr(workflow_fan_out, "edge_effect", failures_unseen)
    seed, violation = first_violation("on-failure", range(1, 30), QUIET_PLAN)
    assert "unrun though" in violation, (seed, violation)


@pytest.mark.slow
def test_a_creation_that_puts_its_roots_before_its_final_write_shows_a_partial_workflow(
        monkeypatch: pytest.MonkeyPatch) -> None:
    write = WorkflowStore.write_workflow

    def roots_first(self: WorkflowStore, plan: Any) -> int:
        self._each(self._put_absent, plan.roots)
        return write(self, plan)

    monkeypatch.setattr(WorkflowStore, "write_workflow", roots_first)
    seed, violation = first_violation("all-or-nothing", range(1, 10), {**QUIET_PLAN, "kill_rate": 0.03})
    assert "while its workflow's record is CREATING" in violation, (seed, violation)


# ---- a creation crashed at each of its requests ------------------------------------------------------------------


def _crash_creation_at(number: int, answer_lost: bool) -> Callable[[World], None]:
    """A world whose first CreateTasks invocation is killed at its ``number``-th request: before it applies, or after
    it applied with its answer lost (as ``World._fault`` kills)."""
    def prepare(world: World) -> None:
        fault_of, seen = world.db.faults, [0]

        def faults(request: Request) -> Fault | None:
            task = world.kernel.current
            if task is not None and task.invocation.name == "CreateTasks-1" and task.invocation in world.live:
                seen[0] += 1
                if seen[0] == number:
                    invocation = task.invocation
                    if not answer_lost:
                        world.kernel.kill(invocation, f"crashed at request {number} (before it applied)")
                        return None
                    world.kernel.call_at(world.kernel.now + 0.001,
                                         lambda: world.kernel.kill(invocation, f"crashed at request {number} (applied)"))
                    return Fault(before_s=0.0005, after_s=0.002)
            return fault_of(request)

        world.db.faults = faults

    return prepare


@pytest.mark.slow
@pytest.mark.parametrize("answer_lost", [False, True], ids=["before-it-applied", "its-answer-lost"])
def test_a_creation_crashed_at_any_of_its_requests_shows_nothing_partial_and_is_finished(answer_lost: bool) -> None:
    """Every request of a workflow's creation in turn is its crash point; its producer sends it again (or, when the
    crash left it committed, half the time leaves its start to the safety net's sweep). Every schedule keeps every
    invariant, its workflow's tasks included: nothing of it shown before its final write, and it ends whole."""
    finished = 0
    for number in range(1, 16):
        for seed in (3, 4):
            plan = replace(draw_plan(seed, workflows=True), **QUIET_PLAN, producers=0, workflows=1)
            outcome = run_schedule(plan, prepare=_crash_creation_at(number, answer_lost))
            assert [str(v) for v in outcome.violations] == [], (number, seed)
            assert outcome.workflows["committed"] == 1, (number, seed, outcome.workflows)
            finished += outcome.workflows["resent"] + outcome.workflows["left_to_sweep"]
    assert finished >= 20  # most crash points fell inside the creation (a diamond's is about 10 requests)
