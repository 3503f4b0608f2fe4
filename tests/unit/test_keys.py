import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskqueue.core import keys
from taskqueue.core.errors import InvalidTaskInput
from taskqueue.core.keys import Order

times = st.integers(min_value=0, max_value=10**14)
priorities = st.integers(min_value=keys.MIN_PRIORITY, max_value=keys.MAX_PRIORITY)
ids = st.text(alphabet="abcdef0123456789-", min_size=1, max_size=36)


def served_order(tasks, order):
    """The order a descending ReadyIndex query would return the tasks in."""
    return sorted(tasks, key=lambda t: keys.ready_sort(t[0], t[1], t[2], order), reverse=True)


def test_lifo_serves_newest_first_and_fifo_oldest_first():
    tasks = [(0, 1000, "a"), (0, 3000, "b"), (0, 2000, "c")]
    assert [t[2] for t in served_order(tasks, Order.LIFO)] == ["b", "c", "a"]
    assert [t[2] for t in served_order(tasks, Order.FIFO)] == ["a", "c", "b"]


def test_priority_comes_before_age_in_both_orders():
    tasks = [(0, 9000, "new-low"), (5, 1000, "old-high"), (5, 2000, "newer-high")]
    assert [t[2] for t in served_order(tasks, Order.LIFO)] == ["newer-high", "old-high", "new-low"]
    assert [t[2] for t in served_order(tasks, Order.FIFO)] == ["old-high", "newer-high", "new-low"]


def test_equal_times_do_not_collide():
    a = keys.ready_sort(0, 1000, "a", Order.LIFO)
    b = keys.ready_sort(0, 1000, "b", Order.LIFO)
    assert a != b


@given(st.lists(st.tuples(priorities, times, ids), min_size=2, max_size=30, unique_by=lambda t: t[2]),
       st.sampled_from(list(Order)))
def test_descending_key_order_is_priority_then_age(tasks, order):
    served = served_order(tasks, order)
    for first, second in zip(served, served[1:]):
        assert first[0] >= second[0]
        if first[0] == second[0] and first[1] != second[1]:
            assert (first[1] > second[1]) if order is Order.LIFO else (first[1] < second[1])


@given(priorities, times, ids, st.sampled_from(list(Order)))
def test_sort_key_round_trips(priority, time_ms, task_id, order):
    assert keys.parse_ready_sort(keys.ready_sort(priority, time_ms, task_id, order), order) == (priority, time_ms, task_id)


@pytest.mark.parametrize("priority", [-1, 1000, 1.5, "1", True, None])
def test_bad_priority_is_refused_with_the_range(priority):
    with pytest.raises(InvalidTaskInput, match="from 0 to 999"):
        keys.ready_sort(priority, 1, "a", Order.LIFO)


@pytest.mark.parametrize("name", ["", "a#b", "x" * 65, "with space", 5])
def test_bad_queue_names_are_refused(name):
    with pytest.raises(InvalidTaskInput, match="queue name"):
        keys.validate_queue_name(name)


@given(ids, st.integers(min_value=1, max_value=64))
def test_shard_is_stable_and_in_range(task_id, shards):
    shard = keys.shard_for(task_id, shards)
    assert 0 <= shard < shards
    assert shard == keys.shard_for(task_id, shards)


def test_index_keys_embed_queue_shard_and_status():
    assert keys.ready_key("work", 3) == "work#3"
    assert keys.status_key("work", "TAKEN", 0) == "work#TAKEN#0"
