"""Workflows on both engines (moto and DynamoDB Local): a dependent runs only after every dependency ended, with their
results; each failure policy; cancel and redrive along the edges; shedding and the deadline; the on-failure task;
creation all or nothing and idempotent; bad input writes nothing; the matching queue refuses workflows."""

from __future__ import annotations

from typing import Any

import pytest

from taskqueue.client import TaskQueueClient
from taskqueue.core.errors import InvalidField, InvalidTransition, TaskNotFound
from taskqueue.core.model import parse_create_request
from taskqueue.core.states import TaskStatus
from taskqueue.core.workflow_rules import SKIPPED_RESULT, key_of, record_key
from taskqueue.store import TaskStore
from tests.workflow_support import create, diamond, run_claimable, states, workflow_body

pytestmark = pytest.mark.dynamodb_engines

W = "work"


def item_count(dynamodb: Any, store: TaskStore) -> int:
    return dynamodb.scan(TableName=store.settings.queue_table_name, Select="COUNT")["Count"]


def claim_key(store: TaskStore, key: str, owner: str = "w"):
    candidate = next(c for c in store.candidates(W, 100) if key_of(c.task_id) == key)
    return store.claim(candidate, owner)


# ---- the order and the results -----------------------------------------------------------------------------------


def test_a_diamond_runs_each_task_after_its_dependencies_and_hands_it_their_results(store, clock):
    summary = create(store, clock, diamond())
    assert (summary.created, summary.ready, summary.state) == (4, 1, "RUNNING")
    assert states(store, "wf-diamond") == {"a": "PENDING", "b": "WAITING", "c": "WAITING", "d": "WAITING"}
    seen: list = []
    ran = run_claimable(store, seen=seen)
    assert ran[0] == "a" and ran[-1] == "d" and sorted(ran[1:3]) == ["b", "c"]
    d = next(t for t in seen if key_of(t.task_id) == "d")
    assert [(x.key, x.status, x.result) for x in d.dependencies] == [
        ("b", TaskStatus.SUCCESS, {"key": "b"}), ("c", TaskStatus.SUCCESS, {"key": "c"})]
    assert d.results == {"b": {"key": "b"}, "c": {"key": "c"}} and d.dependency("c").succeeded
    assert set(states(store, "wf-diamond").values()) == {"SUCCESS"}


def test_a_waiting_task_is_in_no_index_so_no_look_claim_peek_or_listing_meets_it(store, clock, dynamodb):
    create(store, clock, diamond())
    item = dynamodb.get_item(TableName=store.settings.queue_table_name, Key={"taskId": {"S": "wf-diamond/d"}})["Item"]
    assert item["taskStatus"]["S"] == "WAITING" and not {"readyKey", "statusKey", "notBefore"} & set(item)
    assert [key_of(c.task_id) for c in store.candidates(W, 100)] == ["a"]
    assert key_of(store.peek(W).task_id) == "a"
    assert [key_of(t.task_id) for t in store.list_tasks(W, None, 100, None).tasks] == ["a"]
    assert store.expired_leases(W, clock.now_ms() + 10**9) == []
    with pytest.raises(InvalidTransition, match="it waits for its dependencies"):
        store.touch("wf-diamond/d")


def test_a_ready_task_takes_its_place_by_priority_and_by_when_it_became_ready(store, clock):
    """LIFO queue: a task made ready now sorts as a task created now (its readiness is its order time)."""
    create(store, clock, workflow_body("wf-p", [{"key": "a"}, {"key": "b", "dependsOn": ["a"], "priority": 5}]))
    old = store.put_tasks(_plain(store, clock, 2, priority=5))
    clock.advance(10)
    run_one = claim_key(store, "a")
    assert store.complete(run_one, "w", {"ok": 1})
    b = store.get("wf-p/b")
    assert b.status is TaskStatus.PENDING and b.enqueued_ms == clock.now_ms() and b.ttl == clock.now_ms() // 1000 + 3600
    assert key_of(store.candidates(W, 1)[0].task_id) == "b"  # priority 5 and the newest
    assert old.created == 2


