"""Fair share between the groups of one queue (taskqueue/core/fairness.py, store/groups.py, work/fair_share.py), on
both DynamoDB engines: round-robin across groups with each group's own order kept, a lone group served whole, the ring
kept by producers and workers, per-group concurrency (8 workers at once, 0 violations) and rate limits, pauses."""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import threading
import time
import uuid
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor

import pytest

from taskqueue.core import fairness
from taskqueue.core.clock import SystemClock
from taskqueue.core.errors import InvalidField, InvalidTaskInput
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.settings import Settings
from taskqueue.core.states import TaskStatus
from taskqueue.store import FairTurn, TaskStore
from taskqueue.store.groups import DEACTIVATION_GRACE_MS, SETTLE_MS
from taskqueue.work import worker as worker_module
from taskqueue.work.worker import Worker
from tests import dynamodb_local
from tests.integration.test_delayed_head import recorded
from tests.support import FakeClock, create_queue_table

pytestmark = pytest.mark.dynamodb_engines


def with_settings(store: TaskStore, **changes) -> TaskStore:
    return TaskStore(store._db, dataclasses.replace(store.settings, **changes), store._clock)


def create(store: TaskStore, now_ms: int, count: int = 1, group: str | None = None, **fields) -> list[str]:
    body = {"queue": "work", "count": count, **fields} | ({"group": group} if group else {})
    tasks = new_tasks(parse_create_request(body, store.settings), now_ms, store.settings)
    store.put_tasks(tasks)
    return [t.task_id for t in tasks]


def claim_order(store: TaskStore, clock, count: int) -> list[str | None]:
    """The groups of the next ``count`` tasks one worker claims, one at a time (capacity 1, instant runner)."""
    groups: list[str | None] = []

    def runner(task):
        groups.append(task.group)

    worker = Worker(store, runner, capacity=1, owner="w", clock=clock)
    while len(groups) < count:
        before = len(groups)
        worker.run("work", 60)
        if len(groups) == before:
            break
    return groups[:count]


def test_a_grouped_task_waits_in_its_groups_partition_and_puts_the_group_on_the_ring(store, clock):
    (task_id,) = create(store, clock.now_ms(), group="acme")
    task = store.get(task_id)
    assert task.group == "acme"
    (candidate,) = store.candidates("work", 10)
    assert (candidate.task_id, candidate.group) == (task_id, "acme")
    (entry,) = store.whole_ring("work", 0)
    assert (entry.group, entry.shard, entry.sort) == ("acme", 0, fairness.ring_sort("acme"))
    assert store.read_record("work").has_groups


def test_claims_go_round_robin_across_groups_and_keep_each_groups_order(store, clock):
    noisy = []
    for _ in range(30):  # one at a time: LIFO serves the newest first
        noisy += create(store, clock.now_ms(), 1, group="noisy")
        clock.advance(0.01)
    quiet = {g: create(store, clock.now_ms(), 2, group=g) for g in ("q1", "q2", "q3")}
    clock.advance(1)
    plain = create(store, clock.now_ms(), 2)
    looked = store.candidates("work", 10)
    by_group = Counter(c.group for c in looked)
    assert by_group == {"noisy": 2, "q1": 2, "q2": 2, "q3": 2, None: 2}  # a fair part each, not noisy's 30
    # Round-robin: the first five candidates are five different groups (the default group among them).
    assert len({c.group for c in looked[:5]}) == 5
    # LIFO inside a group: the newest of noisy's tasks comes first.
    assert [c.task_id for c in looked if c.group == "noisy"] == noisy[::-1][:2]
    assert {c.task_id for c in looked if c.group is None} == set(plain)
    assert all(c.task_id in quiet[c.group] for c in looked if c.group in quiet)


def test_a_lone_group_gets_the_whole_look(store, clock):
    create(store, clock.now_ms(), 12, group="only")
    assert Counter(c.group for c in store.candidates("work", 10)) == {"only": 10}


def test_a_worker_serves_quiet_groups_before_the_noisy_groups_backlog(store, clock):
    create(store, clock.now_ms(), 40, group="noisy")
    clock.advance(1)
    for g in range(9):
        create(store, clock.now_ms(), 1, group=f"quiet-{g}")
    served = claim_order(store, clock, 12)
    # Every quiet group's task is among the first 10 claims (one round of the ring), and noisy's share is a turn each.
    assert {f"quiet-{g}" for g in range(9)} <= set(served[:10])
    assert served.count("noisy") <= 3


