"""Fan-in without polling, on both engines: the last of many dependencies readies the dependent once, with no read of
its siblings; a writer that dies between any two requests of a fan-out leaves it to the sweep, which finishes it with
no slot counted twice; and the write units a dependency edge costs, measured by the cost meter (bench/cost_meter.py:
DynamoDB's billing rules, checked against DynamoDB Local's own figures)."""

from __future__ import annotations

import time
from typing import Any

import boto3
import pytest

from bench.cost_meter import CostMeter
from taskqueue.core.states import TaskStatus
from taskqueue.core.workflow_rules import counter_path, key_of
from taskqueue.store import TaskStore, workflow_fan_out
from tests.conftest import TABLE
from tests.workflow_support import create, run_claimable, states, workflow_body

pytestmark = pytest.mark.dynamodb_engines

W = "work"


def fan_in(workflow_id: str, children: int, **extra: Any) -> dict[str, Any]:
    tasks = [{"key": f"c{i}"} for i in range(children)]
    tasks.append({"key": "parent", "dependsOn": [f"c{i}" for i in range(children)]})
    return workflow_body(workflow_id, tasks, **extra)


def counters(dynamodb: Any, task_id: str) -> dict[str, dict[str, Any]]:
    """The counter nodes of a dependent: node -> its item."""
    items = dynamodb.scan(TableName=TABLE, FilterExpression="begins_with(taskId, :p)",
                          ExpressionAttributeValues={":p": {"S": "wf#count#"}})["Items"]
    return {i["taskId"]["S"].split("#")[2]: i for i in items if i["taskId"]["S"].endswith("#" + task_id)}


def assert_counted_once(dynamodb: Any, task_id: str, total: int, fan_in: int) -> None:
    nodes = counters(dynamodb, task_id)
    sizes = {step.node: step.size for slot in range(total) for step in counter_path(slot, total, fan_in)}
    assert set(nodes) == set(sizes)
    for node, item in nodes.items():
        assert int(item["remaining"]["N"]) == 0
        assert sorted(int(n) for n in item["done"]["NS"]) == list(range(sizes[node]))


def finish_children(store: TaskStore, children: int, owner: str = "w") -> None:
    """Claim and complete the children, a page at a time, as workers would (the parent waits meanwhile)."""
    done = 0
    while done < children:
        for candidate in store.candidates(W, min(100, children - done)):
            task = store.claim(candidate, owner)
            assert task is not None and key_of(task.task_id) != "parent"
            assert store.complete(task, owner, {"n": key_of(task.task_id)})
            done += 1


def test_the_last_of_1000_dependencies_readies_the_dependent_once_with_no_read_of_its_siblings(store, clock, dynamodb):
    create(store, clock, fan_in("wf-1k", 1000))
    started = time.monotonic()
    finish_children(store, 999)
    assert store.get("wf-1k/parent").status is TaskStatus.WAITING  # 999 of 1,000: it still waits
    last = store.claim(store.candidates(W, 1)[0], "w")
    assert store.complete(last, "w")
    parent = store.get("wf-1k/parent")
    assert parent.status is TaskStatus.PENDING and parent.enqueued_ms == clock.now_ms()
    assert_counted_once(dynamodb, "wf-1k/parent", 1000, 100)
    seen: list = []
    assert run_claimable(store, seen=seen) == ["parent"]
    assert len(seen[0].dependencies) == 1000 and all(d.succeeded for d in seen[0].dependencies)
    print(f"\n1,000 children completed and fanned in: {time.monotonic() - started:.1f} s")


