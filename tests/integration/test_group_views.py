"""What operators see of fair share's groups (taskqueue/store/group_views.py, and the groups' part of counts.py and
reading.py), on both DynamoDB engines: grouped waiting tasks in every count and stats, listings by group, and the
per-group view (waiting, running, oldest age, limits, pause), noisiest first, with its bounds said."""

from __future__ import annotations

import dataclasses

import pytest

from taskqueue.core.errors import InvalidTaskInput
from taskqueue.core.fairness import DEFAULT_GROUP
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.states import TaskStatus
from taskqueue.store import TaskStore

pytestmark = pytest.mark.dynamodb_engines


def with_settings(store: TaskStore, **changes) -> TaskStore:
    return TaskStore(store._db, dataclasses.replace(store.settings, **changes), store._clock)


def create(store: TaskStore, now_ms: int, count: int = 1, group: str | None = None, **fields) -> list[str]:
    body = {"queue": "work", "count": count, **fields} | ({"group": group} if group else {})
    tasks = new_tasks(parse_create_request(body, store.settings), now_ms, store.settings)
    store.put_tasks(tasks)
    return [t.task_id for t in tasks]


def test_grouped_waiting_tasks_are_in_depth_stats_and_the_boards_partitions(store, clock):
    store = with_settings(store, queue_shards=2)
    create(store, clock.now_ms(), 3)
    create(store, clock.now_ms(), 4, group="acme")
    create(store, clock.now_ms(), 2, group="globex", delaySeconds=60)
    depth = store.depth("work")
    assert (depth.ready, depth.delayed, depth.pending) == (7, 2, 9)
    (stats,) = store.stats(["work"])
    assert (stats.counts["PENDING"], stats.claimable, stats.delayed, stats.groups) == (9, 7, 2, 2)
    partitions, complete = store.group_partitions("work")
    assert complete and {p.group for p in partitions} == {"acme", "globex"}
    counted = [store.count_partition(p, clock.now_ms(), 1000) for p in partitions]
    assert sum(c.live for c in counted) == 6
    # The plain partitions are the default group's, as before.
    assert all(p.group is None for p in store.depth_partitions("work"))


def test_a_ring_read_at_its_cap_says_it_missed_groups(store, clock):
    for name in ("a", "b", "c"):
        create(store, clock.now_ms(), 1, group=name)
    partitions, complete = store.group_partitions("work", cap=2)
    assert not complete and len({p.group for p in partitions}) == 2


def test_a_listing_by_group_walks_that_groups_partitions_in_the_queues_order(store, clock):
    plain = create(store, clock.now_ms(), 2)
    acme = []
    for _ in range(3):
        acme += create(store, clock.now_ms(), 1, group="acme")
        clock.advance(0.01)
    later = create(store, clock.now_ms(), 1, group="acme", delaySeconds=30)
    page = store.list_tasks("work", "PENDING", 2, group="acme")
    rest = store.list_tasks("work", "PENDING", 10, page.next_token, group="acme")
    listed = [t.task_id for t in page.tasks + rest.tasks]
    assert sorted(listed) == sorted(acme + later) and rest.next_token is None
    assert {t.group for t in page.tasks + rest.tasks} == {"acme"}
    assert {t.task_id for t in store.list_tasks("work", None, 10, group=DEFAULT_GROUP).tasks} == set(plain)
    with pytest.raises(InvalidTaskInput, match="PENDING tasks only"):
        store.list_tasks("work", "FAILURE", 10, group="acme")
    with pytest.raises(InvalidTaskInput, match="not valid"):
        store.list_tasks("work", "PENDING", 10, group="a#b")


def test_the_group_view_says_waiting_running_oldest_age_and_limits_noisiest_first(store, clock):
    store = with_settings(store, group_concurrency=4, group_rate=(10, 1.0))
    start = clock.now_ms()
    create(store, start, 2, group="quiet")
    clock.advance(5)
    create(store, clock.now_ms(), 6, group="noisy")
    create(store, clock.now_ms(), 1)
    clock.advance(5)
    assert store.claim(_first_of(store, "noisy"), "w") is not None
    store.set_group_settings("work", "quiet", concurrency=1, paused_until_ms=clock.now_ms() + 60_000)
    view = store.group_views("work")
    assert [g.group for g in view.groups] == ["noisy", "quiet", DEFAULT_GROUP]
    noisy, quiet, default = view.groups
    assert (noisy.waiting, noisy.running, noisy.oldest_waiting_ms) == (5, 1, 5000)
    assert (noisy.limits.concurrency, noisy.limits.rate, noisy.own) == (4, 10, frozenset())
    assert (quiet.waiting, quiet.running, quiet.oldest_waiting_ms) == (2, 0, 10_000)
    assert quiet.limits.concurrency == 1 and quiet.own == {"concurrency", "pause"} and quiet.paused(clock.now_ms())
    assert (default.waiting, default.limits.concurrency, default.on_ring) == (1, None, False)
    assert view.complete and view.waiting == 8
    one = store.group_view("work", "quiet")
    assert one.group == "quiet" and one.waiting == 2


def _first_of(store: TaskStore, group: str):
    return next(c for c in store.candidates("work", 50) if c.group == group)


def test_a_group_without_waiting_tasks_is_viewed_by_name_and_bounds_are_said(store, clock):
    assert store.group_view("work", "nobody").waiting == 0
    create(store, clock.now_ms(), 5, group="big")
    create(store, clock.now_ms(), 1, group="small")
    view = store.group_views("work", cap=3)
    big = next(g for g in view.groups if g.group == "big")
    assert (big.waiting, big.waiting_complete, view.complete) == (3, False, False)
    capped = store.group_views("work", max_groups=2)
    assert capped.groups_seen == 3 and len(capped.groups) == 2 and not capped.complete


def test_running_tasks_are_counted_by_group(store, clock):
    create(store, clock.now_ms(), 2, group="acme")
    create(store, clock.now_ms(), 1)
    for candidate in store.candidates("work", 10):
        store.claim(candidate, "w")
    running, complete = store.running_by_group("work")
    assert complete and running == {"acme": 2, DEFAULT_GROUP: 1}
    assert store.count("work", TaskStatus.TAKEN) == 3
