"""The LIFO work queue end to end on the local engine: real handlers, the template's wiring, scaled time."""

from __future__ import annotations

import statistics

import pytest

from tests.e2e.conftest import invocations, queue_stream_mapping, settled, table_items

pytestmark = pytest.mark.e2e


def create(engine, **request):
    inv = engine.invoke("CreateTasksFunction", {"queue": "work", **request})
    assert inv.ok, inv.error
    return inv.result["taskIds"]


def test_every_created_task_ends_success_failure_or_shed(start_engine):
    engine = start_engine({"FakeRunnerFailureRate": 0.4, "MaxAttempts": 2})
    ids = create(engine, count=15)
    # Tasks that would fall due only after their ttl could never run: refused, nothing written.
    refused = engine.invoke("CreateTasksFunction", {"queue": "work", "count": 5, "ttlSeconds": 1, "delaySeconds": 30})
    assert not refused.ok and "must be less than ttlSeconds" in refused.error["errorMessage"]
    assert engine.wait_for(lambda: settled(engine) and engine.observer.counts()["created"] == 15, timeout=60), \
        engine.observer.counts()

    items = table_items(engine)
    outcomes = {task_id: engine.observer.outcome_of(task_id) for task_id in ids}
    for task_id, outcome in outcomes.items():
        assert outcome in ("SUCCESS", "FAILURE", "SHED"), (task_id, outcome)
        if outcome == "SHED":
            assert task_id not in items  # deleted by the TTL sweeper
        else:
            assert items[task_id]["taskStatus"]["S"] == outcome
    assert all(outcomes[t] in ("SUCCESS", "FAILURE") for t in ids)


def test_overload_serves_newest_first_and_sheds_expired_tasks(start_engine):
    # 6 tasks/s arrive for a runner that does 2/s; tasks live 5 s.
    engine = start_engine(
        {"CreateTasksScheduleState": "ENABLED", "CreateTasksScheduleRate": "rate(1 minute)", "CreateTasksCount": 6, "SafetyNetScheduleRate": "rate(5 minutes)",
         "RunnerCapacity": 2, "FakeRunnerDurationSeconds": 1, "DefaultTtlSeconds": 5, "TimeBudgetSeconds": 4},
        schedules=True, time_scale=1 / 60,
    )
    assert engine.wait_for(lambda: engine.observer.counts()["created"] >= 72, timeout=40)
    engine.stop_schedules()
    assert engine.wait_for(lambda: settled(engine) and engine.observer.counts()["expired_waiting"] == 0, timeout=60), \
        engine.observer.counts()

    obs = engine.observer
    counts = obs.counts()
    assert counts["shed"] > counts["created"] * 0.3, counts  # overload: a large share is shed
    assert counts["SUCCESS"] > 10, counts
    assert counts["SUCCESS"] + counts["FAILURE"] + counts["shed"] == counts["created"], counts
    # TTL-expired tasks are never claimed; every claim happened within the task's TTL.
    shed = {t for t, track in obs.tasks.items() if track.removed == "shed"}
    assert shed and all(obs.tasks[t].claims == 0 for t in shed)
    assert all(c["age_ms"] < 5000 for c in obs.claims)
    # LIFO: when a task was claimed, hardly ever was a newer claimable task waiting.
    newest = [c for c in obs.claims if c["newer_waiting"] == 0]
    assert len(newest) >= 0.8 * len(obs.claims), [c["newer_waiting"] for c in obs.claims]
    # Fresh work served: claimed tasks were young, compared with the tasks that were shed.
    shed_ages = [age for _, _, age in obs.sheds]
    assert statistics.median(c["age_ms"] for c in obs.claims) < 0.5 * statistics.median(shed_ages)
    # ProcessTasks' TaskStream saw every INSERT and every TTL REMOVE of a PENDING task (its FilterCriteria), marked
    # with the TTL identity; the TTL deletion of a task already shed by a reader (status SHED) is cleanup, not passed on.
    mapping = queue_stream_mapping(engine)
    shed_by_ttl = sum(1 for track in obs.tasks.values() if track.removed == "shed")
    assert mapping.stats["records_delivered"] >= counts["created"] + shed_by_ttl


def test_tail_calls_keep_processing_past_one_invocation_budget(start_engine):
    engine = start_engine({"TimeBudgetSeconds": 1, "RunnerCapacity": 2, "FakeRunnerDurationSeconds": 0.4})
    ids = create(engine, count=16)
    assert engine.wait_for(lambda: settled(engine), timeout=60), engine.observer.counts()
    assert all(engine.observer.outcome_of(t) == "SUCCESS" for t in ids)
    runs = invocations(engine, "ProcessTasksFunction")
    assert len(runs) >= 2
    assert any(r["result"] and r["result"]["work_remains"] for r in runs)
    # The stream started the first run; each tail call went straight from ProcessTasks to WorkerWakeUpTopic and on to
    # ProcessTasks (SNS invocations), with no Trigger and no schedule running.
    tail_calls = sum(1 for r in runs if r["result"] and r["result"]["work_remains"])
    assert len(invocations(engine, "ProcessTasksFunction", "sns")) == tail_calls
    assert invocations(engine, "TriggerFunction") == []
    assert not engine.schedules or all(s.fired == 0 for s in engine.schedules)


def test_throttled_process_tasks_invocation_loses_no_work(start_engine):
    """With a reserved concurrency of 1, the stream's batch and the tail call meet the one busy instance: they are
    throttled and retried (the stream's by its mapping, the tail call's by Lambda's asynchronous retries), not lost;
    meanwhile the running instance claims the new tasks from the index."""
    engine = start_engine({"ProcessTasksConcurrency": 1, "FakeRunnerDurationSeconds": 2, "RunnerCapacity": 1,
                           "TimeBudgetSeconds": 1})
    ids = create(engine, count=1)
    assert engine.wait_for(lambda: engine.pools["ProcessTasksFunction"].busy == 1, timeout=20)
    ids += create(engine, count=1) + create(engine, count=1)
    assert engine.wait_for(lambda: settled(engine) and engine.observer.counts()["created"] == len(ids), timeout=90), \
        engine.observer.counts()
    assert all(engine.observer.outcome_of(t) == "SUCCESS" for t in ids)
    stats = engine.stats()["functions"]["ProcessTasksFunction"]
    assert stats["max_concurrency"] == 1
    assert stats["throttles"] > 0 or stats["async"]["throttled"] > 0, stats
    assert stats["async"]["dropped_age"] == 0
