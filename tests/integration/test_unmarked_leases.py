"""A worker's claim leaves the lease off the task's ReadyIndex entry while its execution environment's tasks end
quickly (one index write fewer a task), on both DynamoDB engines (store/unmarked_leases.py).

A claim that marks its lease on the entry (``notBefore``, a projected attribute) costs one index write, so that other
readers tell a running task from a waiting one. On a queue without groups a worker claims without the mark and marks
only a task still running LEASE_MARK_AFTER_SECONDS later. What the mark did for others still holds: its own looks
pass the task over, another worker loses one claim on it and passes it over too (marking it if its owner should have
done so by then), and a dead worker's lease is recovered.
"""

from __future__ import annotations

import time

import pytest

from taskqueue.core.states import TaskStatus
from taskqueue.store import TaskStore
from taskqueue.store.unmarked_leases import LEASE_MARK_AFTER_SECONDS
from taskqueue.work.lease_marks import MarkChoice
from taskqueue.work.worker import Worker
from tests.integration.test_delayed_head import create, recorded

pytestmark = pytest.mark.dynamodb_engines


def claims(client) -> list[dict]:
    """The claims a recorded client sent (PENDING -> TAKEN updates)."""
    return [kw for op, kw in client.requests
            if op == "update_item" and kw["ExpressionAttributeValues"].get(":to", {}).get("S") == "TAKEN"
            and kw["ExpressionAttributeValues"][":from"]["S"] == "PENDING"]


def sets_lease_mark(request: dict) -> bool:
    update = request["UpdateExpression"].split(" REMOVE ")[0]
    names = request["ExpressionAttributeNames"]
    return any(names[name] == "notBefore" for name in names if name.startswith("#s") and name in update)


def lease_mark(store: TaskStore, task_id: str) -> int | None:
    """The lease marked on the task's index entry (``notBefore`` of a TAKEN item), if any."""
    item = store._db.get_item(TableName=store.settings.queue_table_name, Key={"taskId": {"S": task_id}})["Item"]
    return int(item["notBefore"]["N"]) if "notBefore" in item else None


def other_store(store: TaskStore) -> tuple[TaskStore, object]:
    """Another worker's store on the same table (its own registry), recording its requests."""
    return recorded(store)


def test_a_workers_claims_of_quick_tasks_leave_the_index_entry_as_it_was(store, clock):
    worker_store, client = recorded(store)
    create(worker_store, clock, 5)
    report = Worker(worker_store, lambda task: None, capacity=3, owner="w", clock=clock).run("work", 30)
    assert report.succeeded == 5 and report.lost == 0
    sent = claims(client)
    assert len(sent) == 5 and not any(sets_lease_mark(kw) for kw in sent)  # before: every claim set notBefore
    assert worker_store.depth("work").pending == 0


def test_its_own_looks_pass_an_unmarked_running_task_over(store, clock):
    [task_id] = create(store, clock)
    [candidate] = store.candidates("work", 5)
    task = store.claim(candidate, "w", mark=False)
    assert task is not None and lease_mark(store, task_id) is None
    assert store.candidates("work", 5) == []  # without the registry: the entry looks like a waiting task's
    assert not store.has_claimable("work")


def test_a_task_still_running_a_moment_after_its_claim_gets_its_lease_marked(store, clock):
    [task_id] = create(store, clock)
    task = store.claim(store.candidates("work", 1)[0], "w", mark=False)
    assert store.mark_leases("w") == 0  # ending now, it would have cost no mark
    assert store.depth("work").taken == 0  # the board counts it as waiting until marked
    clock.advance(LEASE_MARK_AFTER_SECONDS)
    assert store.mark_leases("w") == 1
    marked = store.get(task_id)
    assert lease_mark(store, task_id) == marked.lease_expires_ms == task.lease_expires_ms
    assert store.depth("work").taken == 1
    assert store.complete(marked, "w")
    assert store.depth("work").taken == 0


def test_a_renewal_keeps_an_unmarked_lease_unmarked(store, clock):
    [task_id] = create(store, clock)
    task = store.claim(store.candidates("work", 1)[0], "w", mark=False)
    clock.advance(1)
    assert store.renew_lease(task, "w") is not None
    assert lease_mark(store, task_id) is None
    clock.advance(LEASE_MARK_AFTER_SECONDS)
    assert store.mark_leases("w") == 1  # the renewed expiry is the one marked
    assert lease_mark(store, task_id) == store.get(task_id).lease_expires_ms > task.lease_expires_ms


def test_another_worker_loses_one_claim_on_an_unmarked_task_then_passes_it_over(store, clock):
    create(store, clock)
    store.claim(store.candidates("work", 1)[0], "w", mark=False)
    other, client = other_store(store)
    [seen] = other.candidates("work", 5)  # to another reader the entry looks like a waiting task's
    assert other.claim(seen, "other") is None
    assert other.candidates("work", 5) == [] and not other.has_claimable("work")
    assert len(claims(client)) == 1  # one refused write, not one per look


