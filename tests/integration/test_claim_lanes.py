"""Concurrent workers spread their claims (claim lanes) and hold the queue-wide running limit, on the SERIALIZED
moto server (one request lock: conditional writes are atomic, as in DynamoDB; plain moto is not).

Each worker is a thread with its own client running Worker invocations one after another (the real claim loop),
as ProcessTasks invocations with reserved concurrency 8 do - or, without reserved concurrency (the template's
default), as many invocations as wake-ups arrive.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from local.engine.engine import REPO
from local.template.template import Template
from taskqueue.core.clock import SystemClock
from taskqueue.core.errors import ConfigError
from taskqueue.core.keys import Order
from taskqueue.core.model import Task, new_tasks, parse_create_request
from taskqueue.core.settings import Settings
from taskqueue.store import Candidate, TaskStore
from taskqueue.store.control import SLOT_LEASE_SECONDS, SLOT_RENEW_SECONDS
from taskqueue.work.claim_control import ClaimControl
from taskqueue.work.held_slots import HeldSlots
from taskqueue.work.worker import Worker
from tests.serialized_moto import SerializedMoto
from tests.support import FakeClock, create_queue_table

WORKERS = 8
CAPACITY = 3


@pytest.fixture(scope="module")
def server() -> Iterator[SerializedMoto]:
    with SerializedMoto() as running:
        yield running


class RecordingStore(TaskStore):
    """Notes when each successful claim was sent and answered (monotonic), for the order check."""

    claims: dict[str, tuple[float, float]]
    lock = threading.Lock()

    def claim(self, candidate: Candidate, owner: str, now_ms: int | None = None, **bounds: Any) -> Task | None:
        sent = time.monotonic()
        task = super().claim(candidate, owner, now_ms, **bounds)
        if task is not None:
            with self.lock:
                self.claims[task.task_id] = (sent, time.monotonic())
        return task


def make_tasks(settings: Settings, now_ms: int, count: int) -> list[Task]:
    return new_tasks(parse_create_request({"queue": "work", "count": count}, settings), now_ms, settings)


def new_queue(server: SerializedMoto, **settings: Any) -> Settings:
    table = f"lanes-{uuid.uuid4().hex[:8]}"
    create_queue_table(server.client(), table)
    return Settings(queue_table_name=table, page_size=10, retry_base_seconds=0.0, runner_capacity=CAPACITY, **settings)


def run_workers(
    server: SerializedMoto,
    settings: Settings,
    runner: Callable[[Task], Any],
    claims: dict[str, tuple[float, float]],
    workers: int = WORKERS,
) -> list[Any]:
    """``workers`` threads, each invoking the worker again while it reports work left (a tail call)."""
    barrier = threading.Barrier(workers)
    reports: list[Any] = []
    lock = threading.Lock()

    def one(index: int) -> None:
        store = RecordingStore(server.client(), settings, SystemClock())
        store.claims = claims
        barrier.wait()
        while True:
            worker = Worker(store, runner, capacity=CAPACITY, owner=f"worker-{index}-{uuid.uuid4().hex[:6]}")
            report = worker.run("work", claim_seconds=60)
            with lock:
                reports.append(report)
            if not report.work_remains:
                return

    threads = [threading.Thread(target=one, args=(i,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a worker did not finish"
    return reports


def test_eight_workers_spread_their_claims_and_keep_the_order_within_the_window(server):
    settings = new_queue(server, claim_lanes=WORKERS, running_limit=0)  # no queue-wide limit: the herd alone
    store = TaskStore(server.client(), settings)
    # 240 tasks one millisecond apart: in LIFO order, a later-created task is ahead of an earlier one.
    base = SystemClock().now_ms() - 10_000
    tasks = [t for i in range(240) for t in make_tasks(settings, base + i, count=1)]
    store.put_tasks(tasks)
    rank = {t.task_id: i for i, t in enumerate(sorted(tasks, key=lambda t: t.enqueued_ms, reverse=True))}
    assert settings.order_of("work") is Order.LIFO
    claims: dict[str, tuple[float, float]] = {}
    reports = run_workers(server, settings, lambda task: None, claims)

    done = sum(r.succeeded for r in reports)
    lost = sum(r.lost for r in reports)
    assert done == 240 and set(claims) == set(rank)
    # No herd on the head: without lanes every worker went for the same first tasks (bench: 4.6 per task).
    assert lost / done < 0.2, f"{lost} lost claims for {done} tasks"
    # The order bound: when a task was claimed, at most n x capacity - 1 tasks ahead of it were still unclaimed
    # (claimable at the worker's read). A task ahead counts only if its claim was sent after this claim was
    # answered (claims in flight together are not ordered by the server's clock).
    window = WORKERS * CAPACITY
    worst = 0
    for task_id, (_, answered) in claims.items():
        ahead_unclaimed = sum(1 for other, (sent, _) in claims.items() if rank[other] < rank[task_id] and sent > answered)
        worst = max(worst, ahead_unclaimed)
    assert worst <= window - 1, f"a task was claimed with {worst} claimable tasks ahead of it (bound {window - 1})"


class LegacySystem:
    """A runner that takes ``seconds`` per task and records the most tasks it ran at once and every task it ran."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.running = self.most = 0
        self.runs: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, task: Task) -> None:
        with self._lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.runs.append(task.task_id)
        time.sleep(self.seconds)
        with self._lock:
            self.running -= 1


