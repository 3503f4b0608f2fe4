import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskqueue.core.errors import InvalidEvent
from taskqueue.core.stream import ChangeKind, classify
from taskqueue.store import is_claimable
from taskqueue.work.outcomes import backoff_ms
from taskqueue.work.worker import claim_window_seconds

TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def image(status="PENDING"):
    return {"taskId": "t1", "queue": "work", "taskStatus": status}


def test_insert_of_pending_task_wakes_its_queue():
    change = classify("INSERT", None, image(), None)
    assert (change.kind, change.queue, change.task_id) == (ChangeKind.CREATED, "work", "t1")


def test_ttl_remove_of_pending_task_is_shed_and_of_finished_task_is_cleanup():
    assert classify("REMOVE", TTL_IDENTITY, None, image("PENDING")).kind is ChangeKind.SHED
    assert classify("REMOVE", TTL_IDENTITY, None, image("SUCCESS")).kind is ChangeKind.CLEANED


def test_a_user_delete_is_not_shedding():
    assert classify("REMOVE", {"type": "User", "principalId": "me"}, None, image()).kind is ChangeKind.OTHER
    assert classify("REMOVE", None, None, image()).kind is ChangeKind.OTHER


@pytest.mark.parametrize("new", [None, {}, {"taskId": "x"}, {"queue": "work", "taskStatus": "PENDING"}])
def test_malformed_insert_is_an_error_naming_what_is_missing(new):
    with pytest.raises(InvalidEvent, match="INSERT record"):
        classify("INSERT", None, new, None)


@pytest.mark.parametrize(
    ("event_name", "identity", "new", "old", "reason"),
    [
        ("INSERT", None, {"taskId": "t1", "queue": "", "taskStatus": "PENDING"}, None, "queue"),
        ("INSERT", None, {"taskId": "t1", "queue": None, "taskStatus": "PENDING"}, None, "queue"),
        ("INSERT", None, {"taskId": "t1", "queue": "work", "taskStatus": "WAITING"}, None, "WAITING"),
        ("REMOVE", TTL_IDENTITY, None, {"taskId": "t1", "queue": "", "taskStatus": "PENDING"}, "queue"),
        ("REMOVE", TTL_IDENTITY, None, {"taskId": "t1", "queue": "work", "taskStatus": "pending"}, "pending"),
    ],
)
def test_a_task_image_with_an_empty_queue_or_no_state_is_malformed(event_name, identity, new, old, reason):
    """Such a record can never succeed: it is refused as malformed, never mistaken for 'nothing to do'."""
    with pytest.raises(InvalidEvent, match=reason):
        classify(event_name, identity, new, old)


@given(st.integers(1, 30), st.floats(0, 10), st.floats(0, 600), st.integers(0, 2**32))
def test_backoff_stays_within_its_bounds(attempt, base, cap, seed):
    delay = backoff_ms(attempt, base, cap, random.Random(seed))
    assert 0 <= delay <= min(cap, base * 2 ** (attempt - 1)) * 1000 + 1


def test_backoff_grows_exponentially_on_average():
    rng = random.Random(1)
    means = [sum(backoff_ms(a, 1, 1000, rng) for _ in range(400)) / 400 for a in (1, 3, 5)]
    assert means[0] < means[1] < means[2]
    assert 300 < means[0] < 700 and 1600 < means[1] < 2400


def test_claim_window_is_budget_but_at_most_half_the_remaining_time():
    assert claim_window_seconds(60, 180) == 60
    assert claim_window_seconds(60, 100) == 50
    assert claim_window_seconds(60, -5) == 0


def test_claimable_only_before_ttl_and_after_not_before():
    now = 1_000_000_000_000
    assert is_claimable(now // 1000 + 1, None, now)
    assert not is_claimable(now // 1000, None, now)
    assert not is_claimable(now // 1000 + 10, now + 1, now)
    assert is_claimable(now // 1000 + 10, now, now)