def _plain(store, clock, n, **body):
    from taskqueue.core.model import new_tasks

    return new_tasks(parse_create_request({"count": n, **body}, store.settings), clock.now_ms(), store.settings)


# ---- policies ---------------------------------------------------------------------------------------------------


def test_by_default_a_failed_dependency_ends_its_dependents_and_theirs_naming_it(store, clock):
    create(store, clock, workflow_body("wf-f", [
        {"key": "a"}, {"key": "b", "dependsOn": ["a"]}, {"key": "c", "dependsOn": ["b"]}, {"key": "x"}]))
    run_claimable(store, fail=frozenset({"a"}))
    assert states(store, "wf-f") == {"a": "FAILURE", "b": "FAILURE", "c": "FAILURE", "x": "SUCCESS"}
    b, c = store.get("wf-f/b"), store.get("wf-f/c")
    assert b.blocked_by == "wf-f/a" and "its dependency 'wf-f/a' failed: a broke" in b.last_error
    assert c.blocked_by == "wf-f/b" and "'wf-f/b' failed" in c.last_error and b.attempts == c.attempts == 0
    # Dead letters, listed as failures, never waiting for ever.
    assert {"wf-f/b", "wf-f/c"} <= set(store.dead_letters(W))


def test_ignore_failure_runs_the_dependent_with_the_failure_in_its_dependencies(store, clock):
    create(store, clock, diamond("wf-i", policy="ignore-failure"))
    seen: list = []
    run_claimable(store, fail=frozenset({"c"}), seen=seen)
    assert states(store, "wf-i")["d"] == "SUCCESS"
    d = next(t for t in seen if key_of(t.task_id) == "d")
    c = d.dependency("c")
    assert c.status is TaskStatus.FAILURE and c.error == "c broke" and c.result is None and c.policy == "ignore-failure"


def test_ignore_cancelled_runs_after_a_cancelled_dependency_but_not_after_a_failed_one(store, clock):
    create(store, clock, diamond("wf-c1", policy="ignore-cancelled"))
    assert store.complete(claim_key(store, "a"), "w")
    store.cancel("wf-c1/c")
    run_claimable(store)
    assert states(store, "wf-c1") == {"a": "SUCCESS", "b": "SUCCESS", "c": "CANCELLED", "d": "SUCCESS"}
    create(store, clock, diamond("wf-c2", policy="ignore-cancelled"))
    run_claimable(store, fail=frozenset({"c"}))
    assert states(store, "wf-c2")["d"] == "FAILURE" and store.get("wf-c2/d").blocked_by == "wf-c2/c"


def test_a_cancelled_dependency_cancels_its_dependents_under_the_default_policy(store, clock):
    create(store, clock, diamond("wf-x"))
    store.cancel("wf-x/a")  # PENDING -> CANCELLED
    assert states(store, "wf-x") == {"a": "CANCELLED", "b": "CANCELLED", "c": "CANCELLED", "d": "CANCELLED"}
    assert "was cancelled" in store.get("wf-x/d").last_error
    create(store, clock, diamond("wf-y"))
    store.cancel("wf-y/c")  # a WAITING task can be cancelled too
    run_claimable(store)
    assert states(store, "wf-y") == {"a": "SUCCESS", "b": "SUCCESS", "c": "CANCELLED", "d": "CANCELLED"}


def test_the_on_failure_task_runs_with_every_task_when_one_failed_and_is_skipped_otherwise(store, clock):
    create(store, clock, diamond("wf-ok", onFailure={"key": "alert"}))
    run_claimable(store)
    alert = store.get("wf-ok/alert")
    assert alert.status is TaskStatus.SUCCESS and alert.result == SKIPPED_RESULT and alert.attempts == 0
    create(store, clock, diamond("wf-bad", onFailure={"key": "alert"}))
    seen: list = []
    run_claimable(store, fail=frozenset({"b"}), seen=seen)
    alert_run = next(t for t in seen if key_of(t.task_id) == "alert")
    assert {d.key: d.status.value for d in alert_run.dependencies} == {
        "a": "SUCCESS", "b": "FAILURE", "c": "SUCCESS", "d": "FAILURE"}
    assert store.get("wf-bad/alert").status is TaskStatus.SUCCESS and store.get("wf-bad/alert").attempts == 1


