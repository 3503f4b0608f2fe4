"""A task delayed beyond the worker's budget, end to end on the local engine: no worker runs while it waits; the
queue's one-time schedule at its delayed head (EventBridge Scheduler, fired by local/delivery/one_time_schedules.py)
wakes Trigger, which wakes the worker, which claims the task about when it falls due; a lost schedule is caught by
the safety net."""

from __future__ import annotations

import pytest

from taskqueue.core.wake_schedule import WAIT_HORIZON_SECONDS
from tests.e2e.conftest import invocations, settled

pytestmark = pytest.mark.e2e

DELAY = 15  # seconds: beyond the worker's budget (TimeBudgetSeconds 3 in the e2e defaults)


def create_delayed(engine, delay: float = DELAY) -> tuple[str, float]:
    """A delayed task; returns its id and when it falls due (seconds after the engine started, as invocations say)."""
    inv = engine.invoke("CreateTasksFunction", {"queue": "work", "delaySeconds": delay})
    assert inv.ok, inv.error
    (task_id,) = inv.result["taskIds"]
    assert engine.wait_for(lambda: task_id in engine.observer.tasks, timeout=10)
    created_ms = engine.observer.tasks[task_id].created_ms
    return task_id, created_ms / 1000 + delay - engine.started_at


def claim_of(engine, task_id: str) -> dict | None:
    return next((c for c in engine.observer.claims if c["task_id"] == task_id), None)


def test_a_task_delayed_beyond_the_budget_is_claimed_on_time_with_no_worker_awake_while_it_waits(start_engine):
    engine = start_engine()
    task_id, due = create_delayed(engine)
    assert engine.wait_for(lambda: claim_of(engine, task_id) is not None, timeout=DELAY + 15), engine.stats()
    claim = claim_of(engine, task_id)
    late_ms = claim["age_ms"] - DELAY * 1000
    assert 0 <= late_ms < 1000, claim  # claimed within a second of due (the safety net is off here)
    assert engine.one_time is not None and [f["name"] for f in engine.one_time.fired] == ["wake-work"]
    assert invocations(engine, "TriggerFunction", "scheduler")  # the schedule woke Trigger
    assert engine.wait_for(lambda: settled(engine), timeout=15)  # the claiming run has ended: it is recorded too
    # No worker invocation ran while the task waited: each ended before, or began after, the wait (the woken worker
    # may begin up to the wait horizon before the head: the schedule's lead).
    runs = [(i["t"] - i["duration"], i["t"]) for i in invocations(engine, "ProcessTasksFunction")]
    first_end = min(end for _, end in runs)
    quiet = (first_end, due - WAIT_HORIZON_SECONDS - 0.5)
    assert quiet[1] - quiet[0] > 3, (runs, due)  # the wait is long enough to mean something
    overlapping = [r for r in runs if r[0] < quiet[1] and r[1] > quiet[0]]
    assert not overlapping, (overlapping, quiet, runs)
    assert len(runs) >= 2 and max(start for start, _ in runs) >= quiet[1], runs  # the woken one came after the wait


def test_a_lost_schedule_is_caught_by_the_safety_net(start_engine):
    # The safety net every 6 s (rate(1 minute) at time scale 0.1).
    engine = start_engine(schedules=True, time_scale=0.1)
    task_id, due = create_delayed(engine)
    scheduler = engine.client("scheduler")
    assert engine.wait_for(lambda: scheduler.list_schedules()["Schedules"], timeout=10)
    scheduler.delete_schedule(Name="wake-work", GroupName="taskqueue-local-WakeScheduleGroup")  # lost
    assert engine.wait_for(lambda: claim_of(engine, task_id) is not None, timeout=DELAY + 20), engine.stats()
    assert invocations(engine, "TriggerFunction", "schedule"), "the safety net never ran"
    claim = claim_of(engine, task_id)
    assert claim["age_ms"] >= DELAY * 1000
