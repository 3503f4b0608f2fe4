"""Queue control in the queue table (taskqueue/store/control.py): pause, claim lanes and running-limit slots, on
both DynamoDB engines (``make test`` runs this module on moto and on DynamoDB Local)."""

from __future__ import annotations

import dataclasses

import pytest

from taskqueue.core.errors import InvalidTaskInput, TaskQueueError
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.store import TaskStore
from taskqueue.store.control import SLOT_LEASE_SECONDS, WATCHER_SLOT_LEASE_SECONDS
from taskqueue.work.worker import Worker

pytestmark = pytest.mark.dynamodb_engines


def with_settings(store: TaskStore, **changes) -> TaskStore:
    return TaskStore(store._db, dataclasses.replace(store.settings, **changes), store._clock)


def create(store: TaskStore, clock, count: int = 1) -> None:
    request = parse_create_request({"queue": "work", "count": count}, store.settings)
    store.put_tasks(new_tasks(request, clock.now_ms(), store.settings))


def test_a_paused_queue_is_not_claimed_and_resumes_where_it_was(store, clock):
    create(store, clock, 2)
    assert not store.is_paused("work") and not store.control("work").paused
    store.pause("work")
    assert store.is_paused("work") and not store.is_paused("calls")
    report = Worker(store, lambda task: None, capacity=3, owner="w", clock=clock).run("work", 5)
    assert (report.claimed, report.stopped_by, report.work_remains) == (0, "paused", False)
    assert len(store.candidates("work", 10)) == 2  # the tasks keep their places
    store.resume("work")
    report = Worker(store, lambda task: None, capacity=3, owner="w", clock=clock).run("work", 5)
    assert report.succeeded == 2
    with pytest.raises(InvalidTaskInput, match="not configured"):
        store.pause("nope")


def test_slots_are_taken_only_while_free_and_come_back_when_freed_or_lapsed(store, clock):
    store = with_settings(store, running_limit=2, lease_seconds=300)
    first = store.acquire_slots("work", "a", 5)
    assert len(first) == 2 and {s.index for s in first} == {0, 1}
    assert store.acquire_slots("work", "b", 1) == []
    assert store.control("work").slots_held == 2
    assert store.free_token(first[0])
    assert not store.free_token(first[0])  # freed already: not ours any more
    (again,) = store.acquire_slots("work", "b", 1)
    assert again.index == first[0].index
    clock.advance(301)  # the other slot's lease passes: another worker may take it
    assert store.renew_token(first[1], clock.now_ms() + 300_000) is None
    assert len(store.acquire_slots("work", "c", 1)) == 1
    with pytest.raises(InvalidTaskInput, match="no running limit"):
        with_settings(store, running_limit=0).acquire_slots("work", "a", 1)


def test_a_watchers_slots_hold_a_long_lease_which_only_the_next_watcher_may_take(store, clock):
    """Issue 29: the queue's watcher leases its slots for WATCHER_SLOT_LEASE_SECONDS, a helper for SLOT_LEASE_SECONDS.
    A helper never takes a watcher's slot before its lease passes; the next watcher takes it at once (the previous
    watcher's watch has ended, so it lapsed: a watcher shortens its slots before it ends its watch), and the
    previous watcher's renewals then fail. A shortened slot is an ordinary one: no watcher may take it while it holds."""
    store = with_settings(store, running_limit=3, lease_seconds=300)
    now = clock.now_ms()
    watched = store.acquire_slots("work", "watcher-1", 2, watcher=True)
    (helped,) = store.acquire_slots("work", "helper", 1)
    assert {s.expires_ms - now for s in watched} == {int(WATCHER_SLOT_LEASE_SECONDS * 1000)}
    assert helped.expires_ms - now == int(SLOT_LEASE_SECONDS * 1000) and not helped.watched
    clock.advance(SLOT_LEASE_SECONDS + 1)  # the helper's lapsed; the watcher's hold
    assert [s.index for s in store.acquire_slots("work", "helper-2", 3)] == [helped.index]
    clock.advance(1)
    retaken = store.acquire_slots("work", "watcher-2", 3, watcher=True)
    assert sorted(s.index for s in retaken) == sorted(s.index for s in watched)  # not helper-2's live short one
    assert all(store.relet_slot(s, watched=True) is None for s in watched)  # the lapsed watcher's are gone
    (short,) = [store.relet_slot(s, watched=False) for s in retaken[:1]]
    assert short is not None and short.expires_ms == clock.now_ms() + int(SLOT_LEASE_SECONDS * 1000)
    assert short.index not in {s.index for s in store.acquire_slots("work", "watcher-3", 3, watcher=True)}
    assert store.free_token(short)


