"""The pure rules of workflows: the input's graph checks (cycles, missing dependencies, limits), the order of a
workflow's tasks, the counter tree that counts a dependent's dependencies exactly once, the policies, the edge lists
and the items a creation writes. Random DAGs through hypothesis."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taskqueue.core.errors import InvalidField
from taskqueue.core.model import parse_create_request
from taskqueue.core.settings import Settings
from taskqueue.core.states import TaskStatus
from taskqueue.core.workflow_plan import plan_workflow
from taskqueue.core.workflow_rules import (
    ENDINGS,
    FAN_IN,
    INLINE_EDGE_BYTES,
    InEdge,
    OutEdge,
    Policy,
    counter_path,
    decode_in_edges,
    decode_out_edges,
    edge_effect,
    edge_pages,
    key_of,
)
from taskqueue.core.workflow_spec import MAX_WORKFLOW_TASKS, find_cycle, topological_order

SETTINGS = Settings(queue_table_name="t")


def body(tasks: list[dict], **workflow: object) -> dict:
    return {"workflow": {"id": "w", "tasks": tasks, **workflow}}


def parse(tasks: list[dict], **workflow: object):
    return parse_create_request(body(tasks, **workflow), SETTINGS).workflow


@st.composite
def dags(draw, max_tasks: int = 30) -> list[dict]:
    """A random DAG: task i may depend on any of the tasks before it (listed in a shuffled order)."""
    n = draw(st.integers(1, max_tasks))
    tasks = []
    for i in range(n):
        deps = draw(st.lists(st.integers(0, i - 1), unique=True, max_size=min(i, 5))) if i else []
        policies = draw(st.lists(st.sampled_from(["fail", "ignore-failure", "ignore-cancelled"]), min_size=len(deps),
                                 max_size=len(deps)))
        tasks.append({"key": f"t{i}", "dependsOn": [{"key": f"t{d}", "policy": p} for d, p in zip(deps, policies)]})
    return draw(st.permutations(tasks))


# ---- the graph -------------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(dags())
def test_a_random_dag_is_accepted_and_ordered_with_each_task_after_its_dependencies(tasks):
    spec = parse(tasks)
    position = {t.key: i for i, t in enumerate(spec.tasks)}
    assert sorted(position) == sorted(t["key"] for t in tasks)
    for task in spec.tasks:
        for edge in task.depends_on:
            assert position[edge.dependency] < position[task.key]


@settings(max_examples=150, deadline=None)
@given(dags(max_tasks=20), st.data())
def test_a_back_edge_makes_a_cycle_that_is_refused_and_named(tasks, data):
    by_key = {t["key"]: t for t in tasks}
    # t_j depends on t_i (i < j) somewhere? add t_i -> ... -> t_j's reverse: t_i depends on t_j, closing a cycle.
    pairs = [(int(t["key"][1:]), int(d["key"][1:])) for t in tasks for d in t["dependsOn"]]
    if not pairs:
        return
    dependent, dependency = data.draw(st.sampled_from(pairs))
    by_key[f"t{dependency}"]["dependsOn"].append({"key": f"t{dependent}"})
    with pytest.raises(InvalidField, match="form a cycle") as refused:
        parse(tasks)
    assert refused.value.field == "workflow.tasks"
    named = [part.strip(" '") for part in str(refused.value).split(": ", 1)[1].split(";")[0].split("->")]
    assert named[0] == named[-1] and len(named) >= 3  # a closed path: each waits for the one before it
    waits = {t["key"]: {d["key"] for d in t["dependsOn"]} for t in tasks}
    for before, after in itertools.pairwise(named):
        assert before in waits[after]


def test_find_cycle_walks_to_a_repeated_task():
    spec_tasks = topological_order.__globals__["WorkflowTask"]  # the dataclass, without importing a private name
    make = lambda key, deps: spec_tasks(key, {}, 0, 1, 1, None, None, tuple(  # noqa: E731
        topological_order.__globals__["Edge"](d) for d in deps))
    cycle = find_cycle([make("a", ["b"]), make("b", ["c"]), make("c", ["a"]), make("z", ["a"])])
    assert cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"}


@pytest.mark.parametrize("tasks, field, message", [
    ([{"key": "a", "dependsOn": ["missing"]}], "workflow.tasks[0].dependsOn[0]", "no task of this workflow"),
    ([{"key": "a", "dependsOn": ["a"]}], "workflow.tasks[0].dependsOn[0]", "depends on itself"),
    ([{"key": "a"}, {"key": "a"}], "workflow.tasks[1].key", "two tasks of the workflow have the key 'a'"),
    ([{"key": "a"}, {"key": "b", "dependsOn": ["a", "a"]}], "workflow.tasks[1].dependsOn[1]", "names 'a' twice"),
    ([{"key": "a", "queue": "calls"}], "workflow.tasks[0].queue", "a dependency on another queue is not supported"),
])
def test_bad_graphs_are_refused_naming_the_field(tasks, field, message):
    with pytest.raises(InvalidField, match=message) as refused:
        parse(tasks)
    assert refused.value.field == field


def test_fields_a_workflow_replaces_are_refused():
    for name, value in (("count", 2), ("taskIds", ["x"]), ("delaySeconds", 5)):
        with pytest.raises(InvalidField, match=f"{name} cannot be given with a workflow") as refused:
            parse_create_request({name: value, **body([{"key": "a"}])}, SETTINGS)
        assert refused.value.field == name


def test_nothing_may_depend_on_the_on_failure_task():
    with pytest.raises(InvalidField, match="nothing may depend on it"):
        parse([{"key": "a", "dependsOn": ["alert"]}], onFailure={"key": "alert"})


def test_the_task_limit_counts_the_on_failure_task():
    tasks = [{"key": f"t{i}"} for i in range(MAX_WORKFLOW_TASKS)]
    assert len(parse(tasks).tasks) == MAX_WORKFLOW_TASKS
    with pytest.raises(InvalidField, match=f"over the limit of {MAX_WORKFLOW_TASKS}"):
        parse(tasks, onFailure={"key": "alert"})


def test_each_task_takes_the_requests_fields_as_defaults_and_may_override_them():
    request = parse_create_request({"priority": 7, "ttlSeconds": 60, "payload": {"x": 1}, "group": "g",
                                    **body([{"key": "a"}, {"key": "b", "priority": 1, "payload": {"y": 2}}])}, SETTINGS)
    a, b = request.workflow.tasks
    assert (a.priority, a.ttl_seconds, a.payload, a.group) == (7, 60, {"x": 1}, "g")
    assert (b.priority, b.payload) == (1, {"y": 2})
    assert request.count == 2


def test_a_task_too_long_for_the_worker_is_refused_with_its_key():
    short = Settings(queue_table_name="t", worker_timeout_seconds=60, default_run_seconds=30)
    with pytest.raises(InvalidField, match="workflow.tasks\\[b\\]: runSeconds") as refused:
        parse_create_request(body([{"key": "a"}, {"key": "b", "runSeconds": 300}]), short)
    assert refused.value.field == "workflow.tasks[b].runSeconds"


def test_the_fingerprint_is_the_content():
    one = parse([{"key": "a"}, {"key": "b", "dependsOn": ["a"]}])
    again = parse([{"key": "a"}, {"key": "b", "dependsOn": ["a"]}])
    other = parse([{"key": "a"}, {"key": "b"}])
    assert one.fingerprint == again.fingerprint != other.fingerprint


# ---- counting ------------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 20_000), st.integers(2, 150), st.randoms(use_true_random=False))
def test_the_counter_tree_readies_once_at_the_last_dependency_whatever_the_order_and_redos(total, fan_in, rng):
    """Each node is a counter with the set of its done slots (a write counts its slot only if it is not in the set, as
    the conditional UpdateItem does); a walk goes up only from a node it found empty. In any order, with a third of
    the steps redone after a crash, every node counts exactly its size, and the first walk to reach an empty root is
    the last dependency's: it alone readies the dependent (a redone walk that reaches the root finds it no longer
    WAITING)."""
    remaining: dict[str, int] = {}
    done: dict[str, set[int]] = {}
    order = list(range(total))
    rng.shuffle(order)
    readied_by: list[int] = []
    sizes: dict[str, int] = {}
    for n, slot in enumerate(order + rng.sample(order, total // 3)):
        path = counter_path(slot, total, fan_in)
        assert all(0 <= step.slot < step.size <= fan_in for step in path)
        for step in path:
            sizes[step.node] = step.size
            seen = done.setdefault(step.node, set())
            if step.slot not in seen:
                seen.add(step.slot)
                remaining[step.node] = remaining.get(step.node, step.size) - 1
            if remaining[step.node] > 0:
                break
        else:
            readied_by.append(n)
    assert all(done[node] == set(range(sizes[node])) for node in done)  # each slot of each node counted, once
    assert all(v == 0 for v in remaining.values())
    assert readied_by[0] == total - 1  # no walk before the last dependency's reached an empty root


def test_one_dependency_has_no_counter_and_the_default_tree_counts_ten_thousand_in_two_levels():
    assert counter_path(0, 1) == []
    assert [s.node for s in counter_path(9_999, 10_000)] == ["0.99", "1.0"]
    assert counter_path(9_999, 10_000)[0].size == FAN_IN and counter_path(9_999, 10_000)[1].size == 100
    assert counter_path(250, 251)[0].size == 51  # the last leaf holds what is left
    with pytest.raises(ValueError):
        counter_path(3, 3)


def test_a_counter_node_stays_under_one_write_unit():
    """The set of done slots of a full node, as DynamoDB sizes it (a number: about 1 byte per 2 digits plus 1)."""
    slots = range(FAN_IN)
    set_bytes = sum(len(str(s)) // 2 + 2 for s in slots) + len("done")
    key_bytes = len("taskId") + len("wf#count#1.99#") + 165
    assert set_bytes + key_bytes + 40 < 1024


# ---- policies --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("outcome", sorted(ENDINGS))
@pytest.mark.parametrize("policy", list(Policy))
def test_what_each_end_does_under_each_policy(outcome, policy):
    effect = edge_effect(outcome, policy)
    assert effect.failed is (outcome is not TaskStatus.SUCCESS)
    runs = (outcome is TaskStatus.SUCCESS or policy in (Policy.IGNORE_FAILURE, Policy.ON_FAILURE)
            or (policy is Policy.IGNORE_CANCELLED and outcome in (TaskStatus.CANCELLED, TaskStatus.SHED)))
    assert effect.counts is runs
    if not runs:
        assert effect.blocked_status is (TaskStatus.FAILURE if outcome is TaskStatus.FAILURE else TaskStatus.CANCELLED)


def test_only_an_end_affects_dependents():
    with pytest.raises(ValueError, match="not an end"):
        edge_effect(TaskStatus.PENDING, Policy.FAIL)


# ---- edge lists and the plan -------------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 3000))
def test_edge_lists_are_inline_while_small_else_paged_and_read_back_whole(n):
    ins = [InEdge(f"wf/t{i}", Policy.IGNORE_CANCELLED if i % 3 else Policy.FAIL) for i in range(n)]
    outs = [OutEdge(f"wf/d{i}", i, n, Policy.ON_FAILURE) for i in range(n)]
    for edges, decode in ((ins, decode_in_edges), (outs, decode_out_edges)):
        inline, pages = edge_pages(edges)
        if inline is not None:
            assert len(inline.encode()) <= INLINE_EDGE_BYTES and not pages and decode(inline) == edges
        else:
            assert sum((decode(p) for p in pages), []) == edges
        assert (inline is None and not pages) is (n == 0) or inline is not None or pages


@settings(max_examples=60, deadline=None)
@given(dags(max_tasks=25), st.booleans())
def test_the_plan_writes_every_task_waiting_with_consistent_edges(tasks, on_failure):
    request = parse_create_request(body(tasks, **({"onFailure": {"key": "zz"}} if on_failure else {})), SETTINGS)
    plan = plan_workflow(request.workflow, 1_795_348_800_000, SETTINGS)
    items = {item["taskId"]["S"]: item for item in plan.tasks + plan.roots}
    assert sorted(items) == sorted(plan.task_ids)
    ins = {tid: decode_in_edges(item["wfInEdges"]["S"]) if "wfInEdges" in item else [] for tid, item in items.items()}
    outs = {tid: decode_out_edges(item["wfOutEdges"]["S"]) if "wfOutEdges" in item else [] for tid, item in items.items()}
    roots = {item["taskId"]["S"] for item in plan.roots}
    for tid, item in items.items():
        if tid in roots:  # put PENDING at the workflow's start, at their place in the ReadyIndex
            assert item["taskStatus"]["S"] == "PENDING" and "readyKey" in item and "statusKey" not in item
        else:
            assert item["taskStatus"]["S"] == "WAITING" and "readyKey" not in item and "statusKey" not in item
        assert int(item.get("wfIn", {"N": "0"})["N"]) == len(ins[tid])
        assert int(item.get("wfOut", {"N": "0"})["N"]) == len(outs[tid])
    # Each out-edge is the dependent's in-edge at its slot, with the dependent's total.
    for tid, edges in outs.items():
        for edge in edges:
            assert ins[edge.dependent][edge.slot].dependency == tid and edge.total == len(ins[edge.dependent])
    assert sorted(roots) == sorted(t for t, e in ins.items() if not e)
    assert all(p["roots"]["L"] for p in plan.pages if p["taskId"]["S"].startswith("wf#roots#"))
    if on_failure:
        assert len(ins["w/zz"]) == len(items) - 1 and all(e.policy is Policy.ON_FAILURE for e in ins["w/zz"])
    assert json.loads(next(p for p in plan.pages if p["taskId"]["S"].startswith("wf#members#"))["members"]["S"]) == plan.task_ids
    assert all(key_of(t) == t.split("/", 1)[1] for t in plan.task_ids)
