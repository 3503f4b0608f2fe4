"""The store under what DynamoDB does and the emulator does not: TTL deletes late (or on time, under a
running task), index entries that stay after their task expired, transactions in conflict, throttling past
the SDK's retries. Each fault is produced here (a TTL that never sweeps, a sweep by the template's TTL
attribute, a client that raises the real error code)."""

from typing import Any

import pytest
from botocore.exceptions import ClientError

from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.states import TaskStatus
from taskqueue.matching.agents import AgentStatus, AgentStore
from taskqueue.matching.matcher import Matcher
from taskqueue.matching.rules import MatchSettings
from taskqueue.store import StoreError, TaskStore
from tests.agent_support import AGENT_TABLE, agent_table, create_calls, profile  # noqa: F401 (fixture)
from tests.conftest import TABLE
from tests.faults import FaultyClient, on_tasks, ttl_sweep

CONFLICT = "TransactionConflictException"


def create(store: TaskStore, clock, n: int = 1, **body: Any) -> list[str]:
    tasks = new_tasks(parse_create_request({"count": n, **body}, store.settings), clock.now_ms(), store.settings)
    store.put_tasks(tasks)
    return [t.task_id for t in tasks]


def take(store: TaskStore, queue: str = "work", owner: str = "worker-1"):
    return store.claim(store.candidates(queue, 1)[0], owner)


# ---- 1. expired or not-yet-due entries never hide live work -------------------------------------------


def test_hung_up_callers_at_the_fifo_head_do_not_hide_a_live_caller(store, clock):
    # DynamoDB has not deleted them (TTL deletes "within a few days"): they sit at the head of the FIFO queue.
    hung_up = create(store, clock, 225, queue="calls", ttlSeconds=10)
    clock.advance(1)
    (live,) = create(store, clock, queue="calls", ttlSeconds=3600)
    clock.advance(20)
    assert store.has_claimable("calls")
    assert [c.task_id for c in store.candidates("calls", 5)] == [live]
    # The reader shed each expired entry it met, once: out of the index, counted exactly once.
    assert store.drain_shed() == {"calls": 225}
    assert {store.get(t).status for t in hung_up} == {TaskStatus.SHED}
    assert [c.task_id for c in store.candidates("calls", 5)] == [live] and store.drain_shed() == {}


def test_delayed_tasks_do_not_hide_a_due_task_of_lower_priority(store, clock):
    delayed = create(store, clock, 225, priority=5, delaySeconds=600)
    (due,) = create(store, clock, priority=0)
    assert [c.task_id for c in store.candidates("work", 3)] == [due]
    assert store.has_claimable("work")
    assert store.next_due_ms("work") == clock.now_ms() + 600_000
    # Once due, delayed tasks take their place by priority again: ahead of the priority-0 task.
    clock.advance(601)
    first = store.candidates("work", 3)
    assert len(first) == 3 and {c.task_id for c in first} <= set(delayed)
    assert take(store).task_id in delayed


def test_next_due_ms_reports_a_retry_that_fell_due_between_two_reads(store, clock):
    create(store, clock)
    task = take(store)
    assert store.release(task, "worker-1", not_before_ms=clock.now_ms() + 1000)
    clock.advance(2)  # due now: a worker that found no candidate a moment ago must not stop "empty"
    assert store.next_due_ms("work") == task.updated_ms + 1000
    assert [c.task_id for c in store.candidates("work", 1)] == [task.task_id]


def test_a_retry_past_its_ttl_is_shed_not_waited_for(store, clock):
    create(store, clock, ttlSeconds=30)
    task = take(store)
    assert store.release(task, "worker-1", not_before_ms=clock.now_ms() + 60_000)  # due after its ttl
    assert store.next_due_ms("work") is None  # nothing a worker could wait for
    clock.advance(61)
    assert store.candidates("work", 1) == []
    assert store.get(task.task_id).status is TaskStatus.SHED and store.drain_shed() == {"work": 1}