# ---- cancel and redrive ------------------------------------------------------------------------------------------


def test_cancelling_a_workflow_cancels_what_waits_or_is_pending_and_a_running_task_readies_nothing(store, clock):
    create(store, clock, diamond("wf-cw", onFailure={"key": "alert"}))
    running = claim_key(store, "a")
    cancelled = TaskQueueClient(_services(store)).cancel_workflow("wf-cw")
    assert sorted(map(key_of, cancelled)) == ["alert", "b", "c", "d"]
    assert store.complete(running, "w")
    assert states(store, "wf-cw") == {"a": "SUCCESS", "b": "CANCELLED", "c": "CANCELLED", "d": "CANCELLED",
                                      "alert": "CANCELLED"}
    assert store.candidates(W, 10) == []
    assert store.workflow_record("wf-cw").state.value == "CANCELLED"


def _services(store):
    from taskqueue.services import Services

    return Services(store.settings, store, None, store._clock)  # type: ignore[arg-type]


def test_redriving_a_failed_step_lets_its_dependents_go_on(store, clock):
    create(store, clock, workflow_body("wf-r", [
        {"key": "a"}, {"key": "b", "dependsOn": ["a"]}, {"key": "c", "dependsOn": ["b"]},
        {"key": "y"}, {"key": "z", "dependsOn": ["a", "y"]}]))
    run_claimable(store, fail=frozenset({"a"}))
    assert states(store, "wf-r") == {"a": "FAILURE", "b": "FAILURE", "c": "FAILURE", "y": "SUCCESS", "z": "FAILURE"}
    with pytest.raises(InvalidTransition, match="redrive 'wf-r/a'"):
        store.redrive("wf-r/b")
    store.redrive("wf-r/a")
    assert states(store, "wf-r") == {"a": "PENDING", "b": "WAITING", "c": "WAITING", "y": "SUCCESS", "z": "WAITING"}
    run_claimable(store)
    assert set(states(store, "wf-r").values()) == {"SUCCESS"}


def test_a_redrive_leaves_blocked_a_task_another_failed_dependency_still_blocks(store, clock):
    create(store, clock, workflow_body("wf-r2", [{"key": "a"}, {"key": "b"}, {"key": "d", "dependsOn": ["a", "b"]}]))
    assert store.fail(claim_key(store, "a"), "w", "first")
    assert store.fail(claim_key(store, "b"), "w", "second")
    assert store.get("wf-r2/d").blocked_by == "wf-r2/a"
    store.redrive("wf-r2/a")
    d = store.get("wf-r2/d")
    assert d.status is TaskStatus.FAILURE and d.blocked_by == "wf-r2/b" and "second" in d.last_error
    store.redrive("wf-r2/b")
    run_claimable(store)
    assert set(states(store, "wf-r2").values()) == {"SUCCESS"}


# ---- shedding and the deadline ---------------------------------------------------------------------------------


def test_a_shed_dependency_follows_the_policies(store, clock):
    create(store, clock, workflow_body("wf-s", [
        {"key": "a", "ttlSeconds": 5}, {"key": "b", "dependsOn": ["a"]},
        {"key": "c", "dependsOn": [{"key": "a", "policy": "ignore-cancelled"}]}]))
    clock.advance(6)
    assert store.candidates(W, 10) == []  # the look sheds a, and its fan-out readies c
    assert states(store, "wf-s") == {"a": "SHED", "b": "CANCELLED", "c": "PENDING"}
    assert [key_of(c.task_id) for c in store.candidates(W, 10)] == ["c"]  # the next look finds it
    assert "was shed" in store.get("wf-s/b").last_error