@contextlib.contextmanager
def held_runs(store: TaskStore, clock, capacity: int = 2):
    """A worker of ``capacity`` running in a thread whose tasks run until the test releases them: yields the queue of
    tasks as they start and ``release(task)``; at the end every task is released and the worker joined."""
    started: queue.Queue = queue.Queue()
    events: dict[str, threading.Event] = {}

    def event(task_id: str) -> threading.Event:
        return events.setdefault(task_id, threading.Event())

    def runner(task):
        done = event(task.task_id)
        started.put(task)
        assert done.wait(10)

    worker = Worker(store, runner, capacity=capacity, owner="w", clock=clock)
    run = threading.Thread(target=worker.run, args=("work", 60))
    run.start()
    try:
        yield started, lambda task: event(task.task_id).set()
    finally:
        for done in list(events.values()):
            done.set()
        while run.is_alive():
            try:
                event(started.get(timeout=0.2).task_id).set()
            except queue.Empty:
                pass
        run.join()


def test_a_free_slot_goes_to_a_group_holding_none_before_the_next_group_on_the_ring(store, clock):
    """Round-robin from the cursor would give the slot to the busy group (next on the ring after the group just served);
    it already runs a task of this worker's, the other group none: the other group's task is claimed first. Each claim
    looks again: a fair queue reuses no look's leftovers (work/worker.py, LEFTOVER_SECONDS), however little time passed."""
    served, busy, other = sorted(["tenant-a", "tenant-b", "tenant-c"], key=fairness.ring_sort)
    create(store, clock.now_ms(), 3, group=busy)
    with held_runs(store, clock) as (started, release):
        first, second = started.get(timeout=10), started.get(timeout=10)
        assert first.group == second.group == busy
        create(store, clock.now_ms(), 1, group=served)
        release(first)
        third = started.get(timeout=10)
        assert third.group == served  # the walk from the busy group wraps to it
        create(store, clock.now_ms(), 1, group=other)
        release(third)
        fourth = started.get(timeout=10)
        assert fourth.group == other, "the busy group, which holds a slot, was served before a group holding none"


def test_a_free_slot_goes_to_a_quiet_groups_burst_before_a_group_that_had_the_runner_lately(store, clock):
    """The busy group ran two tasks for 3 s; as its last one ends it runs nothing, while the quiet group runs one task
    of a burst of two: the slot goes to the quiet group's second task (by running counts alone it went to the busy
    group, and the quiet burst's older task waited a whole task's time)."""
    create(store, clock.now_ms(), 3, group="busy")
    with held_runs(store, clock) as (started, release):
        first, second = started.get(timeout=10), started.get(timeout=10)
        assert first.group == second.group == "busy"
        clock.advance(3)
        create(store, clock.now_ms(), 2, group="quiet")
        release(first)
        third = started.get(timeout=10)
        assert third.group == "quiet"
        clock.advance(0.5)
        release(second)
        fourth = started.get(timeout=10)
        assert fourth.group == "quiet", "the group that had the runner for 6 slot-seconds took the slot from a quiet burst"


def test_slots_that_free_together_do_not_all_go_to_the_group_that_had_least(store, clock, monkeypatch):
    """The quiet group's task runs 2 s; as it ends, both of the worker's slots are free and one look finds both groups'
    tasks: the first claim goes to the busy group (it had nothing yet), the second to the quiet one, since the claim
    just made weighs on the busy group at once (by the look's order alone both went to the busy group)."""
    create(store, clock.now_ms(), 1, group="quiet")
    claims: list[str] = []
    # The run looks once more after its first claim (empty), then only when the task ends (no idle poll meanwhile):
    # the new tasks are written after that look, so that the task's end is the first to see them.
    monkeypatch.setattr(worker_module, "IDLE_POLL_SECONDS", 60.0)
    looks = [0]
    looked_after_the_claim = threading.Event()
    original_look = store.look

    def counted_look(*args, **kwargs):
        found = original_look(*args, **kwargs)
        looks[0] += 1
        if looks[0] == 2:
            looked_after_the_claim.set()
        return found

    monkeypatch.setattr(store, "look", counted_look)

    def runner(task):
        claims.append(task.group)
        if len(claims) == 1:
            assert looked_after_the_claim.wait(10)
            clock.advance(2)
            body = {"queue": "work", "count": 2}
            store.put_tasks([task for group in ("busy", "quiet") for task in new_tasks(
                parse_create_request(body | {"group": group}, store.settings), clock.now_ms(), store.settings)])

    worker = Worker(store, runner, capacity=2, owner="w", clock=clock)
    worker.run("work", 60)
    assert claims[0] == "quiet"
    assert set(claims[1:3]) == {"busy", "quiet"}, f"both slots that freed together went to one group: {claims}"


