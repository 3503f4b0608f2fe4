"""Fair share's pure rules (taskqueue/core/fairness.py): group names, partition keys, the ring's order, the
round-robin merge and rate windows."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskqueue.core import fairness, keys
from taskqueue.core.errors import InvalidTaskInput
from taskqueue.core.fairness import GroupLimits, RingEntry

GROUPS = st.from_regex(r"[A-Za-z0-9_.:@/=+-]{1,64}", fullmatch=True).filter(lambda g: g != fairness.DEFAULT_GROUP)


@pytest.mark.parametrize("group", ["acme", "tenant-42", "key:AbC/9+=", "a" * 64, "delayed", "groups", "g", "gd"])
def test_valid_groups_are_kept(group):
    assert fairness.validate_group(group) == group


@pytest.mark.parametrize("group", ["", "a#b", "has space", "a" * 65, 7, None, "é", fairness.DEFAULT_GROUP])
def test_bad_groups_are_refused_with_what_is_allowed(group):
    with pytest.raises(InvalidTaskInput, match="group"):
        fairness.validate_group(group)


@given(group=GROUPS, shard=st.integers(0, 63))
def test_partition_keys_say_which_group_and_kind_they_are(group, shard):
    ready, delayed = fairness.group_ready_key("work", shard, group), fairness.group_delayed_key("work", shard, group)
    assert fairness.group_of_partition(ready) == fairness.group_of_partition(delayed) == group
    assert not fairness.is_delayed_partition(ready) and fairness.is_delayed_partition(delayed)
    # The default group's partitions, and the ring, are told apart from every group's whatever its name.
    assert fairness.group_of_partition(keys.ready_key("work", shard)) is None
    assert fairness.is_delayed_partition(keys.delayed_key("work", shard))
    assert fairness.ring_key("work", shard) not in (ready, delayed)
    assert fairness.group_of_ring_sort(fairness.ring_sort(group)) == group


def test_the_ring_walks_from_after_the_cursor_round_to_it():
    entries = [RingEntry(g, 0, s) for g, s in (("a", "1#a"), ("b", "2#b"), ("c", "3#c"))]
    assert [e.group for e in fairness.ring_from(entries, None)] == ["a", "b", "c"]
    assert [e.group for e in fairness.ring_from(entries, "2#b")] == ["c", "a", "b"]
    assert [e.group for e in fairness.ring_from(entries, "9")] == ["a", "b", "c"]


@given(st.lists(st.integers(0, 6), max_size=8))
def test_round_robin_takes_one_of_each_in_turn_and_loses_nothing(sizes):
    sources = [[(source, k) for k in range(size)] for source, size in enumerate(sizes)]
    merged = list(fairness.round_robin(iter(items) for items in sources))
    assert sorted(merged) == sorted(x for items in sources for x in items)
    # Turn by turn: the k-th task of every group comes before the (k+1)-th of any, and each group keeps its order.
    assert [k for _, k in merged] == sorted(k for _, k in merged)
    for source, items in enumerate(sources):
        assert [x for x in merged if x[0] == source] == items


@given(now=st.integers(0, 10**13), period=st.sampled_from([0.5, 1.0, 10.0, 60.0]))
def test_rate_windows_are_fixed_and_the_next_one_starts_after_now(now, period):
    window = fairness.rate_window(now, period)
    following = fairness.next_window_ms(now, period)
    assert following > now and fairness.rate_window(following, period) == window + 1
    assert fairness.rate_window(following - 1, period) == window


@pytest.mark.parametrize(("text", "parsed"), [("", None), ("0", None), ("10/1", (10, 1.0)), ("600/60", (600, 60.0)), ("5", (5, 1.0))])
def test_rate_limits_read_as_n_per_p_seconds(text, parsed):
    assert fairness.parse_rate(text) == parsed


@pytest.mark.parametrize("text", ["ten/1", "10/x", "0/5", "10/0", "-1/1"])
def test_bad_rate_limits_say_the_form(text):
    with pytest.raises(InvalidTaskInput):
        fairness.parse_rate(text)


def test_limits_check_their_ranges_and_pauses():
    assert GroupLimits(paused_until_ms=100).paused(99) and not GroupLimits(paused_until_ms=100).paused(100)
    with pytest.raises(InvalidTaskInput, match="concurrency"):
        GroupLimits(concurrency=0)
    with pytest.raises(InvalidTaskInput, match="period"):
        GroupLimits(rate=1, period_seconds=0)


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.integers(0, 99)), max_size=12),
       st.dictionaries(st.sampled_from(["a", "b", "c", None]), st.sampled_from([0.0, 0.5, 3.0])),
       st.lists(st.sampled_from(["a", "b", "c", None]), max_size=6))
def test_least_used_first_orders_by_use_then_running_and_keeps_the_looks_order_among_equals(candidates, use, running):
    ordered = fairness.least_used_first(candidates, lambda c: c[0], use, running)
    counts = Counter(running)

    def rank(c):
        return use.get(c[0], 0.0), counts[c[0]]

    assert Counter(ordered) == Counter(candidates)  # nothing lost or added
    assert [rank(c) for c in ordered] == sorted(rank(c) for c in candidates)
    for r in {rank(c) for c in candidates}:
        assert [c for c in ordered if rank(c) == r] == [c for c in candidates if rank(c) == r]


def test_a_group_that_had_the_runner_lately_comes_after_one_that_did_not_whatever_runs_now():
    look = [("busy", 1), ("quiet", 1), ("busy", 2), (None, 1)]
    # Nothing used yet (a run's start, a clock standing still): fewer running first, as SQS's in-flight counts.
    assert fairness.least_used_first(look, lambda c: c[0], {}, ["busy", "busy", None]) == [
        ("quiet", 1), (None, 1), ("busy", 1), ("busy", 2)]
    # The busy group ran for seconds and runs nothing now; the quiet group runs one task: the quiet one still first.
    assert fairness.least_used_first(look, lambda c: c[0], {"busy": 6.0, "quiet": 0.4}, ["quiet"]) == [
        (None, 1), ("quiet", 1), ("busy", 1), ("busy", 2)]


def test_recent_use_adds_runner_seconds_and_halves_every_half_life():
    use = fairness.RecentUse(half_life=5.0)
    assert use.of("a", 100.0) == 0.0
    use.add("a", 2.0, now=100.0)
    use.add("a", 1.0, now=100.0)
    assert use.of("a", 100.0) == pytest.approx(3.0)
    assert use.of("a", 105.0) == pytest.approx(1.5)
    use.add("a", 0.5, now=110.0)  # 0.75 left of the 3, then 0.5 more
    assert use.of("a", 110.0) == pytest.approx(1.25)
    assert use.of("b", 110.0) == 0.0 and use.of(None, 110.0) == 0.0
    use.add(None, -1.0, now=110.0)  # a clock that stepped back adds nothing
    assert use.of(None, 110.0) == 0.0
    with pytest.raises(ValueError, match="half-life"):
        fairness.RecentUse(half_life=0)


def test_recent_use_forgets_groups_long_unused_once_it_holds_many():
    use = fairness.RecentUse(half_life=1.0)
    for g in range(fairness.RecentUse.PRUNE_AT):
        use.add(f"g{g}", 1.0, now=0.0)
    use.add("late", 1.0, now=60.0)  # past PRUNE_AT: the others, 2**-60 of a second each, are dropped
    assert len(use._use) == 1 and use.of("late", 60.0) == 1.0



def test_a_running_task_weighs_on_its_group_as_at_least_the_expected_task_time():
    use = fairness.use_with_running({"busy": 0.5, "quiet": 1.2}, [("busy", 0.0), ("busy", 2.5), (None, 0.1)], expected=1.0)
    assert use == {"busy": 0.5 + 1.0 + 2.5, "quiet": 1.2, None: 1.0}
    # Three slots free together: the first goes to the group that had least, the second no longer does.
    look = [("busy", 1), ("quiet", 1)]
    first = fairness.least_used_first(look, lambda c: c[0], fairness.use_with_running({"busy": 0.8, "quiet": 1.5}, [], 1.0), [])
    assert first[0] == ("busy", 1)
    after = fairness.use_with_running({"busy": 0.8, "quiet": 1.5}, [("busy", 0.0)], 1.0)
    assert fairness.least_used_first(look, lambda c: c[0], after, ["busy"])[0] == ("quiet", 1)