def test_a_pending_task_deleted_by_ttl_ends_for_its_dependents_through_the_stream_hook(store, clock, dynamodb):
    from taskqueue.workflows.ttl import after_ttl_removals

    create(store, clock, diamond("wf-t", policy="ignore-cancelled"))
    table = store.settings.queue_table_name
    image = dynamodb.get_item(TableName=table, Key={"taskId": {"S": "wf-t/a"}})["Item"]
    dynamodb.delete_item(TableName=table, Key={"taskId": {"S": "wf-t/a"}})  # as DynamoDB's TTL would
    record = {"eventName": "REMOVE", "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
              "dynamodb": {"OldImage": image}}
    after_ttl_removals(store, [record])
    assert after_ttl_removals(store, [record, None, {}]) == 0  # a retried record changes nothing more
    view = {key_of(k): v for k, v in ((t.task.task_id, t.task.status.value) for t in
                                      store.workflow_tasks(store.workflow_record("wf-t")))}
    assert view == {"b": "CANCELLED", "c": "CANCELLED", "d": "CANCELLED"}
    assert after_ttl_removals(store, [{**record, "userIdentity": None}]) == 0  # not the TTL's: not a shed


def test_a_task_made_ready_after_its_workflows_deadline_is_shed_and_its_dependents_cancelled(store, clock):
    create(store, clock, workflow_body("wf-dl", [
        {"key": "a", "ttlSeconds": 600}, {"key": "b", "dependsOn": ["a"]}, {"key": "c", "dependsOn": ["b"]}],
        deadlineSeconds=60))
    running = claim_key(store, "a")
    clock.advance(61)
    assert store.renew_lease(running, "w") is not None
    assert store.complete(running, "w")
    assert states(store, "wf-dl") == {"a": "SUCCESS", "b": "SHED", "c": "CANCELLED"}
    assert "deadline" in store.get("wf-dl/b").last_error


# ---- creation ---------------------------------------------------------------------------------------------------


def test_creating_the_same_workflow_again_writes_nothing_new_even_after_it_ran(store, clock, dynamodb):
    body = diamond("wf-idem")
    create(store, clock, body)
    run_claimable(store, fail=frozenset({"b"}))
    before = states(store, "wf-idem")
    count = item_count(dynamodb, store)
    again = create(store, clock, body)
    assert (again.created, again.already_existed, again.ready) == (0, 4, 0)
    assert states(store, "wf-idem") == before and item_count(dynamodb, store) == count
    with pytest.raises(InvalidField, match="exists .* with other content") as refused:
        create(store, clock, diamond("wf-idem", policy="ignore-failure"))
    assert refused.value.field == "workflow.id"


def test_a_creation_that_died_before_its_final_write_is_invisible_and_a_retry_finishes_it(store, clock):
    from taskqueue.core.workflow_plan import plan_workflow

    request = parse_create_request(diamond("wf-half"), store.settings)
    plan = plan_workflow(request.workflow, clock.now_ms(), store.settings)
    assert store.begin_workflow(plan) is None
    store._put_absent(plan.tasks[0])  # a: written; the rest, and the final write, never happened
    assert store.candidates(W, 10) == []  # nothing runs
    with pytest.raises(TaskNotFound, match="its creation did not finish"):
        TaskQueueClient(_services(store)).workflow("wf-half")
    clock.advance(30)
    summary = create(store, clock, diamond("wf-half"))
    assert (summary.created, summary.already_existed, summary.ready) == (3, 1, 1)
    assert store.get("wf-half/d").created_ms == plan.created_ms  # the first attempt's times
    run_claimable(store)
    assert set(states(store, "wf-half").values()) == {"SUCCESS"}


def test_a_start_left_owed_by_a_creator_that_died_after_the_final_write_is_finished_by_the_sweep(store, clock):
    from taskqueue.core.workflow_plan import plan_workflow

    request = parse_create_request(diamond("wf-owed"), store.settings)
    plan = plan_workflow(request.workflow, clock.now_ms(), store.settings)
    store.begin_workflow(plan)
    store.write_workflow(plan)
    assert store.commit_workflow(plan, clock.now_ms())  # visible; the roots' start never ran
    assert store.workflow_record("wf-owed").starting and store.candidates(W, 10) == []
    assert store.finish_owed_fan_outs(W) == 0  # too young: its creator may be at it
    clock.advance(121)
    assert store.finish_owed_fan_outs(W) == 1
    assert [key_of(c.task_id) for c in store.candidates(W, 10)] == ["a"]
    assert not store.workflow_record("wf-owed").starting