def test_without_groups_the_queue_is_served_as_before_and_reads_no_ring(store, clock):
    ids = create(store, clock.now_ms(), 3)
    assert not store.read_record("work").has_groups
    reads = Counter()
    original = store._call

    def counting(operation, **kwargs):
        if operation == "query":
            reads[kwargs["KeyConditionExpression"].split(" ")[0] + ":" + kwargs["ExpressionAttributeValues"][":k"]["S"]] += 1
        return original(operation, **kwargs)

    store._call = counting
    report = Worker(store, lambda task: None, capacity=3, owner="w", clock=clock).run("work", 5)
    assert report.succeeded == 3
    assert not [key for key in reads if key.endswith("#groups")], reads
    assert {store.get(i).status for i in ids} == {TaskStatus.SUCCESS}


def test_an_empty_group_leaves_the_ring_only_after_the_grace_and_a_retry_puts_it_back(store, clock):
    (task_id,) = create(store, clock.now_ms(), group="acme")
    task = store.claim(store.candidates("work", 1)[0], "w")
    assert task is not None
    clock.advance(DEACTIVATION_GRACE_MS / 1000 + 0.1)
    store.candidates("work", 5)  # its one task runs: the group stays, so that a look finds it if its worker dies
    assert [e.group for e in store.whole_ring("work", 0)] == ["acme"]
    assert store.release(task, "w", not_before_ms=clock.now_ms() + 1000)  # a retry: the group is (still) on the ring
    assert [e.group for e in store.whole_ring("work", 0)] == ["acme"]
    clock.advance(DEACTIVATION_GRACE_MS / 1000 + 0.1)
    (due,) = store.candidates("work", 5)  # due by now, found in the group's delayed partition
    assert due.task_id == task_id and due.delayed
    again = store.claim(due, "w")
    assert again is not None and store.complete(again, "w")
    (fresh,) = create(store, clock.now_ms(), group="acme")  # a new activation, its task run at once
    done = store.claim(store.candidates("work", 1)[0], "w")
    assert done is not None and done.task_id == fresh and store.complete(done, "w")
    store.candidates("work", 5)  # an empty look right after the group's last activation: the entry stays
    assert [e.group for e in store.whole_ring("work", 0)] == ["acme"]
    clock.advance(DEACTIVATION_GRACE_MS / 1000 + 0.1)
    store.candidates("work", 5)
    assert store.whole_ring("work", 0) == []


def test_an_empty_group_leaves_the_ring_once_the_worker_saw_its_activation_settle_not_after_the_producers_grace(store, clock):
    """The grace allows for a producer's clock being 5 s off; a worker that saw the activation itself times it on its
    own clock: a reused activation's tasks are in the index SETTLE_MS after the worker first saw it."""
    create(store, clock.now_ms(), group="acme")
    store.complete(store.claim(store.candidates("work", 1)[0], "w"), "w")
    clock.advance(SETTLE_MS / 1000 - 0.2)
    assert store.candidates("work", 5) == []  # not settled: a task written under the reused activation may lag
    assert [e.group for e in store.whole_ring("work", 0)] == ["acme"]
    clock.advance(0.3)
    assert store.candidates("work", 5) == []
    assert store.whole_ring("work", 0) == []  # 2 s after, not 7


def test_a_group_activated_again_after_the_look_saw_it_stays_on_the_ring(store, clock):
    """The removal is conditional on the stamp the look saw: a producer's activation in between (its stamp differs,
    whatever its clock says) keeps the entry, though the look found the partitions empty."""
    create(store, clock.now_ms(), group="acme")
    store.complete(store.claim(store.candidates("work", 1)[0], "w"), "w")
    clock.advance(SETTLE_MS / 1000 + 0.1)
    (seen,) = store.ring("work", 0, 5)
    producer = TaskStore(store._db, store.settings, FakeClock(clock.now_ms() - 30_000))  # its clock 30 s behind
    create(producer, producer._clock.now_ms(), group="acme")
    assert store.may_deactivate("work", seen, clock.now_ms())
    assert not store.deactivate("work", seen, clock.now_ms())
    assert [c.group for c in store.candidates("work", 5)] == ["acme"]


