"""A scheduled wake-up at the queue's delayed head (taskqueue.wakeups.delayed_wakeup), on both DynamoDB engines and
moto's EventBridge Scheduler: a worker stopping with a future head sets the queue's one schedule at it (moved earlier
by an earlier head, no request when the head is covered, a refusal never failing the run) and does not stay awake
for it; the schedule's input makes Trigger wake the queue; the safety net sets a lost one again."""

from __future__ import annotations

import dataclasses
import json
import random
from typing import Any

import boto3
import pytest

from taskqueue.core import wake_schedule
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.services import Services
from taskqueue.store import TaskStore
from taskqueue.wakeups.delayed_wakeup import DelayedWakeups, ScheduleConfig
from taskqueue.wakeups.safety_net import run_safety_net
from taskqueue.work.worker import Worker
from tests.faults import FaultyClient
from tests.support import LambdaContextStub, load_function

pytestmark = [
    pytest.mark.dynamodb_engines,
    pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning"),
]

TARGET = "arn:aws:lambda:us-east-1:123456789012:function:stack-Trigger"
ROLE = "arn:aws:iam::123456789012:role/stack-WakeScheduleRole"
GROUP = "stack-WakeScheduleGroup-1A2B3C"
NAME = "wake-work"


@pytest.fixture
def scheduler(aws: None) -> FaultyClient:
    client = boto3.client("scheduler")
    client.create_schedule_group(Name=GROUP)
    return FaultyClient(client)


@pytest.fixture
def wakeups(store: TaskStore, scheduler: FaultyClient, clock) -> DelayedWakeups:
    return DelayedWakeups(store, scheduler, ScheduleConfig(GROUP, ROLE, TARGET), clock)


def create(store: TaskStore, clock, delay: float | None = None, count: int = 1) -> list[str]:
    body: dict[str, Any] = {"queue": "work", "count": count}
    if delay is not None:
        body["delaySeconds"] = delay
    tasks = new_tasks(parse_create_request(body, store.settings), clock.now_ms(), store.settings)
    store.put_tasks(tasks)
    return [t.task_id for t in tasks]


def run_worker(store: TaskStore, wakeups: DelayedWakeups, clock, budget: float = 60):
    return Worker(store, lambda task: None, capacity=2, owner="w", clock=clock, stopped=wakeups.ensure).run("work", budget)


def scheduler_requests(client: FaultyClient) -> list[str]:
    return [op for op in client.calls if op.endswith("_schedule")]


def scheduled_at(client: FaultyClient) -> int | None:
    try:
        schedule = client.get_schedule(Name=NAME, GroupName=GROUP)
    except client.exceptions.ResourceNotFoundException:
        return None
    finally:
        client.calls.pop()
    return wake_schedule.at_of(schedule["ScheduleExpression"])


def test_a_worker_that_stops_with_a_future_head_sets_the_schedule_at_it_and_does_not_wait(store, wakeups, scheduler, clock):
    create(store, clock, delay=300)  # beyond the worker's 60 s budget
    started = clock.now_ms()
    report = run_worker(store, wakeups, clock)
    head = started + 300_000
    # Before: the worker waited its whole budget (tail-calling for the rest) or the task waited for the safety net.
    assert report.claimed == 0 and report.stopped_by == "empty" and not report.work_remains
    assert clock.now_ms() - started < wake_schedule.WAIT_HORIZON_SECONDS * 1000  # stopped at once, no waiting
    schedule = scheduler.get_schedule(Name=NAME, GroupName=GROUP)
    assert wake_schedule.at_of(schedule["ScheduleExpression"]) == wake_schedule.wake_time_ms(head)
    assert schedule["ScheduleExpressionTimezone"] == "UTC"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert schedule["ActionAfterCompletion"] == "DELETE"
    assert schedule["Target"]["Arn"] == TARGET and schedule["Target"]["RoleArn"] == ROLE
    assert json.loads(schedule["Target"]["Input"]) == {"wakeQueue": "work", "reason": "delayed-head"}
    assert store.read_record("work").wake_at_ms == wake_schedule.wake_time_ms(head)
    assert scheduler_requests(scheduler)[:1] == ["create_schedule"]


def test_an_earlier_head_moves_the_schedule_and_a_covered_one_sends_no_request(store, wakeups, scheduler, clock):
    create(store, clock, delay=300)
    run_worker(store, wakeups, clock)
    assert scheduler_requests(scheduler) == ["create_schedule"]
    create(store, clock, delay=100)  # an earlier head: the schedule moves earlier
    early = clock.now_ms() + 100_000
    run_worker(store, wakeups, clock)
    assert scheduler_requests(scheduler) == ["create_schedule", "update_schedule"]
    assert scheduled_at(scheduler) == wake_schedule.wake_time_ms(early)
    create(store, clock, delay=500)  # a later one: covered by the schedule set
    run_worker(store, wakeups, clock)
    run_worker(store, wakeups, clock)  # and a stop with nothing new
    assert scheduler_requests(scheduler) == ["create_schedule", "update_schedule"]  # no request for a covered head