def test_a_watchers_slots_count_as_held_while_it_watches_and_not_after_its_watch_lapses(store, clock):
    """What operators see (``control``, the board): a dead watcher's slots, far from their expiry, are free to the
    next watcher once its watch lapses, so they are not shown held."""
    store = with_settings(store, running_limit=3, lease_seconds=300)
    assert store.watch("work", "watcher-1", clock.now_ms() + 5000) is not None
    store.acquire_slots("work", "watcher-1", 2, watcher=True)
    store.acquire_slots("work", "helper", 1)
    assert store.control("work").slots_held == 3
    clock.advance(4)
    assert store.control("work").slots_held == 3
    clock.advance(2)  # the watch has lapsed, and the helper's slot with it
    assert store.control("work").slots_held == 0
    store.pause("work")
    assert store.control("work").paused


def test_claim_lanes_are_one_per_worker_and_show_who_claims_now(store, clock):
    store = with_settings(store, claim_lanes=3)
    until = clock.now_ms() + 60_000
    lanes = [store.take_lane("work", f"w{i}", until) for i in range(4)]
    assert all(lane is not None for lane in lanes[:3]) and lanes[3] is None  # three lanes, a fourth worker waits
    assert sorted(lane.index for lane in lanes[:3]) == [0, 1, 2]
    view = store.lane_view(lanes[0])
    assert view.held == (0, 1, 2) and view.lane == lanes[0].index
    assert store.free_lane(lanes[1])
    assert store.lane_view(lanes[0]).held == tuple(sorted({lanes[0].index, lanes[2].index}))
    clock.advance(61)  # the other lanes lapse at their claim deadline
    assert store.lane_view(lanes[0]).held == (lanes[0].index,)
    assert store.take_lane("work", "w9", clock.now_ms() + 60_000) is not None
    # No control item is a task: listings and counts do not see them.
    assert store.list_tasks("work").tasks == []


def test_throttled_control_reads_and_writes_slow_a_run_down_but_never_stop_or_unbound_it(store, clock):
    # Throttling past the SDK's retries on each control request: the pause read, the lanes read, the slot read,
    # a slot write. The run still does every task, within the limit, and counts each refusal.
    from tests.faults import FaultyClient

    faulty = FaultyClient(store._db)
    throttled = TaskStore(faulty, dataclasses.replace(store.settings, claim_lanes=2, running_limit=2), clock)
    create(throttled, clock, 4)
    # Another worker watches the queue, so this run is a helper: a lone watcher takes no lane (issue 21: lanes only
    # once another claimer is met) and its watch write returns the record the pause check reads, so only a helper
    # still makes every control read this test refuses (the lanes read, then the record's pause read).
    assert throttled.watch("work", "the-watcher", clock.now_ms() + 60_000) is not None
    faulty.fail("get_item", "ThrottlingException", "ProvisionedThroughputExceededException")
    faulty.fail("batch_get_item", "ThrottlingException")
    running, most = 0, 0

    def runner(task):
        nonlocal running, most
        running += 1
        most = max(most, running)
        running -= 1

    report = Worker(throttled, runner, capacity=3, owner="w", clock=clock).run("work", 30)
    assert {code for _, code in faulty.raised} == {"ThrottlingException", "ProvisionedThroughputExceededException"}
    assert report.succeeded == 4 and report.stopped_by == "empty", report
    assert report.retried == len(faulty.raised) == 3
    assert throttled.control("work").slots_held == 0 and most <= 2


def test_slots_taken_before_a_refused_slot_write_are_given_back(store, clock):
    from tests.faults import FaultyClient

    faulty = FaultyClient(store._db)
    limited = TaskStore(faulty, dataclasses.replace(store.settings, running_limit=3), clock)
    faulty.fail("update_item", "", "ThrottlingException")  # the first slot write goes through, the second is refused
    with pytest.raises(TaskQueueError):
        limited.acquire_slots("work", "w", 3)
    assert limited.control("work").slots_held == 0  # the first slot was freed, not left held for a lease