def test_a_group_with_a_running_task_is_not_read_for_its_removal(store, clock):
    """A look that passed over a running task's entry knows the group is not empty: no reads to try to remove it."""
    create(store, clock.now_ms(), group="acme")
    store.claim(store.candidates("work", 1)[0], "w")
    clock.advance(DEACTIVATION_GRACE_MS / 1000 + 1)
    calls = []
    original = store._has_entry
    store._has_entry = lambda partition: calls.append(partition) or original(partition)
    assert store.candidates("work", 5) == []
    assert calls == [] and [e.group for e in store.whole_ring("work", 0)] == ["acme"]


def test_a_delayed_grouped_task_keeps_its_group_on_the_ring_until_it_is_due(store, clock):
    (task_id,) = create(store, clock.now_ms(), group="later", delaySeconds=30)
    clock.advance(DEACTIVATION_GRACE_MS / 1000 + 1)
    assert store.candidates("work", 5) == []
    assert [e.group for e in store.whole_ring("work", 0)] == ["later"]  # not due yet, but there
    assert store.next_due_ms("work") == store.get(task_id).not_before_ms
    clock.advance(30)
    assert [c.task_id for c in store.candidates("work", 5)] == [task_id]


def test_a_paused_group_is_passed_over_until_its_time_and_others_go_on(store, clock):
    create(store, clock.now_ms(), 2, group="limited-api")
    (other,) = create(store, clock.now_ms(), 1, group="other")
    store.set_group_settings("work", "limited-api", paused_until_ms=clock.now_ms() + 30_000)
    assert [c.task_id for c in store.candidates("work", 10)] == [other]
    clock.advance(31)
    assert Counter(c.group for c in store.candidates("work", 10)) == {"limited-api": 2, "other": 1}
    limits = store.set_group_settings("work", "limited-api", clear=["pause"])
    assert limits.paused_until_ms is None


def test_a_paused_groups_due_retry_does_not_keep_a_worker_looking_and_a_resume_brings_it_back(store, clock):
    # The group answered 429: its task waits out a backoff (delayed) and the group is paused past it. A worker with
    # nothing else to claim used to look again every 10 ms for its whole budget (3,028 queries in 10 s): the delayed
    # head stood at the retry's due time, due, and no look could claim it.
    worker_store, client = recorded(store)
    (task_id,) = create(worker_store, clock.now_ms(), 1, group="limited-api", delaySeconds=1)
    pause_end = clock.now_ms() + 30_000
    worker_store.set_group_settings("work", "limited-api", paused_until_ms=pause_end)
    clock.advance(2)
    start = len(client.requests)
    report = Worker(worker_store, lambda task: None, capacity=1, owner="w", clock=clock).run("work", 10)
    assert report.claimed == 0 and report.stopped_by == "empty"
    assert sum(1 for op, _ in client.requests[start:] if op == "query") < 30
    assert worker_store.read_record("work").delayed_head_ms == pause_end  # a scheduled wake-up goes there
    shorter_end = clock.now_ms() + 5_000
    worker_store.set_group_settings("work", "limited-api", paused_until_ms=shorter_end)
    assert worker_store.read_record("work").delayed_head_ms == shorter_end  # a shortened pause: the wake-up moves
    worker_store.set_group_settings("work", "limited-api", clear=["pause"])
    assert worker_store.read_record("work").delayed_head_ms <= clock.now_ms()  # resumed: looked for again
    claimed = []
    Worker(worker_store, lambda task: claimed.append(task.task_id), capacity=1, owner="w2", clock=clock).run("work", 10)
    assert claimed == [task_id]


def test_a_run_that_only_passed_a_paused_group_over_on_the_ring_has_the_queue_woken_at_the_pauses_end(store, clock):
    # The run that saw the task admitted it first and had the wake-up scheduled; a later run's schedule (another
    # group's shorter pause) replaced it. A run whose look passes the paused group over on the ring, never offered
    # its task, must still ask for the wake-up at the pause's end: nothing else wakes the queue then.
    create(store, clock.now_ms(), 1, group="blue")
    pause_end = clock.now_ms() + 20_000
    store.set_group_settings("work", "blue", paused_until_ms=pause_end)  # the ring's entry carries the pause
    (green,) = create(store, clock.now_ms(), 1, group="green")
    store.set_group_settings("work", "green", paused_until_ms=clock.now_ms() + 8_000)
    clock.advance(9)  # green's pause is over (its wake-up fired): this run serves green, and passes blue over
    told: list[int | None] = []
    ran: list[str] = []
    report = Worker(store, lambda task: ran.append(task.task_id), capacity=1, owner="w", clock=clock,
                    stopped=lambda queue, wake_ms, record: told.append(wake_ms)).run("work", 10)
    assert ran == [green] and report.stopped_by == "empty"
    assert told == [pause_end]


