"""Issue 21: a worker's look reads what it can claim and no more, on both DynamoDB engines.

DynamoDB bills a Query by the 4 KB it reads, at least half a unit per request. A look used to read the ReadyIndex in
pages of PAGE_SIZE and to ask for one more entry per stale id it might meet, so a lone worker draining a backlog read
~3 pages per task it claimed (bench/results.md: 1.48 read units per task). Now each read of a look asks for what is
still missing, and stale entries are passed over by the read without being counted.
"""

from __future__ import annotations

import pytest

from taskqueue.core import fairness
from taskqueue.work.worker import Worker
from tests.integration.test_delayed_head import create, recorded

pytestmark = pytest.mark.dynamodb_engines


def ready_queries(client) -> list[dict]:
    """The reads of queue "work"'s ready partition (shard 0)."""
    return [kw for op, kw in client.requests if op == "query" and kw["ExpressionAttributeValues"][":k"]["S"] == "work#0"]


def test_a_look_of_more_entries_than_a_page_is_one_request(store, clock):
    reader, client = recorded(store, page_size=10)
    ids = create(reader, clock, 30)
    found, skipped = reader.look("work", 25)
    assert len(found) == 25 and skipped == 0
    assert [kw["Limit"] for kw in ready_queries(client)] == [25]  # before: three pages of 10
    assert {c.task_id for c in found} <= set(ids)


def test_stale_entries_are_passed_over_and_the_next_read_asks_only_for_the_shortfall(store, clock):
    reader, client = recorded(store)
    create(reader, clock, 12)
    first = reader.candidates("work", 12)
    stale = {c.task_id for c in first[:4]}  # say this worker has just claimed the four at the head
    found, skipped = reader.look("work", 5, skip=stale)
    assert skipped == 4
    assert [c.task_id for c in found] == [c.task_id for c in first[4:9]]  # the queue's order, stale ones left out
    assert [kw["Limit"] for kw in ready_queries(client)][-2:] == [5, 4]  # 5 asked, 1 fresh found, 4 missing


def test_a_short_queue_is_read_whole_in_one_request(store, clock):
    reader, client = recorded(store)
    create(reader, clock, 3)
    found, _ = reader.look("work", 10)
    assert len(found) == 3 and len(ready_queries(client)) == 1


def test_a_look_over_groups_reads_the_busy_group_once_when_the_others_are_empty(store, clock):
    # Each group's read asks for what the look still misses: the busy group fills the look's later rounds from its
    # first page (before: a fair part of the look, one entry here, and one more request per round).
    reader, client = recorded(store)
    create(reader, clock, 6, group="busy")
    found, _ = reader.look("work", 3)
    assert [c.group for c in found] == ["busy"] * 3
    busy = fairness.group_ready_key("work", 0, "busy")
    limits = [kw["Limit"] for op, kw in client.requests
              if op == "query" and kw["ExpressionAttributeValues"][":k"]["S"] == busy]
    assert limits == [3]


def test_a_lone_worker_draining_a_backlog_reads_each_look_in_one_request(store, clock, monkeypatch):
    reader, client = recorded(store, page_size=10)
    create(reader, clock, 30)
    real_look = reader.look
    limits_per_look: list[list[int]] = []

    def look(*args, **kwargs):  # the Limit of each read of the ready partition a look makes (the loop reads alone)
        before = len(ready_queries(client))
        try:
            return real_look(*args, **kwargs)
        finally:
            limits_per_look.append([kw["Limit"] for kw in ready_queries(client)[before:]])

    monkeypatch.setattr(reader, "look", look)
    # One task at a time: each look follows the last task's end, so which entries are stale is decided, not raced.
    report = Worker(reader, lambda task: None, capacity=1, owner="w", clock=clock).run("work", 30)
    assert report.succeeded == 30 and report.lost == 0
    # A look reads the ready partition once, however many entries it asks for (before: the look of 10 + one per stale
    # id read a second and a third page of entries the worker had just claimed). Only a look that meets entries it
    # cannot claim reads once more, for the shortfall alone (the first look after a claim: the index still shows it).
    assert len(limits_per_look) >= 30  # one a claim, and the empty one that ends the run
    assert all(len(limits) == 1 or (len(limits) == 2 and limits[1] < limits[0]) for limits in limits_per_look), \
        limits_per_look
    assert sum(len(limits) == 1 for limits in limits_per_look) > len(limits_per_look) / 2, limits_per_look


def test_a_ring_that_fits_a_page_is_read_in_one_query_from_the_cursor_on(store, clock):
    # A look with a cursor read the ring in two queries (after the cursor, then from its start up to it); once a look
    # has read the whole ring in less than a page, the next reads it whole from its start and turns it round the
    # cursor: one query, the same order.
    from taskqueue.store import FairTurn

    reader, client = recorded(store)
    for group in ("a", "b", "c", "d"):
        create(reader, clock, 2, group=group)

    def ring_reads() -> int:
        return sum(1 for op, kw in client.requests
                   if op == "query" and kw["ExpressionAttributeValues"][":k"]["S"] == fairness.ring_key("work", 0))

    first, _ = reader.look("work", 1, fair=FairTurn())
    assert ring_reads() == 1
    turn = FairTurn(after={0: fairness.ring_sort(first[0].group)})
    client.requests.clear()
    found, _ = reader.look("work", 4, fair=turn)
    assert ring_reads() == 1  # before: 2
    walked, _ = recorded(store)[0].look("work", 4, fair=turn)  # a store that has not read the ring: the two-part walk
    assert [c.group for c in found] == [c.group for c in walked] and len({c.group for c in found}) == 4