def test_the_queue_wide_running_limit_holds_across_eight_workers(server):
    limit = 5
    settings = new_queue(server, running_limit=limit, claim_lanes=WORKERS)
    store = TaskStore(server.client(), settings)
    store.put_tasks(make_tasks(settings, SystemClock().now_ms(), count=60))
    # The legacy system's work takes 0.3 s: runs overlap, so without the limit many more would run at once.
    legacy_system = LegacySystem(seconds=0.3)
    reports = run_workers(server, settings, legacy_system, {})
    assert sum(r.succeeded for r in reports) == 60
    # 8 workers x 3 runner slots each could run 24 at once: the limit keeps it at 5 across workers (more than one
    # worker's 3 ran together, so the limit is the queue's, not a worker's).
    most = legacy_system.most
    assert CAPACITY < most <= limit, f"{most} tasks ran at once (limit {limit})"
    assert store.control("work").slots_held == 0  # every slot given back


def unreserved_worker_settings(server: SerializedMoto) -> Settings:
    """ProcessTasks' settings as the template gives them with its defaults: no reserved concurrency, so any number
    of workers may run at once (one per wake-up), CLAIM_LANES from ProcessTasksClaimLanes, RUNNING_LIMIT empty."""
    template = Template(REPO / "template.yaml")
    for logical in template.of_type("AWS::DynamoDB::Table"):
        template.resolver.attrs[f"{logical}.StreamArn"] = f"arn:aws:dynamodb:us-east-1:123456789012:table/{logical}/stream/x"
    spec = template.functions()["ProcessTasksFunction"]
    assert spec.reserved_concurrency is None
    table = f"lanes-{uuid.uuid4().hex[:8]}"
    create_queue_table(server.client(), table)
    settings = Settings.from_env({**spec.environment, "QUEUE_TABLE_NAME": table, "RETRY_BASE_SECONDS": "0"})
    return dataclasses.replace(settings, runner_capacity=CAPACITY)


def test_without_reserved_concurrency_more_workers_than_lanes_still_hold_the_running_limit(server):
    """No reservation (the template's default): nothing stops twelve workers running at once. The running limit
    (RUNNER_CAPACITY, the legacy system's limit, since CLAIM_LANES > 1) still holds across all of them; the workers
    beyond the lanes claim in plain order, and every task runs exactly once."""
    settings = unreserved_worker_settings(server)
    workers = settings.claim_lanes + 2
    assert settings.claim_lanes == 10 and settings.running_limit_of("work") == CAPACITY
    store = TaskStore(server.client(), settings)
    store.put_tasks(make_tasks(settings, SystemClock().now_ms(), count=60))
    legacy_system = LegacySystem(seconds=0.2)
    reports = run_workers(server, settings, legacy_system, {}, workers=workers)
    runs, most = legacy_system.runs, legacy_system.most
    assert sum(r.succeeded for r in reports) == 60 and len(runs) == len(set(runs)) == 60
    assert most <= CAPACITY, f"{most} tasks ran at once (the legacy system takes {CAPACITY})"
    assert len(reports) >= workers  # every worker ran at least once: more at once than there are lanes
    assert store.control("work").slots_held == 0