def test_a_group_rate_limit_allows_n_claims_per_window_and_the_rest_wait(store, clock):
    limited = with_settings(store, group_rate=(3, 10.0))
    create(limited, clock.now_ms(), 10, group="metered")
    claimed_at: list[int] = []

    def runner(task):
        claimed_at.append(clock.now_ms())

    report = Worker(limited, runner, capacity=2, owner="w", clock=clock).run("work", 25)
    windows = Counter(fairness.rate_window(t, 10.0) for t in claimed_at)
    assert max(windows.values()) <= 3, windows
    assert len(claimed_at) == 9  # 3 in each of the three windows the 25 s run saw: the rest waits, nothing dropped
    assert report.limited > 0
    waiting = [c for c in limited.candidates("work", 20) if c.group == "metered"]
    assert len(waiting) == 10 - len(claimed_at)


def test_a_groups_own_settings_override_the_queue_defaults(store, clock):
    limited = with_settings(store, group_concurrency=5, group_rate=(100, 1.0))
    assert limited.group_settings("work", ["a"])["a"] == fairness.GroupLimits(concurrency=5, rate=100, period_seconds=1.0)
    limited.set_group_settings("work", "a", concurrency=1, rate=(2, 60.0))
    assert limited.group_settings("work", ["a", "b"]) == {
        "a": fairness.GroupLimits(concurrency=1, rate=2, period_seconds=60.0),
        "b": fairness.GroupLimits(concurrency=5, rate=100, period_seconds=1.0),
    }
    limited.set_group_settings("work", "a", clear=["concurrency", "rate"])
    assert limited.group_settings("work", ["a"])["a"].concurrency == 5
    with pytest.raises(InvalidTaskInput, match="concurrency must be 1-1000"):
        limited.set_group_settings("work", "a", concurrency=0)


def test_bad_groups_are_refused_with_what_to_do(store, services):
    with pytest.raises(InvalidField, match="group"):
        parse_create_request({"group": "has space"}, store.settings)
    with pytest.raises(InvalidField, match="leave the group out"):
        parse_create_request({"group": "default"}, store.settings)
    call = parse_create_request({"queue": "calls", "group": "acme", "payload": {"preferences": {}}}, store.settings)
    with pytest.raises(InvalidField, match="calls take no group"):
        services.check_request(call)


@pytest.fixture
def concurrent_settings(dynamodb_engine):
    """A fresh queue table on an engine where conditional writes are atomic under concurrent requests: DynamoDB Local,
    or (the moto run) the serialized moto server; one client factory per worker thread."""
    name = f"fair-{uuid.uuid4().hex[:8]}"
    if dynamodb_engine == "local":
        make_client = lambda: dynamodb_local.client(max_pool_connections=4)  # noqa: E731
        create_queue_table(make_client(), name)
        yield name, make_client
        return
    from tests.serialized_moto import SerializedMoto

    with SerializedMoto() as server:
        create_queue_table(server.client(), name)
        yield name, server.client


def test_eight_workers_never_run_more_than_k_tasks_of_a_group_at_once(concurrent_settings):
    table, make_client = concurrent_settings
    k = 2
    settings = Settings(queue_table_name=table, page_size=10, group_concurrency=k, lease_seconds=60)
    clock = SystemClock()
    seeder = TaskStore(make_client(), settings, clock)
    groups = ["a", "b", "c"]
    for g in groups:
        create(seeder, clock.now_ms(), 6, group=g)
    lock = threading.Condition()
    running: Counter[str] = Counter()
    peak: Counter[str] = Counter()
    violations: list[tuple[str, int]] = []
    done: defaultdict[str, int] = defaultdict(int)

    def runner(task):
        with lock:
            running[task.group] += 1
            peak[task.group] = max(peak[task.group], running[task.group])
            if running[task.group] > k:
                violations.append((task.group, running[task.group]))
            lock.notify_all()
            # Hold the task until one more than K of its group run (a violation), or 3 s: the tasks of a group pile up
            # to whatever the workers allow, however slow the engine, so the limit is reached and any breach is seen.
            lock.wait_for(lambda: running[task.group] > k, timeout=3.0)
        time.sleep(0.05)
        with lock:
            running[task.group] -= 1
            done[task.group] += 1

    stores = [TaskStore(make_client(), settings, clock) for _ in range(8)]
    barrier = threading.Barrier(8)

    def work(index: int) -> None:
        barrier.wait()
        deadline = time.monotonic() + 60
        while sum(done.values()) < 18 and time.monotonic() < deadline:
            Worker(stores[index], runner, capacity=3, owner=f"w{index}", clock=clock).run("work", 2)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(work, range(8)))
    assert violations == []
    assert dict(done) == {g: 6 for g in groups}
    assert all(peak[g] == k for g in groups), peak  # the limit was reached (the test can fail), never passed