@pytest.mark.slow
def test_the_last_of_10000_dependencies_readies_the_dependent_once_in_any_order_with_redone_steps(store, clock, dynamodb):
    """The fan-in itself at the size of the limit: each child's share of its end (one counter write, and at every
    100th one the root's), in a random order with a tenth of them done again; the parent is made ready by the last
    one only. (Creating and claiming 10,000 children first would take many minutes on the emulators; the 1,000 above
    go the whole way.)"""
    import random

    from taskqueue.core.model import parse_create_request
    from taskqueue.core.workflow_plan import plan_workflow
    from taskqueue.core.workflow_rules import OutEdge, Policy

    n = 10_000
    plan = plan_workflow(parse_create_request(fan_in("wf-10k", n), store.settings).workflow, clock.now_ms(), store.settings)
    store._put_absent(next(item for item in plan.tasks if item["taskId"]["S"] == "wf-10k/parent"))  # the children's
    # own items play no part in counting: each end below is what a child's fan-out writes for the parent.
    order = list(range(n))
    random.Random(7).shuffle(order)
    steps = order[:-1] + random.Random(8).sample(order[:-1], n // 10)
    now = clock.now_ms()
    readied = [store._apply_edge(f"wf-10k/c{slot}", TaskStatus.SUCCESS, None, OutEdge("wf-10k/parent", slot, n, Policy.FAIL),
                                 keep_until=now // 1000 + 86400, now_ms=now) for slot in steps]
    assert not any(queue for queue, _ in readied) and store.get("wf-10k/parent").status is TaskStatus.WAITING
    last = store._apply_edge(f"wf-10k/c{order[-1]}", TaskStatus.SUCCESS, None,
                             OutEdge("wf-10k/parent", order[-1], n, Policy.FAIL), keep_until=now // 1000 + 86400, now_ms=now)
    assert last == ("work", None) and store.get("wf-10k/parent").status is TaskStatus.PENDING
    assert_counted_once(dynamodb, "wf-10k/parent", n, 100)


class Crash(BaseException):
    """The process dies: not an Exception, so no handler of the product catches it."""


def crash_at(store: TaskStore, at: int) -> dict[str, int]:
    """Make ``store`` die at the ``at``-th request a fan-out sends (after the terminal write, which stands)."""
    state = {"n": 0, "inside": 0, "crashed": 0}
    call, ended = store._call, store.workflow_ended

    def dying_call(operation: str, **request: Any) -> Any:
        if state["inside"] and not state["crashed"]:
            state["n"] += 1
            if state["n"] - 1 == at:
                state["crashed"] = 1
                raise Crash(f"died before request {at} of a fan-out ({operation})")
        return call(operation, **request)

    def watched_ended(task: Any, now_ms: int | None = None) -> None:
        state["inside"] += 1
        try:
            ended(task, now_ms)
        finally:
            state["inside"] -= 1

    store._call = dying_call  # type: ignore[method-assign]
    store.workflow_ended = watched_ended  # type: ignore[method-assign]
    return state


def crash_workflow(workflow_id: str) -> dict[str, Any]:
    """Seven children fanned in through a counter tree of three slots a node (leaves of 3, 3 and 1; a root of 3), a
    task that waits for one child only, and one that waits for the parent."""
    tasks = [{"key": f"c{i}"} for i in range(7)]
    tasks += [{"key": "parent", "dependsOn": [f"c{i}" for i in range(7)]}, {"key": "one", "dependsOn": ["c0"]},
              {"key": "after", "dependsOn": ["parent"]}]
    return workflow_body(workflow_id, tasks)


def test_a_writer_dying_at_any_request_of_a_fan_out_leaves_it_to_the_sweep_with_nothing_counted_twice(
        store, clock, dynamodb, monkeypatch):
    monkeypatch.setattr(workflow_fan_out, "_PARALLEL_FROM", 10**9)  # one request at a time: a crash point is exact
    store.counter_fan_in = 3
    points, at = 0, 0
    while True:
        workflow_id = f"wf-crash-{at}"
        create(store, clock, crash_workflow(workflow_id))
        state = crash_at(store, at)
        try:
            ran = run_claimable(store)
        except Crash:
            ran = None
        store._call, store.workflow_ended = TaskStore._call.__get__(store), TaskStore.workflow_ended.__get__(store)  # type: ignore[method-assign]
        if not state["crashed"]:
            break  # every request of every fan-out of the workflow has been a crash point
        points += 1
        # Other workers finish what is claimable; then the sweep finishes what the dead writer owed.
        ran = run_claimable(store)
        clock.advance(121)
        assert store.finish_owed_fan_outs(W) >= 1
        ran += run_claimable(store)
        final = states(store, workflow_id)
        assert set(final.values()) == {"SUCCESS"}, (at, final)
        assert_counted_once(dynamodb, f"{workflow_id}/parent", 7, 3)
        for key in ("parent", "one", "after"):
            assert store.get(f"{workflow_id}/{key}").attempts == 1, (at, key)  # readied once, run once
        assert store.finish_owed_fan_outs(W) == 0
        at += 1
    assert points >= 30  # the requests of the fan-outs of 7 children, of the parent and of c0
    assert sorted(ran or []) == sorted([f"c{i}" for i in range(7)] + ["parent", "one", "after"])


def test_a_fan_out_done_again_or_by_two_processes_at_once_has_the_effect_of_one(store, clock, dynamodb):
    store.counter_fan_in = 3
    create(store, clock, crash_workflow("wf-twice"))
    run_claimable(store)
    before = {i["taskId"]["S"]: i for i in dynamodb.scan(TableName=TABLE)["Items"]}
    for key in [f"c{i}" for i in range(7)] + ["parent"]:
        store.finish_fan_out(f"wf-twice/{key}")  # a sweep racing a slow writer, or a retried stream record
    after = {i["taskId"]["S"]: i for i in dynamodb.scan(TableName=TABLE)["Items"]}
    assert after == before


# ---- write units per dependency edge -----------------------------------------------------------------------------


@pytest.fixture
def metered(dynamodb: Any, settings: Any, clock: Any) -> tuple[TaskStore, CostMeter]:
    meter = CostMeter(dynamodb)
    client = meter.attach(boto3.client("dynamodb"))
    return TaskStore(client, settings, clock), meter


def completion_units(store: TaskStore, meter: CostMeter, body: dict[str, Any], keys: set[str] | None = None) -> float:
    """Write units of claiming and completing the tasks of ``body`` (the keys given, else all) with their fan-outs."""
    create(store, store._clock, body)
    meter.reset()
    done = set()
    while True:
        page = [c for c in store.candidates(W, 100) if keys is None or key_of(c.task_id) in keys]
        if not page:
            return meter.snapshot().write_units
        for candidate in page:
            task = store.claim(candidate, "w")
            assert store.complete(task, "w", {"k": 1})
            done.add(key_of(task.task_id))


def test_write_units_per_dependency_edge_of_a_fan_in_and_a_fan_out(metered):
    """A fan-in of 120 (each child: its FANOUT mark, 3 units, and one counter write; a leaf's last, a root write; the
    last readies the parent) and a fan-out of 1 parent to 120 children (each child: made ready, 2 units: its write and
    its ReadyIndex entry, where a new task's creation puts the entry instead), against the same tasks without edges."""
    store, meter = metered
    n = 120
    children = {f"c{i}" for i in range(n)}
    plain = completion_units(store, meter, workflow_body("plain", [{"key": f"c{i}"} for i in range(n)]))
    into = completion_units(store, meter, fan_in("fan-in", n), children)
    per_edge_in = (into - plain) / n
    assert per_edge_in == pytest.approx(4 + (2 + 2) / n), per_edge_in  # mark 3 + counter 1; 2 roots, the readying
    # Fan-out: the parent's completion readies every child; against completing a parent that readies none.
    lone = completion_units(store, meter, workflow_body("lone", [{"key": "p"}]), {"p"})
    out = completion_units(store, meter, workflow_body("fan-out", [{"key": "p"}] + [
        {"key": f"c{i}", "dependsOn": ["p"]} for i in range(n)]), {"p"})
    per_edge_out = (out - lone) / n
    assert per_edge_out == pytest.approx(2 + 3 / n), per_edge_out  # the readying write and its entry; the parent's mark
    print(f"\nwrite units per edge: fan-in {per_edge_in:.3f}, fan-out {per_edge_out:.3f}")
