"""Each invariant of the simulation can fail: the product broken on purpose (a store or worker rule monkeypatched), the
explorer finds a schedule that breaks the invariant, and names its seed."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import pytest

from sim import actors
from sim.explore import draw_plan, run_schedule
from sim.world import World
from taskqueue.store import TaskStore
from taskqueue.work import worker as worker_module
from taskqueue.work.fair_share import FairShare
from taskqueue.work.held_slots import HeldSlots
from taskqueue.work.record_view import RecordView

pytestmark = pytest.mark.slow

QUIET_PLAN = {"kill_rate": 0.0, "throttle_rate": 0.0, "slow_rate": 0.0, "lag_rate": 0.0, "skew_s": 0.0,
              "late_rate": 0.0, "twice_rate": 0.0, "drop_rate": 0.0, "group_concurrency": None, "pauses": 0}


def first_violation(kind: str, seeds: Iterable[int], plan: dict[str, Any],
                    prepare: Callable[[World], None] | None = None) -> tuple[int, str]:
    """The first seed whose schedule (its drawn plan with ``plan``'s changes) breaks invariant ``kind``."""
    for seed in seeds:
        outcome = run_schedule(replace(draw_plan(seed), **plan), prepare=prepare)
        found = [v for v in outcome.violations if v.invariant == kind]
        if found:
            print(f"{kind}: seed {seed}: {found[0]}")  # shown with pytest -s
            return seed, str(found[0])
    raise AssertionError(f"no schedule of seeds {seeds} broke {kind!r}")


def test_a_recovery_without_the_lease_condition_runs_a_task_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    recover = TaskStore.recover_expired_leases

    def every_lease(self: TaskStore, queue: str, retry_at_ms: int | None = None, now_ms: int | None = None,
                    **kw: Any) -> dict[str, int]:
        return recover(self, queue, retry_at_ms, self._clock.now_ms() + 3_600_000, **kw)  # as if every lease had passed

    monkeypatch.setattr(TaskStore, "recover_expired_leases", every_lease)
    monkeypatch.setattr(actors, "_duration_ms", lambda _world: 50_000)  # runs that outlast a round of the safety net
    seed, violation = first_violation("run-twice", range(1, 20), QUIET_PLAN)
    assert "while" in violation, (seed, violation)


def test_a_safety_net_that_recovers_and_wakes_nothing_strands_dropped_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_safety_net(world: World) -> None:
        monkeypatch.setattr(world.trigger, "run_safety_net", lambda _svc, _scheduled=None: [])

    seed, violation = first_violation("claim-bound", range(1, 20), {**QUIET_PLAN, "drop_rate": 0.5}, no_safety_net)
    assert "waited" in violation, (seed, violation)


def test_a_finished_task_made_pending_again_loses_its_terminal_state(monkeypatch: pytest.MonkeyPatch) -> None:
    complete = TaskStore.complete

    def complete_then_forget(self: TaskStore, task: Any, owner: str, *args: Any, **kw: Any) -> bool:
        done = complete(self, task, owner, *args, **kw)
        self._db.update_item(TableName=self.settings.queue_table_name, Key={"taskId": {"S": task.task_id}},
                             UpdateExpression="SET taskStatus = :p", ExpressionAttributeValues={":p": {"S": "PENDING"}})
        return done

    monkeypatch.setattr(TaskStore, "complete", complete_then_forget)
    seed, violation = first_violation("terminal-lost", range(1, 10), QUIET_PLAN)
    assert "SUCCESS to PENDING" in violation, (seed, violation)


def test_a_worker_that_always_tail_calls_invokes_without_end(monkeypatch: pytest.MonkeyPatch) -> None:
    finish = worker_module._Run.finish

    def always_more(self: Any) -> None:
        finish(self)
        self.report.work_remains = True

    monkeypatch.setattr(worker_module._Run, "finish", always_more)
    seed, violation = first_violation("endless", range(1, 10), QUIET_PLAN)
    assert "invocations after the last task finished" in violation, (seed, violation)


def test_a_worker_that_takes_no_running_limit_slots_exceeds_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(HeldSlots, "for_claims", lambda self, wanted, guess=False: None)
    seed, violation = first_violation("limit", range(1, 20), {**QUIET_PLAN, "running_limit": 2, "producers": 3})
    assert "running limit 2" in violation, (seed, violation)


def test_a_worker_that_ignores_a_pause_claims_from_a_paused_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RecordView, "paused_now", lambda self: False)
    seed, violation = first_violation("paused", range(1, 30), {**QUIET_PLAN, "pauses": 2, "producers": 3})
    assert "into a pause" in violation, (seed, violation)


def test_a_worker_that_takes_no_group_slot_exceeds_a_groups_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FairShare, "admit", lambda self, candidate: True)
    seed, violation = first_violation("limit", range(1, 30), {**QUIET_PLAN, "group_concurrency": 1, "producers": 3})
    assert "runs of group" in violation, (seed, violation)
