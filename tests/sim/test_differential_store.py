"""The fake DynamoDB answers the product's own store calls as the engine does (moto; DynamoDB Local too on
``--dynamodb=local|both``): every request's answer, every error, and the table left behind (tests/sim/differential.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.settings import Settings
from taskqueue.core.states import TaskStatus
from taskqueue.store import TaskStore
from tests.conftest import TABLE
from tests.sim.differential import all_items, assert_same_answers, run_both
from tests.support import FakeClock, create_queue_table

pytestmark = pytest.mark.dynamodb_engines


def _settings(**overrides: Any) -> Settings:
    return Settings(**{"queue_table_name": TABLE, "retry_base_seconds": 0.0, **overrides})


def _create(store: TaskStore, clock: FakeClock, count: int, **fields: Any) -> list[str]:
    body = {"queue": "work", "count": count, "ttlSeconds": 600, "payload": {"n": 1}, **fields}
    tasks = new_tasks(parse_create_request(body, store.settings), clock.now_ms(), store.settings)
    store.put_tasks(tasks)
    return [t.task_id for t in tasks]


def _setup(client: Any) -> None:
    create_queue_table(client, TABLE)


def _compare(scenario: Any, start_ms: int) -> Any:
    on_engine, on_fake, engine_outcome, fake_outcome, fake = run_both(scenario, _setup, start_ms)
    assert_same_answers(on_engine, on_fake)
    assert fake_outcome == engine_outcome
    import boto3

    assert all_items(fake, TABLE) == all_items(boto3.client("dynamodb"), TABLE)
    return fake_outcome


def worker_lifecycle(client: Any, clock: FakeClock) -> list[Any]:
    """Create, look, claim (twice: the second loses), renew, complete, fail, release with a backoff, recover an
    expired lease, shed an expired task."""
    store = TaskStore(client, _settings(max_attempts=2), clock)
    outcome: list[Any] = []
    _create(store, clock, 4)
    _create(store, clock, 2, priority=5)
    short = _create(store, clock, 1, ttlSeconds=2)
    clock.advance(0.5)
    candidates = store.candidates("work", 10)
    outcome.append([c.task_id for c in candidates])
    claimed = [store.claim(c, "w1") for c in candidates[:4]]
    outcome.append([t.status.value if t else None for t in claimed])
    outcome.append(store.claim(candidates[0], "w2"))  # already taken: None
    first, second, third, fourth = claimed
    outcome.append(store.renew_lease(first, "w1") is not None)
    outcome.append(store.renew_lease(first, "intruder"))
    outcome.append(store.complete(first, "w1", {"ok": True}))
    outcome.append(store.complete(first, "w1", {"ok": True}))  # twice: refused
    outcome.append(store.fail(second, "w1", "boom"))
    outcome.append(store.release(third, "w1", not_before_ms=clock.now_ms() + 5000, error="later"))
    clock.advance(3)  # the short task expired
    outcome.append([c.task_id for c in store.candidates("work", 10)])
    outcome.append(store.drain_shed())
    clock.advance(400)  # past fourth's lease, and third's backoff
    outcome.append(store.recover_expired_leases("work"))
    outcome.append([c.task_id for c in store.candidates("work", 10)])
    outcome.append(store.get(short[0]).status.value)
    outcome.append(store.get(fourth.task_id).status.value)
    return outcome


def operator_calls(client: Any, clock: FakeClock) -> list[Any]:
    """What taskq runs through the store: list, stats, counts, peek, cancel, reprioritize, touch, redrive, dead
    letters, purge, pause and resume."""
    store = TaskStore(client, _settings(max_attempts=1), clock)
    outcome: list[Any] = []
    ids = _create(store, clock, 6)
    clock.advance(1)
    outcome.append(store.cancel(ids[0]).status.value)
    outcome.append(store.reprioritize(ids[1], 9).priority)
    clock.advance(1)
    outcome.append(store.touch(ids[2]).enqueued_ms)
    taken = store.claim(store.candidates("work", 1)[0], "w1")
    assert taken is not None
    store.fail(taken, "w1", "dead")
    outcome.append(sorted(store.dead_letters("work")))
    outcome.append(store.redrive(taken.task_id).status.value)
    page = store.list_tasks("work", TaskStatus.PENDING, limit=2)
    outcome.append([t.task_id for t in page.tasks])
    outcome.append([t.task_id for t in store.list_tasks("work", TaskStatus.PENDING, limit=2,
                                                       page_token=page.next_token).tasks])
    outcome.append([(s.queue, s.counts, s.claimable, s.delayed) for s in store.stats(["work"])])
    outcome.append(store.count("work", TaskStatus.PENDING))
    outcome.append(store.depth("work").ready)
    peeked = store.peek("work")
    outcome.append(peeked.task_id if peeked else None)
    store.pause("work")
    outcome.append(store.is_paused("work"))
    store.resume("work")
    outcome.append(store.is_paused("work"))
    outcome.append(store.purge("work", TaskStatus.CANCELLED).deleted)
    return outcome


def slots_and_groups(client: Any, clock: FakeClock) -> list[Any]:
    """The running limit's slots (taken, freed) and grouped tasks on fair share's ring."""
    store = TaskStore(client, _settings(running_limit=2), clock)
    outcome: list[Any] = []
    until_ms = clock.now_ms() + 10_000
    slots = store.acquire_slots("work", "w1", 3, until_ms)
    outcome.append(len(slots))
    outcome.append(len(store.acquire_slots("work", "w2", 1, until_ms)))
    outcome.append(store.free_token(slots[1]))
    outcome.append(len(store.acquire_slots("work", "w2", 1, until_ms)))
    for group in ("red", "blue"):
        _create(store, clock, 2, group=group)
    clock.advance(1)
    outcome.append(sorted(c.group or "" for c in store.candidates("work", 10)))
    return outcome


@pytest.mark.parametrize("scenario", [worker_lifecycle, operator_calls, slots_and_groups])
def test_the_fake_answers_the_stores_requests_as_the_engine_does(scenario: Any, aws: None, clock: FakeClock) -> None:
    outcome = _compare(scenario, clock.now_ms())
    assert outcome  # the scenario ran to its end on both
