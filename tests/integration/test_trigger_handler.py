"""Trigger: the safety net (every SafetyNetScheduleRate) and a queue's scheduled wake-up at its delayed head."""

from typing import Any

import pytest

from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.services import Services
from tests.support import LambdaContextStub, emitted, load_event, load_function

app = load_function("trigger")


def run(event: dict[str, Any], svc: Services) -> dict[str, Any]:
    app.services.cache_clear()
    original = app.services
    app.services = lambda: svc  # the handler's dependencies, handed in
    try:
        return app.lambda_handler(event, LambdaContextStub(function_name="Trigger"))
    finally:
        app.services = original


def test_safety_net_wakes_only_queues_with_claimable_tasks(services, topics, clock):
    assert run(load_event("trigger-safety-net.json"), services) == {"woken": []}
    tasks = new_tasks(parse_create_request({"queue": "calls"}, services.settings), clock.now_ms(), services.settings)
    services.store.put_tasks(tasks)
    assert run(load_event("trigger-safety-net.json"), services) == {"woken": ["calls"]}
    assert topics.wakeups() == ["calls"]


def test_safety_net_leaves_a_paused_queue_asleep(services, topics, clock):
    services.store.put_tasks(new_tasks(parse_create_request({}, services.settings), clock.now_ms(), services.settings))
    services.store.pause("work")
    assert run(load_event("trigger-safety-net.json"), services) == {"woken": []}
    assert topics.wakeups() == []


def test_safety_net_sheds_expired_entries_hiding_live_work_and_counts_them_once(services, topics, clock, capsys):
    expired = new_tasks(parse_create_request({"queue": "calls", "count": 30, "ttlSeconds": 5}, services.settings),
                        clock.now_ms(), services.settings)
    services.store.put_tasks(expired)
    clock.advance(1)
    live = new_tasks(parse_create_request({"queue": "calls"}, services.settings), clock.now_ms(), services.settings)
    services.store.put_tasks(live)
    clock.advance(10)  # DynamoDB's TTL has not deleted the 30 expired calls: they sit at the FIFO head
    capsys.readouterr()
    assert run(load_event("trigger-safety-net.json"), services) == {"woken": ["calls"]}
    shed = [(v, d) for name, d, v, *_ in emitted(capsys.readouterr().out) if name == "TasksShed"]
    assert shed == [(30, {"service": "taskqueue", "queue": "calls"})]
    assert {services.store.get(t.task_id).status.value for t in expired} == {"SHED"}
    # The live call is still there: the next run wakes the queue again, and counts no shed twice.
    assert run(load_event("trigger-safety-net.json"), services) == {"woken": ["calls"]}
    assert [n for n, *_ in emitted(capsys.readouterr().out)].count("TasksShed") == 0


def test_safety_net_recovers_a_dead_workers_lease_so_the_stream_hands_the_task_on(services, topics, clock):
    [task] = new_tasks(parse_create_request({}, services.settings), clock.now_ms(), services.settings)
    services.store.put_tasks([task])
    [candidate] = services.store.candidates("work", 1)
    assert services.store.claim(candidate, "dead-worker") is not None
    clock.advance(services.settings.lease_seconds + 1)
    run(load_event("trigger-safety-net.json"), services)
    assert services.store.get(task.task_id).status.value == "PENDING"  # a MODIFY into PENDING: the stream's start


def test_a_scheduled_wake_up_at_the_delayed_head_wakes_its_queue(services, topics):
    assert run(load_event("trigger-delayed-head.json"), services) == {"woken": ["work"]}
    assert topics.wakeups() == ["work"]


@pytest.mark.parametrize("event", [{"hello": "world"}, {"Records": [{"eventSource": "aws:dynamodb"}]},
                                   {"wakeQueue": "work", "reason": "other"}])
def test_unknown_event_is_refused_with_what_it_accepts(services, event):
    with pytest.raises(Exception, match="Trigger takes a scheduled event"):
        run(event, services)