def test_several_workers_hold_the_runners_capacity_for_the_queue_unless_told_otherwise():
    base = Settings(queue_table_name="t", runner_capacity=3)
    assert base.running_limit_of("work") is None  # one worker: its runner capacity is the limit, no slots needed
    assert Settings(queue_table_name="t", runner_capacity=3, claim_lanes=8).running_limit_of("work") == 3
    assert Settings(queue_table_name="t", claim_lanes=8, running_limit=0).running_limit_of("work") is None
    assert Settings(queue_table_name="t", running_limit=7).running_limit_of("work") == 7
    assert Settings.from_env({"QUEUE_TABLE_NAME": "t", "RUNNING_LIMIT": "12"}).running_limit == 12
    with pytest.raises(ConfigError, match="RUNNING_LIMIT='-1' is not valid"):
        Settings.from_env({"QUEUE_TABLE_NAME": "t", "RUNNING_LIMIT": "-1"})


def test_a_crashed_workers_slots_come_back_within_seconds_and_its_tasks_when_their_leases_pass(server):
    """Issue 28: the slots' short leases (SLOT_LEASE_SECONDS) free a dead worker's slots long before its tasks'
    leases pass (before, slots and tasks came back together, after LEASE_SECONDS)."""
    settings = new_queue(server, running_limit=2, lease_seconds=300)
    clock = FakeClock(SystemClock().now_ms())
    store = TaskStore(server.client(), settings, clock)
    store.put_tasks(make_tasks(settings, clock.now_ms(), count=3))
    # A worker takes both slots, claims two tasks and dies: no slot is free for anyone.
    crashed = store.acquire_slots("work", "crashed-worker", 2)
    assert len(crashed) == 2
    for candidate in store.candidates("work", 2):
        assert store.claim(candidate, "crashed-worker") is not None
    assert store.acquire_slots("work", "other-worker", 1) == []
    report = Worker(store, lambda task: None, capacity=3, owner="other-worker", clock=clock).run("work", SLOT_LEASE_SECONDS + 2)
    # It watches the queue, so it waits for a slot; the dead worker's slots lapse within SLOT_LEASE_SECONDS and it
    # runs the third task in the same run. The two tasks stay leased to the dead worker.
    assert report.limited >= 1 and report.claimed == 1 and report.succeeded == 1
    # Their leases pass: the two tasks come back; every task runs.
    clock.advance(301)
    report = Worker(store, lambda task: None, capacity=3, owner="other-worker", clock=clock).run("work", 5)
    assert report.recovered == 2 and report.succeeded == 2
    assert store.control("work").slots_held == 0


def test_a_slot_is_renewed_on_its_own_short_cadence_not_with_its_tasks_lease(server):
    """Issue 28: a held slot is renewed by its run every SLOT_RENEW_SECONDS (a short lease a dead worker's slot
    lapses from within seconds); a task's lease renewal no longer touches it."""
    settings = new_queue(server, running_limit=1, lease_seconds=300)
    clock = FakeClock(SystemClock().now_ms())
    store = TaskStore(server.client(), settings, clock)
    control = ClaimControl(store, "work", "w", clock, random.Random(1), lambda *_: False)
    held = HeldSlots(store, control, lambda: None, clock)
    (slot,) = held.for_claims(1)
    assert slot.expires_ms == clock.now_ms() + SLOT_LEASE_SECONDS * 1000
    for _ in range(10):  # 10 renewals: well past the first lease, the slot still holds
        clock.advance(SLOT_RENEW_SECONDS)
        held.renew()
        assert store.acquire_slots("work", "other", 1) == []
    held.stop_claiming()
    held.done(slot)  # freed as last renewed
    assert held.held == 0 and len(store.acquire_slots("work", "other", 1)) == 1