# ---- 4. the shed deadline and the deletion time are separate ------------------------------------------


def test_a_running_task_outlives_its_ttl_until_its_worker_finishes(store, clock, dynamodb):
    (task_id,) = create(store, clock, ttlSeconds=10)
    task = take(store)
    clock.advance(60)  # past the task's ttl, inside its lease: a TTL that sweeps on time
    assert task_id not in ttl_sweep(dynamodb, TABLE, clock.now_ms() // 1000)
    assert store.complete(task, "worker-1", {"done": True})
    done = store.get(task_id)
    assert done.status is TaskStatus.SUCCESS and done.ttl == task.ttl  # the shed deadline is kept
    assert done.delete_at == clock.now_ms() // 1000 + store.settings.retention_seconds


def test_a_waiting_task_is_deleted_at_its_ttl_and_a_claim_moves_the_deletion_past_the_lease(store, clock, dynamodb):
    waiting, running = create(store, clock, 2, ttlSeconds=10)
    task = store.claim(next(c for c in store.candidates("work", 2) if c.task_id == running), "worker-1")
    assert task.delete_at >= task.lease_expires_ms // 1000 + store.settings.retention_seconds
    clock.advance(11)
    assert ttl_sweep(dynamodb, TABLE, clock.now_ms() // 1000) == [waiting]


def test_a_lease_renewal_moves_the_deletion_time_and_is_owner_only_and_extend_only(store, clock):
    create(store, clock)
    task = take(store)
    clock.advance(100)
    expires = store.renew_lease(task, "worker-1")
    assert expires == clock.now_ms() + store.settings.lease_seconds * 1000
    renewed = store.get(task.task_id)
    assert renewed.lease_expires_ms == expires and renewed.delete_at > expires // 1000
    assert store.renew_lease(task, "worker-2") is None  # not the owner
    assert store.renew_lease(task, "worker-1", seconds=10) is None  # would shorten it: refused
    clock.advance(store.settings.lease_seconds + 1)
    assert store.renew_lease(task, "worker-1") is None  # lapsed: recovery owns it now
    assert store.get(task.task_id).lease_expires_ms == expires


# ---- 5. transaction conflicts are lost races, retried with bounded backoff -------------------------------


@pytest.fixture
def faulty(dynamodb, settings, clock) -> tuple[FaultyClient, TaskStore]:
    client = FaultyClient(dynamodb)
    return client, TaskStore(client, settings, clock)


def test_a_claim_in_conflict_with_a_transaction_is_retried(faulty, clock):
    client, store = faulty
    create(store, clock)
    candidate = store.candidates("work", 1)[0]
    client.fail("update_item", CONFLICT, CONFLICT)
    task = store.claim(candidate, "worker-1")
    assert task is not None and task.status is TaskStatus.TAKEN
    assert client.raised == [("update_item", CONFLICT)] * 2


def test_a_conflict_that_persists_is_a_lost_race_on_every_write_path(faulty, clock):
    client, store = faulty
    create(store, clock, 2)
    first, second = store.candidates("work", 2)
    client.fail("update_item", *[CONFLICT] * 4)
    assert store.claim(first, "worker-1") is None  # lost, not an error
    task = store.claim(second, "worker-1")
    client.fail("update_item", *[CONFLICT] * 4)
    assert store.complete(task, "worker-1") is False
    client.fail("update_item", CONFLICT)
    assert store.complete(task, "worker-1") is True


def test_throttling_past_the_sdk_retries_is_a_store_error_that_says_so(faulty, clock):
    client, store = faulty
    create(store, clock)
    client.fail("query", "ProvisionedThroughputExceededException")
    with pytest.raises(StoreError, match="throttling .* even after retries"):
        store.candidates("work", 1)


def test_batch_get_that_keeps_returning_unprocessed_keys_is_an_error_not_a_short_answer(dynamodb, settings, clock):
    class Unprocessing(FaultyClient):
        def batch_get_item(self, RequestItems: Any) -> dict[str, Any]:
            return {"Responses": {}, "UnprocessedKeys": RequestItems}

    store = TaskStore(Unprocessing(dynamodb), settings, clock)
    create(store, clock, 3)
    with pytest.raises(StoreError, match="still unread after 8 BatchGetItem rounds"):
        store.list_tasks("work", "PENDING")


class ConflictOnTheCall(FaultyClient):
    """DynamoDB cancels the next ``times`` match transactions because another transaction is in flight on the call
    (its first item): TransactionCanceledException with reason TransactionConflict on that item, None elsewhere."""

    def __init__(self, client: Any, times: int) -> None:
        super().__init__(client)
        self.times = times

    def transact_write_items(self, TransactItems: list[dict[str, Any]], **request: Any) -> dict[str, Any]:
        if self.times > 0:
            self.times -= 1
            reasons = [{"Code": "TransactionConflict"}] + [{"Code": "None"}] * (len(TransactItems) - 1)
            raise ClientError({"Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
                               "CancellationReasons": reasons}, "TransactWriteItems")
        return self._client.transact_write_items(TransactItems=TransactItems, **request)


def test_a_matcher_run_survives_a_conflict_on_the_call_it_matches(settings, clock, dynamodb, agent_table):
    store = TaskStore(dynamodb, settings, clock)
    conflicting = ConflictOnTheCall(agent_table, times=0)
    agents = AgentStore(conflicting, MatchSettings(agent_table_name=AGENT_TABLE), store, clock)
    agents.put_available(profile("ana", ["fr"]))
    (call,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    conflicting.times = 1
    report = Matcher(store, agents, owner="matcher-1", clock=clock).run(5)  # another transaction holds the call
    assert (report.matched, report.lost, report.conflicts) == (0, 1, 1) and store.get(call).status is TaskStatus.PENDING
    assert agents.get("ana").status is AgentStatus.QUEUED  # nothing of the cancelled transaction was written
    again = Matcher(store, agents, owner="matcher-1", clock=clock).run(5)
    assert again.matched == 1 and store.get(call).result["agentId"] == "ana"


def test_a_match_transaction_that_keeps_meeting_conflicts_is_given_up_and_tail_called(settings, clock, dynamodb, agent_table):
    store = TaskStore(dynamodb, settings, clock)
    conflicting = FaultyClient(agent_table)
    agents = AgentStore(conflicting, MatchSettings(agent_table_name=AGENT_TABLE, retry_base_ms=0), store, clock)
    agents.put_available(profile("ana", ["fr"]))
    (call,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    conflicting.fail("transact_write_items", *[CONFLICT] * 5)  # the whole request met a transaction in flight, 5 times
    report = Matcher(store, agents, owner="matcher-1", clock=clock).run(5)
    assert (report.matched, report.conflicts, report.gave_up, report.work_remains) == (0, 5, 1, True)
    assert store.get(call).status is TaskStatus.PENDING and store.get(call).attempts == 0
    assert Matcher(store, agents, owner="matcher-1", clock=clock).run(5).matched == 1


def test_a_call_no_idle_agent_fits_costs_no_write(
    settings, clock, dynamodb, agent_table
):
    client = FaultyClient(dynamodb)
    store = TaskStore(client, settings, clock)
    agents = AgentStore(agent_table, MatchSettings(agent_table_name=AGENT_TABLE), store, clock)
    agents.put_available(profile("ana", ["en"]))
    calls = create_calls(store, clock.now_ms(), {"language": "fr"}, n=3)
    client.calls.clear()
    report = Matcher(store, agents, owner="matcher-1", clock=clock).run(5)
    assert (report.matched, report.no_agent, report.stopped_by) == (0, 3, "no-progress")
    assert [r for op, r in client.requests if op == "update_item" and on_tasks(r)] == []  # no claim, no release
    assert all(store.get(c).attempts == 0 and store.get(c).status is TaskStatus.PENDING for c in calls)
