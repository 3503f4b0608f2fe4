"""Claim lanes (taskqueue.core.lanes): which tasks a worker tries first when several claim at once. Pure rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskqueue.core.lanes import LaneView, claim_order, claim_window, lane_of, owned_shards, shard_view

ids = st.lists(st.uuids().map(str), min_size=0, max_size=80, unique=True)
held_lanes = st.sets(st.integers(0, 15), min_size=2, max_size=8).map(lambda s: tuple(sorted(s)))


def identity(task_id: str) -> str:
    return task_id


@given(ids, held_lanes, st.integers(1, 8), st.floats(0, 10), st.integers(0, 5))
def test_a_worker_among_others_only_tries_tasks_inside_the_window(candidates, held, capacity, waited, looks):
    # Whatever it has seen before, and however long: the order bound holds.
    seen = {task: (0.0, looks) for task in candidates}
    for lane in held:
        view = LaneView(lane=lane, held=held)
        plan = claim_order(candidates, identity, view, capacity, seen, now=waited, patience=0.5, patience_looks=3)
        window = claim_window(view, capacity)
        assert window == capacity * len(held)
        # Every task tried was among the first n x capacity claimable tasks of the read.
        assert all(candidates.index(task) < window for task in plan.order)
        assert len(set(plan.order)) == len(plan.order)


@given(ids, held_lanes, st.integers(1, 8))
def test_workers_with_the_same_view_never_try_the_same_task_first(candidates, held, capacity):
    # Tasks of other lanes are taken only after patience: at a first look, lanes are disjoint.
    tried = [claim_order(candidates, identity, LaneView(lane, held), capacity).order for lane in held]
    for i, first in enumerate(tried):
        for second in tried[i + 1 :]:
            assert not set(first) & set(second)
    assert sorted(t for order in tried for t in order) == sorted(candidates[: capacity * len(held)])


@given(ids, st.integers(1, 8))
def test_alone_a_worker_tries_every_candidate_in_the_queues_order(candidates, capacity):
    assert claim_order(candidates, identity, None, capacity).order == candidates
    assert claim_order(candidates, identity, LaneView(lane=3, held=(3,)), capacity).order == candidates


def test_another_lanes_task_is_taken_only_after_it_waited_long_enough_and_over_enough_looks():
    held = (0, 1)
    others = [f"task-{i}" for i in range(200) if lane_of(f"task-{i}", held) == 1][:4]
    view = LaneView(lane=0, held=held)
    plan = claim_order(others, identity, view, 2, {}, now=10.0, patience=0.5, patience_looks=2)
    assert plan.order == []  # first look: its owner may take it any moment
    assert set(plan.others_seen) == set(others)
    plan = claim_order(others, identity, view, 2, plan.others_seen, now=10.2, patience=0.5, patience_looks=2)
    assert plan.order == []  # seen twice, but only 0.2 s
    plan = claim_order(others, identity, view, 2, plan.others_seen, now=10.6, patience=0.5, patience_looks=2)
    assert sorted(plan.order) == sorted(others)  # 0.6 s, and two looks before this one
    # Its own lane's task in the window: it takes that and leaves the others to their owner.
    mine = next(f"task-{i}" for i in range(200) if lane_of(f"task-{i}", held) == 0)
    plan = claim_order([*others[:3], mine], identity, view, 2, plan.others_seen, now=11.0, patience=0.5, patience_looks=2)
    assert plan.order == [mine]


def test_the_lane_of_a_task_is_stable_spread_and_moves_only_when_its_lane_comes_or_goes():
    tasks = [f"task-{i}" for i in range(4000)]
    before = {t: lane_of(t, (0, 1, 2, 3)) for t in tasks}
    counts = [sum(1 for lane in before.values() if lane == n) for n in range(4)]
    assert min(counts) > 850  # about 1,000 each
    after = {t: lane_of(t, (0, 1, 2, 3, 7)) for t in tasks}  # a fifth worker joins
    moved = [t for t in tasks if before[t] != after[t]]
    assert all(after[t] == 7 for t in moved)  # only to the newcomer (rendezvous hashing)
    assert 600 < len(moved) < 1000  # about a fifth
    with pytest.raises(ValueError, match="no lane is held"):
        lane_of("x", ())


@given(
    held=st.sets(st.integers(min_value=0, max_value=99), min_size=2, max_size=40),
    shards=st.integers(min_value=2, max_value=64),
)
def test_every_shard_is_read_by_some_lane_and_each_lane_reads_its_share(held, shards):
    """Issue 21: shard ownership by claim lane. Each worker reads only its own shards (about shards / lanes queries
    per look, at least one, so total reads stay flat as shards grow), and no shard is left without a reader."""
    views = [LaneView(lane=lane, held=tuple(sorted(held))) for lane in held]
    owned = {view.lane: owned_shards(view, shards) for view in views}
    readers = sorted(shard for o in owned.values() for shard in o)
    assert set(readers) == set(range(shards))  # no shard without a reader
    assert all(len(o) == max(1, -(-shards // len(held))) or len(o) == shards // len(held) for o in owned.values())
    if shards >= len(held):
        assert readers == list(range(shards))  # each shard exactly one owner
    for view in views:  # the lanes sharing a shard agree on who shares it: the window rule among them
        sharing = shard_view(view, shards)
        assert view.lane in sharing.held
        assert all(owned[lane] == owned[view.lane] for lane in sharing.held)
        assert all(owned[lane] != owned[view.lane] for lane in set(held) - set(sharing.held))


def test_alone_without_a_lane_or_on_one_shard_a_worker_reads_every_shard():
    assert owned_shards(None, 16) is None
    assert owned_shards(LaneView(lane=3, held=(3,)), 16) is None
    assert owned_shards(LaneView(lane=3, held=(1, 3)), 1) is None
    assert owned_shards(LaneView(lane=5, held=(1, 5)), 4) == (1, 3)
    assert owned_shards(LaneView(lane=5, held=(1, 5, 7)), 2) == (1,)
