"""What a worker of queue "work" reads and writes per task, on both DynamoDB engines.

- The delayed partitions are read only when the queue's record says an entry may be due (``taskqueue.core.delayed_head``):
  a raise of the head never hides an entry a writer announced (the index's lag, a writer in between), and an entry
  whose writer died before announcing it is found by the safety net.
- Running-limit slots are held across a run's claims: not one take and one free per task.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from taskqueue.core.errors import TaskQueueError
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.services import Services
from taskqueue.store import TaskStore
from taskqueue.wakeups.safety_net import run_safety_net
from taskqueue.work.worker import Worker
from tests.faults import FaultyClient

pytestmark = pytest.mark.dynamodb_engines


def recorded(store: TaskStore, **changes) -> tuple[TaskStore, FaultyClient]:
    """The store on a client that records every request (FaultyClient without faults)."""
    client = FaultyClient(store._db)
    return TaskStore(client, dataclasses.replace(store.settings, **changes), store._clock), client


def create(store: TaskStore, clock, count: int = 1, **body) -> list[str]:
    request = parse_create_request({"queue": "work", "count": count, **body}, store.settings)
    tasks = new_tasks(request, clock.now_ms(), store.settings)
    store.put_tasks(tasks)
    return [t.task_id for t in tasks]


def queries_of(client: FaultyClient, partition_suffix: str) -> int:
    return sum(
        1 for op, kw in client.requests
        if op == "query" and kw["ExpressionAttributeValues"][":k"]["S"].endswith(partition_suffix)
    )


def item_writes(client: FaultyClient, id_part: str) -> list[str]:
    return [kw["UpdateExpression"] for op, kw in client.requests if op == "update_item" and id_part in kw["Key"]["taskId"]["S"]]


def test_a_worker_reads_no_delayed_partition_and_takes_each_slot_once(store, clock):
    # Before: a delayed query on every look (and two at the end), and one slot take and one free per task.
    worker_store, client = recorded(store, running_limit=3)
    create(worker_store, clock, 9)
    report = Worker(worker_store, lambda task: None, capacity=3, owner="w", clock=clock).run("work", 30)
    assert report.succeeded == 9 and report.lost == 0
    assert queries_of(client, "#delayed") == 0
    slot_writes = item_writes(client, "#slot#")
    takes = [w for w in slot_writes if w.startswith("SET")]
    frees = [w for w in slot_writes if w.startswith("REMOVE")]
    assert len(takes) <= 3 and len(frees) == len(takes), slot_writes  # was 9 and 9
    assert worker_store.control("work").slots_held == 0


def test_a_retry_is_announced_and_claimed_when_due_and_the_head_is_raised_after(store, clock):
    worker_store, client = recorded(store, retry_base_seconds=4.0)
    create(worker_store, clock)
    attempts = []

    def runner(task):
        attempts.append(clock.now_ms())
        if len(attempts) == 1:
            raise RuntimeError("the legacy system is busy")

    # The backoff is jittered: this rng makes it 3.8 s, past the index's lag allowance (1 s), so the run that
    # claims the retry may raise the head. A retry due sooner leaves the head low for the next look to raise
    # (one read of the delayed partitions more, never an entry hidden): seeds whose backoff is under 1 s did.
    rng = random.Random(2)
    report = Worker(worker_store, runner, capacity=1, owner="w", clock=clock, rng=rng).run("work", 30)
    assert report.released == 1 and report.succeeded == 1
    assert attempts[1] - attempts[0] > 1000
    first_delayed = next(i for i, (op, kw) in enumerate(client.requests)
                         if op == "query" and kw["ExpressionAttributeValues"][":k"]["S"].endswith("#delayed"))
    release = next(i for i, (op, kw) in enumerate(client.requests)
                   if op == "update_item" and "notBefore" in kw.get("ExpressionAttributeNames", {}).values())
    assert first_delayed > release  # nothing read the delayed partition before a delayed entry existed
    record = worker_store.read_record("work")
    assert record.delayed_seq == 1 and record.delayed_head_ms is None  # announced, then raised once it was done


def test_a_due_entry_the_looks_pass_over_is_searched_for_again_only_every_few_seconds(store, clock):
    # LIFO: an old delayed task, due, waits behind newer work. Every look reads the delayed partition (the entry may
    # be claimable now), but the search for the next head (every delayed partition of the queue, a page each) found
    # the same due entry each time: it is made again only after DUE_REFRESH_SECONDS (before: after every look).
    worker_store, client = recorded(store, page_size=5)
    (old,) = create(worker_store, clock, delaySeconds=1)
    clock.advance(5.0)
    create(worker_store, clock, 30)
    claimed = []
    report = Worker(worker_store, lambda task: claimed.append(task.task_id), capacity=1, owner="w", clock=clock).run("work", 30)
    assert report.succeeded == 31 and claimed[-1] == old  # newest first: the old task last
    delayed = [kw for op, kw in client.requests
               if op == "query" and kw["ExpressionAttributeValues"][":k"]["S"].endswith("#delayed")]
    looks = [kw for kw in delayed if ":until" in kw["ExpressionAttributeValues"]]
    searches = [kw for kw in delayed if ":until" not in kw["ExpressionAttributeValues"]]
    assert len(looks) >= 20
    assert len(searches) <= 3, len(searches)  # the first, and after the old task was claimed


def test_a_raise_waits_for_the_index_and_loses_to_a_writer_in_between(store, clock):
    (task_id,) = create(store, clock, delaySeconds=60)
    seen = store.read_record("work")
    not_before = store.get(task_id).not_before_ms
    assert seen.delayed_head_ms == not_before and seen.delayed_seq == 1
    # A look right after the announcement may not see the entry yet (GSI lag): it may not raise the head past it.
    assert store.raise_delayed_head("work", seen, None, clock.now_ms()) is None
    assert store.read_record("work").delayed_head_ms == not_before
    clock.advance(1.0)
    # Another delayed entry announced after the reader read the record: its raise is refused.
    store.note_delayed("work", not_before + 5_000)
    after = store.raise_delayed_head("work", seen, None, clock.now_ms())
    assert after is not None and after.delayed_seq == 2 and after.delayed_head_ms == not_before
    # Read again, late enough: the head moves to what the index shows.
    assert store.raise_delayed_head("work", after, not_before + 5_000, clock.now_ms() + 1_000).delayed_head_ms == not_before + 5_000


def test_an_entry_whose_writer_died_before_announcing_it_is_found_by_the_safety_net(services: Services, clock):
    store = services.store

    class DiedBeforeAnnouncing(TaskStore):
        def note_delayed_tasks(self, entries, now_ms=None):
            raise TaskQueueError("the producer died between its tasks and its announcement")

    dying = DiedBeforeAnnouncing(store._db, store.settings, clock)
    with pytest.raises(TaskQueueError):
        create(dying, clock, delaySeconds=2)
    clock.advance(3)
    assert Worker(store, lambda task: None, capacity=1, owner="w1", clock=clock).run("work", 5).claimed == 0
    run_safety_net(services)
    assert store.read_record("work").delayed_head_ms is not None
    assert Worker(store, lambda task: None, capacity=1, owner="w2", clock=clock).run("work", 5).succeeded == 1


def delayed_looks(client: FaultyClient, group: str) -> int:
    """A look's reads (bounded by ``:until``) of one group's delayed partition."""
    return sum(
        1 for op, kw in client.requests
        if op == "query" and kw["ExpressionAttributeValues"][":k"]["S"].endswith(f"#gd#{group}")
        and ":until" in kw["ExpressionAttributeValues"]
    )


def test_while_a_due_entry_waits_behind_newer_work_the_looks_read_only_its_groups_delayed_partition(store, clock):
    # Issue 30: with groups, a due retry that stays behind newer work (LIFO) made every look read every group's delayed
    # partition (one query per group on the ring) until the retry ran or was shed. A look now reads the delayed
    # partitions the last search found entries in (``DelayedScope``), here group b's alone.
    worker_store, client = recorded(store, page_size=5)
    (old,) = create(worker_store, clock, delaySeconds=1, group="b")
    clock.advance(5.0)
    for group in ("a", "b", "c"):
        create(worker_store, clock, 8, group=group)
    claimed = []
    report = Worker(worker_store, lambda task: claimed.append(task.task_id), capacity=1, owner="w", clock=clock).run("work", 30)
    assert report.succeeded == 25 and old in claimed
    assert delayed_looks(client, "b") >= 15
    # The looks before the first search read them all (it runs once a look finds no delayed entry among its tasks).
    assert delayed_looks(client, "a") <= 2 and delayed_looks(client, "c") <= 2, (delayed_looks(client, "a"), delayed_looks(client, "c"))


def test_an_entry_announced_by_another_writer_makes_the_looks_read_every_delayed_partition_again(store, clock):
    from taskqueue.work.delayed_view import DelayedView
    from taskqueue.work.record_view import RecordView

    worker_store, client = recorded(store)
    create(worker_store, clock, delaySeconds=1, group="b")
    for group in ("a", "b", "c"):
        create(worker_store, clock, 2, group=group)
    clock.advance(5.0)
    control = RecordView(worker_store, "work", clock, lambda *_: False)
    control.see_record(worker_store.read_record("work"))
    view = DelayedView(worker_store, control, clock)
    view.refresh()
    assert view.parts() == frozenset({(0, "b")})
    client.requests.clear()
    view.look(3, clock.now_ms())
    assert (delayed_looks(client, "a"), delayed_looks(client, "b"), delayed_looks(client, "c")) == (0, 1, 0)
    # Another worker releases a retry of group c: its announcement moves delayedSeq on; once this run reads the record,
    # its looks read every delayed partition again, and find c's entry when it falls due.
    (late,) = create(store, clock, delaySeconds=2, group="c")
    control.see_record(worker_store.read_record("work"))
    assert view.parts() is None
    clock.advance(3.0)
    client.requests.clear()
    found, _ = view.look(10, clock.now_ms())
    assert late in {c.task_id for c in found}
    assert delayed_looks(client, "a") == 1 and delayed_looks(client, "c") == 1
