"""The queue metrics on both DynamoDB engines: the bounded reads (taskqueue/store/gauges.py) give the oldest waiting
task's age and the waiting / running / delayed counts of a queue, its groups' and the noisy ones', exact below the cap
and floors past it (the oldest still read from the partition's tail); the safety net publishes them as EMF each run
while the queue holds tasks (and its trailing zeros), nothing for an idle queue."""

from __future__ import annotations

import dataclasses

import pytest

from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.observe import queue_metrics
from taskqueue.store import TaskStore
from tests.support import LambdaContextStub, emitted, load_event, load_function

pytestmark = pytest.mark.dynamodb_engines

trigger = load_function("trigger")


def with_settings(store: TaskStore, **changes) -> TaskStore:
    return TaskStore(store._db, dataclasses.replace(store.settings, **changes), store._clock)


def create(store: TaskStore, now_ms: int, count: int = 1, queue: str = "work", **fields) -> list[str]:
    request = parse_create_request({"queue": queue, "count": count, **fields}, store.settings)
    tasks = new_tasks(request, now_ms, store.settings)
    store.put_tasks(tasks)
    return [t.task_id for t in tasks]


def claim(store: TaskStore, task_id: str, queue: str = "work") -> None:
    candidate = next(c for c in store.candidates(queue, 100) if c.task_id == task_id)
    assert store.claim(candidate, "w1") is not None


def test_a_queues_oldest_waiting_age_and_its_waiting_running_and_delayed_counts(store, clock):
    start = clock.now_ms()
    oldest = create(store, start, 1)
    clock.advance(30)
    create(store, clock.now_ms(), 3)
    running = create(store, clock.now_ms(), 1)
    claim(store, running[0])
    create(store, clock.now_ms(), 2, delaySeconds=60)
    create(store, clock.now_ms(), 1, ttlSeconds=5)  # will expire: counted nowhere
    clock.advance(10)
    gauges = store.queue_gauges("work")
    assert (gauges.total.waiting, gauges.total.running, gauges.total.delayed) == (4, 1, 2)
    assert gauges.total.age_seconds(gauges.now_ms) == 40.0 and gauges.total.complete
    assert gauges.groups == {} and oldest  # no named group: no group figures
    clock.advance(60)  # the delayed ones fall due: waiting now, and older than any
    assert (store.queue_gauges("work").total.waiting, store.queue_gauges("work").total.delayed) == (6, 0)


def test_past_the_cap_the_counts_are_floors_and_the_oldest_comes_from_the_tail(store, clock):
    for _ in range(8):
        create(store, clock.now_ms())
        clock.advance(1)
    lifo = store.queue_gauges("work", cap=5, tail=3)
    assert (lifo.total.waiting, lifo.total.complete) == (5, False)
    assert lifo.total.age_seconds(lifo.now_ms) == 8.0  # the LIFO queue's oldest, at the tail
    for _ in range(8):
        create(store, clock.now_ms(), queue="calls", payload={"preferences": {}})
        clock.advance(1)
    fifo = store.queue_gauges("calls", cap=5, tail=3)
    assert fifo.total.waiting == 5 and fifo.total.age_seconds(fifo.now_ms) == 8.0  # the FIFO queue's, at its head


def test_groups_noisy_and_quiet_across_shards(store, clock):
    store = with_settings(store, queue_shards=2)
    create(store, clock.now_ms(), 2)
    create(store, clock.now_ms(), 12, group="acme")
    clock.advance(20)
    create(store, clock.now_ms(), 1, group="globex")
    create(store, clock.now_ms(), 1, group="initech", delaySeconds=30)
    gauges = store.queue_gauges("work")
    assert set(gauges.groups) == {"default", "acme", "globex", "initech"}
    assert gauges.total.waiting == 15 and gauges.total.delayed == 1
    assert gauges.noisy() == ["acme"] and gauges.groups["acme"].age_seconds(gauges.now_ms) == 20.0
    quiet = gauges.quiet()
    assert (quiet.waiting, quiet.delayed, quiet.age_seconds(gauges.now_ms)) == (3, 1, 20.0)
    capped = store.queue_gauges("work", max_groups=1)
    assert not capped.groups_complete and len(capped.groups) == 2


def safety_net(services, capsys) -> list:
    trigger.services.cache_clear()
    original = trigger.services
    trigger.services = lambda: services
    try:
        trigger.lambda_handler(load_event("trigger-safety-net.json"), LambdaContextStub(function_name="Trigger"))
    finally:
        trigger.services = original
    return [m for m in emitted(capsys.readouterr().out) if m.name.startswith(("Oldest", "Tasks", "Noisy"))
            and m.name not in ("TasksShed", "TasksFailed")]


def test_the_safety_net_publishes_a_busy_queue_and_its_trailing_zeros_not_an_idle_one(services, clock, capsys,
                                                                                      monkeypatch):
    monkeypatch.setattr(queue_metrics, "_published", queue_metrics.Published())
    assert safety_net(services, capsys) == []  # both queues idle: no metric at all
    create(services.store, clock.now_ms(), 3, group="acme")
    create(services.store, clock.now_ms(), 1)
    clock.advance(12)
    published = safety_net(services, capsys)
    by_name = {(m.name, m.dims.get("group")): m for m in published if m.dims["queue"] == "work"}
    assert by_name[("OldestTaskAge", None)].value == 12.0 and by_name[("TasksWaiting", None)].value == 4
    assert by_name[("NoisyGroups", None)].value == 1 and by_name[("TasksWaiting", "acme")].value == 3
    assert by_name[("TasksWaitingInQuietGroups", None)].value == 1
    assert by_name[("OldestTaskAge", None)].namespace == "TaskQueues"
    assert all(m.dims["service"] == "taskqueue" for m in published)
    assert not [m for m in published if m.dims["queue"] == "calls"]  # the idle queue publishes nothing
    for task in services.store.list_tasks("work", "PENDING", 10).tasks + services.store.list_tasks(
            "work", "PENDING", 10, group="acme").tasks:
        services.store.cancel(task.task_id)
    clock.advance(60)
    zeros = safety_net(services, capsys)  # drained: zeros, so graphs and alarms see it
    assert {m.name: m.value for m in zeros if "group" not in m.dims}["TasksWaiting"] == 0
    clock.advance(5 * 60)
    assert safety_net(services, capsys) == []  # and then nothing