def test_a_group_is_on_the_ring_before_its_tasks_are_written(store, clock):
    """A producer that dies (or is refused) mid-write leaves no task of a group off the ring: the entry comes first."""
    request = parse_create_request({"queue": "work", "count": 3, "group": "acme"}, store.settings)
    tasks = new_tasks(request, clock.now_ms(), store.settings)
    written = []

    def dies_after_one(requests):
        store._call("put_item", TableName=store.settings.queue_table_name, Item=requests[0]["PutRequest"]["Item"])
        written.append(requests[0])
        raise RuntimeError("the producer died mid-write")

    store._batch_write = dies_after_one
    with pytest.raises(RuntimeError):
        store.put_tasks(tasks)
    assert len(written) == 1 and [e.group for e in store.whole_ring("work", 0)] == ["acme"]
    clock.advance(DEACTIVATION_GRACE_MS / 1000 + 1)
    assert [c.group for c in store.candidates("work", 5)] == ["acme"]  # found, and the entry stays while it waits


def test_groups_past_a_page_of_held_back_ones_are_still_served(store, clock):
    for g in range(fairness.RING_PAGE + 5):
        create(store, clock.now_ms(), 1, group=f"g{g:02d}")
    ring = [e.group for e in store.whole_ring("work", 0)]
    held = frozenset(ring[: fairness.RING_PAGE + 2])  # the first page and more, all at their limits
    looked = store.candidates("work", 10, fair=FairTurn(held_back=held))
    assert {c.group for c in looked} == set(ring) - held


def test_purging_pending_tasks_takes_every_groups_too(store, clock):
    create(store, clock.now_ms(), 2, group="acme")
    create(store, clock.now_ms(), 1)
    create(store, clock.now_ms(), 1, group="later", delaySeconds=60)
    result = store.purge("work", "PENDING")
    assert (result.deleted, result.skipped) == (4, 0)
    assert store.candidates("work", 10) == []


def test_a_look_reads_a_groups_partitions_only_when_its_turn_comes(store, clock):
    """... or one turn ahead: the first pages of one group more than it wants candidates from go out together."""
    for g in ("a", "b", "c", "d", "e", "f"):
        create(store, clock.now_ms(), 2, group=g)
    read = []
    original = store._call

    def counting(operation, **kwargs):
        if operation == "query":
            read.append(kwargs["ExpressionAttributeValues"][":k"]["S"])
        return original(operation, **kwargs)

    store._call = counting
    (first,) = store.look("work", 1, delayed=True)[0]
    groups_read = {group for key in read if (group := fairness.group_of_partition(key)) is not None}
    turn = [e.group for e in store.whole_ring("work", 0)]  # no cursor yet: the default group, then the ring in order
    assert first.group == turn[0] and groups_read == {turn[0]}, read  # the default group (empty) and one group ahead


def test_a_fair_looks_first_round_reads_its_groups_side_by_side(store, clock):
    """Its first round reads each group of the turn once: their first pages go out together (one request's wait), and
    the look's order is the same as one read after another would give."""
    for g in ("a", "b", "c"):
        create(store, clock.now_ms(), 2, group=g)
    in_flight, peak = [0], [0]
    lock = threading.Lock()
    original = store._call

    def slow_partitions(operation, **kwargs):
        if operation != "query" or fairness.group_of_partition(kwargs["ExpressionAttributeValues"][":k"]["S"]) is None:
            return original(operation, **kwargs)
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        try:
            time.sleep(0.05)
            return original(operation, **kwargs)
        finally:
            with lock:
                in_flight[0] -= 1

    store._call = slow_partitions
    found = store.look("work", 3)[0]
    turn = [e.group for e in store.whole_ring("work", 0)]
    assert [c.group for c in found] == turn  # round-robin, one from each group, in ring order
    assert peak[0] >= 3  # the three groups' partitions were read at once