def test_a_refused_scheduler_call_does_not_fail_the_run_and_the_next_stop_tries_again(store, wakeups, scheduler, clock):
    create(store, clock, delay=300)
    scheduler.fail("create_schedule", "ThrottlingException")
    report = run_worker(store, wakeups, clock)
    assert report.stopped_by == "empty" and report.errors == 0
    assert scheduled_at(scheduler) is None
    assert store.read_record("work").wake_at_ms is None  # given back: the next stop does not take it as covered
    run_worker(store, wakeups, clock)
    at = store.read_record("work").wake_at_ms
    assert at is not None and scheduled_at(scheduler) == at


def test_a_worker_woken_at_the_schedule_waits_the_lead_and_claims_the_task_when_due(store, wakeups, scheduler, clock):
    create(store, clock, delay=300)
    due = clock.now_ms() + 300_000
    run_worker(store, wakeups, clock)
    clock.advance((scheduled_at(scheduler) - clock.now_ms()) / 1000)  # the schedule fires
    report = run_worker(store, wakeups, clock)
    assert report.claimed == 1 and due <= clock.now_ms() < due + 1_500


class Ceiling(random.Random):
    """Backoff at its ceiling (no jitter), and pauses at their longest: a known retry time."""

    def uniform(self, a: float, b: float) -> float:
        return b


def test_a_retry_backing_off_past_the_horizon_is_scheduled_not_waited_for(store, wakeups, scheduler, clock):
    backing_off = TaskStore(store._db, dataclasses.replace(store.settings, retry_base_seconds=40, retry_max_seconds=40), clock)
    wakeups = DelayedWakeups(backing_off, scheduler, ScheduleConfig(GROUP, ROLE, TARGET), clock)
    attempts: list[int] = []

    def flaky(task) -> None:
        attempts.append(clock.now_ms())
        if len(attempts) == 1:
            raise RuntimeError("the legacy system timed out")

    create(backing_off, clock)
    worker = Worker(backing_off, flaky, capacity=1, owner="w", clock=clock, rng=Ceiling(), stopped=wakeups.ensure)
    report = worker.run("work", 60)
    # Before: the worker stayed awake (billed) 40 s for the retry inside its 60 s budget.
    assert report.released == 1 and report.succeeded == 0 and not report.work_remains
    retry_at = attempts[0] + 40_000
    assert clock.now_ms() < attempts[0] + 5_000
    assert scheduled_at(scheduler) == wake_schedule.wake_time_ms(retry_at)
    clock.advance((scheduled_at(scheduler) - clock.now_ms()) / 1000)  # the schedule fires: a worker is woken
    report = Worker(backing_off, flaky, capacity=1, owner="w2", clock=clock, rng=Ceiling(), stopped=wakeups.ensure).run("work", 60)
    assert report.succeeded == 1 and retry_at <= attempts[1] < retry_at + 1_500


def test_without_schedules_a_worker_still_waits_for_a_delay_within_its_budget(store, clock):
    create(store, clock, delay=30)
    report = Worker(store, lambda task: None, capacity=2, owner="w", clock=clock).run("work", 60)
    assert report.claimed == 1  # no schedule configured: as before


def test_the_safety_net_sets_a_lost_schedule_again(services: Services, store, wakeups, scheduler, clock):
    create(store, clock, delay=300)
    run_worker(store, wakeups, clock)
    at = scheduled_at(scheduler)
    scheduler.delete_schedule(Name=NAME, GroupName=GROUP)  # lost (deleted by hand, or never set)
    assert store.read_record("work").wake_at_ms == at  # the record still says covered: no stop would see it
    assert run_safety_net(services, wakeups) == []
    assert scheduled_at(scheduler) == at
    scheduler.calls.clear()
    run_safety_net(services, wakeups)  # there: one GetSchedule, nothing else
    assert scheduler_requests(scheduler) == ["get_schedule"]


trigger = load_function("trigger")


def run_trigger(event: dict[str, Any], svc: Services) -> dict[str, Any]:
    original = trigger.services
    trigger.services = lambda: svc
    try:
        return trigger.lambda_handler(event, LambdaContextStub(function_name="Trigger"))
    finally:
        trigger.services = original


def test_the_schedules_input_makes_trigger_wake_the_queue(services, topics, store, clock):
    event = {"wakeQueue": "work", "reason": "delayed-head"}
    assert run_trigger(event, services) == {"woken": ["work"]}
    assert topics.wakeups() == ["work"]
    with pytest.raises(Exception, match="not configured"):
        run_trigger({"wakeQueue": "nope", "reason": "delayed-head"}, services)


def test_stores_on_both_engines_keep_only_the_earlier_wake_at(store, clock):
    now = clock.now_ms()
    assert store.set_wake_at("work", now + 50_000, now)
    assert not store.set_wake_at("work", now + 90_000, now)  # later: covered
    assert store.set_wake_at("work", now + 20_000, now)  # earlier: moves
    assert store.set_wake_at("work", now + 90_000, now + 30_000)  # the recorded one has fired
    store.clear_wake_at("work", now + 1)  # not ours: kept
    assert store.read_record("work").wake_at_ms == now + 90_000
    store.clear_wake_at("work", now + 90_000)
    assert store.read_record("work").wake_at_ms is None