class FreesSlotsAt(FakeClock):
    """A clock on which another worker (the run's predecessor in a hand-over) frees its slots ``after`` seconds in."""

    def __init__(self, store_of: Callable[[], TaskStore], tokens: list[Any], after: float) -> None:
        super().__init__(SystemClock().now_ms())
        self._store_of, self._tokens, self._free_at = store_of, tokens, self.monotonic() + after
        self.freed_ms: int | None = None

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        if self.freed_ms is None and self.monotonic() >= self._free_at:
            for token in self._tokens:
                assert self._store_of().free_token(token)
            self.freed_ms = self.now_ms()


def test_a_watcher_held_back_by_the_running_limit_reads_the_slots_again_soon_after_it_starts(server):
    """A run started by a hand-over meets its predecessor's slots held for their last tasks: it reads them again every
    0.1 s for LIMIT_FLAT_SECONDS (then 0.2, 0.4, ... up to IDLE_POLL_SECONDS), so a slot freed 0.35 s in is taken by
    0.45 s, not at 0.7 s (doubling from the start) nor at 1 s. Meanwhile it reads the slots alone: one look before the
    wait and one after it (a look each poll read the index ten times a second for nothing)."""
    settings = new_queue(server, running_limit=2, lease_seconds=300)
    holder = TaskStore(server.client(), settings, FakeClock(SystemClock().now_ms()))
    tokens = holder.acquire_slots("work", "predecessor", 2)
    assert len(tokens) == 2
    stores: list[TaskStore] = []
    clock = FreesSlotsAt(lambda: stores[0], tokens, after=0.35)
    stores.append(TaskStore(server.client(), settings, clock))
    stores[0].put_tasks(make_tasks(settings, clock.now_ms(), count=1))
    started_ms = clock.now_ms()
    claimed_at: list[int] = []
    looks: list[int] = []
    real_look = stores[0].look

    def look(queue, limit, *args, **kwargs):
        if kwargs.get("shed", True) and limit > 1 and not claimed_at:  # the claim loop's looks until the claim
            looks.append(clock.now_ms() - started_ms)
        return real_look(queue, limit, *args, **kwargs)

    stores[0].look = look
    report = Worker(stores[0], lambda task: claimed_at.append(task.updated_ms), capacity=2, owner="successor",
                    clock=clock).run("work", 3)
    assert report.limited >= 1 and report.succeeded == 1
    assert clock.freed_ms is not None
    assert claimed_at[0] - started_ms <= 550  # doubling from 0.1 s would claim at 700 ms, a poll of 1 s at 1,000 ms
    assert len(looks) == 2 and looks[0] == 0 and looks[1] >= 350, looks


def test_a_run_short_of_slots_held_by_another_worker_calls_for_no_help(server):
    """A run that starts while its predecessor's last tasks still hold slots (a hand-over) has work left over and holds
    fewer slots than the limit, yet the limit is reached: a helper could run nothing (it would stop at once, an
    invocation paid for nothing), so it is not woken."""
    settings = new_queue(server, running_limit=2, claim_lanes=4, lease_seconds=300)
    clock = FakeClock(SystemClock().now_ms())
    store = TaskStore(server.client(), settings, clock)
    assert len(store.acquire_slots("work", "predecessor", 1)) == 1  # its last task runs through this whole run
    store.put_tasks(make_tasks(settings, clock.now_ms(), count=6))
    calls: list[str] = []

    def runner(task: Task) -> None:
        clock.advance(0.5)

    report = Worker(store, runner, capacity=2, owner="successor", clock=clock,
                    call_for_help=calls.append).run("work", 2)
    assert report.claimed >= 2 and report.helpers_woken == 0 and calls == []