def test_a_dead_workers_unmarked_task_is_marked_by_the_next_claimer_then_recovered(store, clock, settings):
    [task_id] = create(store, clock)
    store.claim(store.candidates("work", 1)[0], "dead", mark=False)  # its worker dies before its mark
    clock.advance(2 * LEASE_MARK_AFTER_SECONDS)
    other, _ = other_store(store)
    assert other.claim(other.candidates("work", 1)[0], "next") is None
    task = store.get(task_id)
    assert task.status is TaskStatus.TAKEN and lease_mark(store, task_id) == task.lease_expires_ms  # marked for all
    clock.advance(settings.lease_seconds)
    assert other.expired_leases("work") == [task_id]  # lease recovery finds it, as any marked lease
    assert other.recover_expired_leases("work")[TaskStatus.PENDING.value] == 1


def test_a_lapsed_unmarked_lease_is_recovered_by_the_claim_that_meets_it(store, clock, settings):
    [task_id] = create(store, clock)
    store.claim(store.candidates("work", 1)[0], "dead", mark=False)
    clock.advance(settings.lease_seconds + 1)
    other, _ = other_store(store)
    [candidate] = other.candidates("work", 1)
    assert other.claim(candidate, "next") is None  # refused: it was TAKEN; the refusal returns it to PENDING
    recovered = store.get(task_id)
    assert recovered.status is TaskStatus.PENDING and recovered.attempts == 1
    task = other.claim(other.candidates("work", 1)[0], "next")
    assert task is not None and task.attempts == 2


def _run_one_long_task(worker_store: TaskStore, store: TaskStore, clock) -> tuple[object, list]:
    """A worker runs one task that lasts past LEASE_MARK_AFTER_SECONDS (the runner moves the fake clock, then
    waits, in real time, for the worker's heartbeat to mark the lease)."""
    [task_id] = create(worker_store, clock)
    seen: list = []

    def runner(task) -> None:
        clock.advance(LEASE_MARK_AFTER_SECONDS + 0.5)
        deadline = time.monotonic() + 10
        while lease_mark(store, task_id) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        seen.append(lease_mark(store, task_id))

    report = Worker(worker_store, runner, capacity=1, owner="w", clock=clock).run("work", 30)
    return report, seen


def test_a_task_that_runs_on_gets_its_lease_marked_by_the_heartbeat(store, clock):
    worker_store, client = recorded(store)
    report, seen = _run_one_long_task(worker_store, store, clock)
    assert report.succeeded == 1 and not any(sets_lease_mark(kw) for kw in claims(client))
    assert seen and seen[0] is not None  # marked while it ran: the board counts it TAKEN from then on


def test_a_lease_mark_refused_past_the_sdks_retries_is_tried_again_at_the_next_beat(store, clock):
    worker_store, client = recorded(store)
    marks = lambda kw: "notBefore" in kw.get("ExpressionAttributeNames", {}).values() and ":expires" in kw.get(  # noqa: E731
        "ExpressionAttributeValues", {})
    client.fail("update_item", "ProvisionedThroughputExceededException", when=marks)
    report, seen = _run_one_long_task(worker_store, store, clock)
    assert ("update_item", "ProvisionedThroughputExceededException") in client.raised
    assert report.succeeded == 1 and report.retried >= 1
    assert seen and seen[0] is not None


def test_a_worker_whose_tasks_lately_ran_on_claims_with_the_mark(store, clock):
    # A late mark costs a write of its own: with tasks that run past it, marking at the claim is cheaper.
    marks = MarkChoice()
    marks.ran(LEASE_MARK_AFTER_SECONDS + 1)
    worker_store, client = recorded(store)
    create(worker_store, clock, 2)
    report = Worker(worker_store, lambda task: None, capacity=3, owner="w", clock=clock, marks=marks).run("work", 30)
    assert report.succeeded == 2
    assert claims(client) and all(sets_lease_mark(kw) for kw in claims(client))


def test_a_task_its_owner_releases_is_seen_again_by_another_worker_within_seconds(store, clock):
    [task_id] = create(store, clock)
    task = store.claim(store.candidates("work", 1)[0], "w", mark=False)
    other, _ = other_store(store)
    assert other.claim(other.candidates("work", 1)[0], "other") is None
    assert store.release(task, "w", error="the legacy system is busy")  # a retry at its place, no backoff
    assert other.candidates("work", 5) == []  # passed over a moment longer ...
    clock.advance(2 * LEASE_MARK_AFTER_SECONDS)
    assert [c.task_id for c in other.candidates("work", 5)] == [task_id]  # ... not for the whole lease it saw


def test_an_unmarked_task_whose_outcome_was_never_written_is_recovered_by_its_own_store_once_its_lease_lapses(
    store, clock, settings
):
    # Its outcome refused past every retry: the store that claimed it must not pass it over for as long as it lives.
    [task_id] = create(store, clock)
    store.claim(store.candidates("work", 1)[0], "w", mark=False)
    assert store.candidates("work", 1) == []
    clock.advance(settings.lease_seconds + 1)
    [candidate] = store.candidates("work", 1)
    assert candidate.task_id == task_id
    assert store.claim(candidate, "w") is None  # refused (TAKEN, lapsed): recovered to PENDING
    task = store.claim(store.candidates("work", 1)[0], "w")
    assert task is not None and task.attempts == 2