def test_a_cancel_racing_the_start_puts_the_roots_cancelled_so_no_late_start_can_run_one(store, clock):
    from taskqueue.core.workflow_plan import plan_workflow

    request = parse_create_request(diamond("wf-race"), store.settings)
    plan = plan_workflow(request.workflow, clock.now_ms(), store.settings)
    store.begin_workflow(plan)
    store.write_workflow(plan)
    assert store.commit_workflow(plan, clock.now_ms())
    seen_by_creator = store.workflow_record_item("wf-race")  # RUNNING, its start owed: then the creator stalls
    cancelled = TaskQueueClient(_services(store)).cancel_workflow("wf-race")
    assert sorted(map(key_of, cancelled)) == ["b", "c", "d"]  # a was put CANCELLED by the start the cancel owed
    assert store.start_workflow(seen_by_creator, plan.roots) == 0  # the stalled creator's start puts nothing
    assert states(store, "wf-race") == dict.fromkeys("abcd", "CANCELLED")
    assert store.candidates(W, 10) == [] and not store.workflow_record("wf-race").starting
    clock.advance(121)
    assert store.finish_owed_fan_outs(W) == 0


def test_a_retry_after_the_start_never_puts_a_root_again(store, clock, dynamodb):
    body = diamond("wf-once")
    create(store, clock, body)
    run_claimable(store)
    table = store.settings.queue_table_name
    dynamodb.delete_item(TableName=table, Key={"taskId": {"S": "wf-once/a"}})  # as DynamoDB's TTL would, later
    again = create(store, clock, body)
    assert again.ready == 0 and "Item" not in dynamodb.get_item(TableName=table, Key={"taskId": {"S": "wf-once/a"}})
    assert store.candidates(W, 10) == []


@pytest.mark.parametrize("workflow, message", [
    ({"id": "bad", "tasks": [{"key": "a", "dependsOn": ["b"]}, {"key": "b", "dependsOn": ["a"]}]}, "cycle"),
    ({"id": "bad", "tasks": [{"key": "a", "dependsOn": ["ghost"]}]}, "no task of this workflow"),
    ({"id": "bad", "tasks": [{"key": "a", "queue": "calls"}]}, "another queue"),
])
def test_bad_input_is_refused_at_creation_and_writes_nothing(store, clock, dynamodb, workflow, message):
    count = item_count(dynamodb, store)
    with pytest.raises(InvalidField, match=message):
        create(store, clock, {"workflow": workflow})
    assert item_count(dynamodb, store) == count


def test_the_matching_queue_takes_no_workflow(services, dynamodb, store):
    client = TaskQueueClient(services)
    count = item_count(dynamodb, store)
    with pytest.raises(InvalidField, match="matching queue.*takes no workflow") as refused:
        client.create_workflow({"id": "w", "tasks": [{"key": "a"}]}, queue="calls")
    assert refused.value.field == "workflow" and item_count(dynamodb, store) == count


def test_the_client_creates_shows_and_waits_for_a_workflow(services, store, clock):
    client = TaskQueueClient(services)
    summary = client.create_workflow({"id": "wf-cl", "tasks": [{"key": "a"}, {"key": "b", "dependsOn": ["a"]}]},
                                     payload={"x": 1}, priority=3)
    assert summary.task_ids == ("wf-cl/a", "wf-cl/b") and summary.as_dict()["workflowId"] == "wf-cl"
    view = client.workflow("wf-cl")
    assert view.state == "RUNNING" and view.counts == {"PENDING": 1, "WAITING": 1}
    assert [e.dependency for e in view.tasks[1].depends_on] == ["wf-cl/a"] and view.tasks[1].task.priority == 3
    run_claimable(store)
    assert client.wait_workflow("wf-cl", timeout=1).state == "SUCCEEDED"
    assert store.workflow_record(record_key("x")[3:]) is None
