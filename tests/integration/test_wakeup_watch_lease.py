"""The watch, whatever the worker's runner does (issue 28), on moto and on DynamoDB Local.

A watcher's watch never lapses while it lives, even with every runner slot taken, and a write made meanwhile is
claimed in the same run; a watcher that dies (Lambda kills on Timeout and OOM without a word) is trusted only for
the short watch lease, so a producer wakes a new worker within it; no "wake-up in flight" is left behind when a
lapsed watch is revived or when a woken worker's watch was refused at first; and a busy watcher notices a write
while its tasks keep ending (before, it read the record only after a poll interval in which none ended).

The worker's waits on running tasks are on the real clock (``concurrent.futures.wait``); everything the rules
decide on (leases, cadences, ages) is on the test's FakeClock. The runner threads here pace themselves by events,
and the busy case's endings by a tenth of a second of real time (the pace at which the old code never read).
"""

from __future__ import annotations

import threading
import time

import pytest

from taskqueue.core.handshake import (
    WAKE_IN_FLIGHT_SECONDS,
    WATCH_LEASE_SECONDS,
    WATCH_RENEW_SECONDS,
    ProducerStep,
    producer_step,
)
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.store import TaskStore
from taskqueue.store.control import SLOT_LEASE_SECONDS, SLOT_RENEW_SECONDS
from taskqueue.wakeups.watch import STOPPED, Watch
from taskqueue.work.worker import Worker
from tests.conftest import make_settings
from tests.faults import FaultyClient
from tests.integration.test_wakeup_handshake import write

pytestmark = [pytest.mark.dynamodb_engines, pytest.mark.realtime]

REAL_TIMEOUT = 10.0  # seconds of real time a runner thread waits for the worker before the test fails
REPLACED_WITHIN_SECONDS = 5.0  # issue 28: a task enqueued after its worker was killed is claimed within this


def put(store: TaskStore, clock, count: int = 1, queue: str = "work") -> None:
    store.put_tasks(new_tasks(parse_create_request({"queue": queue, "count": count}, store.settings), clock.now_ms(), store.settings))


def in_thread(target) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run() -> None:
        try:
            out["report"] = target()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_a_full_runners_watch_stays_live_and_a_write_meanwhile_is_claimed_in_the_same_run(services, topics, clock):
    """Every slot taken for 40 s: the watch is renewed on its cadence all along (before, the full worker waited a
    sixth of the task lease between renewals and the 30 s watch lapsed); a producer writing meanwhile is told
    ``watched``, and its task is claimed by the same run once the slot frees."""
    store = services.store
    put(store, clock)
    started, written, ran = threading.Event(), [], []

    def runner(task) -> None:
        ran.append(task.task_id)
        if len(ran) > 1:
            return
        started.set()
        for _ in range(int(40 / WATCH_RENEW_SECONDS)):
            clock.advance(WATCH_RENEW_SECONDS)
            deadline = time.monotonic() + REAL_TIMEOUT
            # The worker renews within its wait on the full runner: the watch always covers the next step.
            while store.read_wake_record("work").watch_until_ms < clock.now_ms() + WATCH_RENEW_SECONDS * 1000:
                assert time.monotonic() < deadline, "the full worker's watch was not renewed"
                time.sleep(0.01)
            assert producer_step(store.read_wake_record("work"), clock.now_ms()) is ProducerStep.WATCHED
            if not written:
                written.append(write(services))

    report = Worker(store, runner, capacity=1, owner="worker-1", clock=clock).run("work", 120)
    assert written == ["watched"] and topics.wakeups() == []
    assert report.watched and (report.claimed, report.succeeded, report.stopped_by) == (2, 2, "empty")


class Dying(TaskStore):
    """A worker's store that stops answering at ``die``: every later request of that worker hangs (as a killed
    process's would never come), until the test lets it fail at ``release``."""

    die = threading.Event()
    release = threading.Event()

    def _call(self, operation, **kwargs):
        if self.die.is_set():
            self.release.wait(REAL_TIMEOUT * 3)
            raise RuntimeError("this worker is dead")
        return super()._call(operation, **kwargs)


def test_a_killed_worker_is_replaced_within_the_short_watch_lease(dynamodb, services, settings, topics, clock):
    """A watcher killed mid-task stops renewing: producers trust it only until its short lease lapses (before: 30 s),
    then the next write wakes a new worker, which takes the watch over and claims what was written since the death.
    (A write made while the dead watcher was still trusted, with no write after the lapse, waits for the backstops:
    docs/wakeups.md, "Every path".)"""
    put(services.store, clock)
    dying = Dying(dynamodb, settings, clock)
    dying.die, dying.release = threading.Event(), threading.Event()
    started = threading.Event()

    def runner(task) -> None:
        started.set()
        dying.release.wait(REAL_TIMEOUT * 3)

    thread, _ = in_thread(lambda: Worker(dying, runner, capacity=1, owner="killed", clock=clock).run("work", 120))
    try:
        assert started.wait(REAL_TIMEOUT)
        assert services.store.read_wake_record("work").watched(clock.now_ms())
        dying.die.set()  # killed: from here on it writes nothing
        died_at = clock.now_ms()
        clock.advance(3)
        assert write(services) == "watched"  # still within its lease: trusted
        watch_until = services.store.read_wake_record("work").watch_until_ms
        assert watch_until - died_at <= REPLACED_WITHIN_SECONDS * 1000
        clock.advance((watch_until - clock.now_ms()) / 1000)
        assert write(services) == "woken" and topics.wakeups() == ["work"]
        report = Worker(services.store, lambda task: None, capacity=1, owner="worker-2", clock=clock).run("work", 30)
        # Both tasks written after the death (the killed worker's own stays leased to it): the one written 3 s after
        # it is claimed when its lease lapses, within WATCH_LEASE_SECONDS of the death.
        assert report.watched and report.claimed == 2
        assert max(report.claim_ages_ms) <= REPLACED_WITHIN_SECONDS * 1000 - 3000
    finally:
        dying.release.set()
        thread.join(REAL_TIMEOUT)


def test_a_revived_watch_leaves_no_wake_up_in_flight(services, topics, clock):
    """A watch that lapsed (a stalled worker) while a producer woke the queue is revived by its renewal: the
    renewal clears the wake-up with it, so once that watcher stops, the next write wakes a worker at once (before,
    producers were told ``in-flight`` for up to WAKE_IN_FLIGHT_SECONDS while nobody was coming)."""
    watch = Watch(services.store, "work", "stalled", clock)
    assert watch.begin()
    clock.advance(WATCH_LEASE_SECONDS + 0.5)
    assert write(services) == "woken"  # the lapsed watch is not trusted
    watch.keep()
    assert watch.watching
    record = services.store.read_wake_record("work")
    assert record.watcher == "stalled" and record.watched(clock.now_ms()) and record.wake_sent_ms is None
    assert watch.arrivals()  # the write the renewal showed is looked for
    clock.advance(1.5)
    assert watch.try_stop(clock.now_ms()) == STOPPED
    assert write(services) == "woken"
    assert topics.wakeups() == ["work", "work"]


def test_a_worker_whose_watch_was_refused_at_first_leaves_no_wake_up_in_flight(dynamodb, services, settings, topics, clock):
    """The woken worker's watch is throttled: it runs as a helper, tries to watch again on the renewal cadence and,
    once it watches, has cleared the wake-up it answered; it stops as a watcher, so the next write wakes a worker at
    once (before, ``in-flight`` for up to WAKE_IN_FLIGHT_SECONDS with nobody coming)."""
    assert write(services) == "woken"
    faulty = FaultyClient(dynamodb).fail(
        "update_item", "ThrottlingException", when=lambda request: "if_not_exists(#seq" in request.get("UpdateExpression", "")
    )
    worker_store = TaskStore(faulty, settings, clock)

    def runner(task) -> None:
        clock.advance(WATCH_RENEW_SECONDS)  # the task runs past the renewal interval

    report = Worker(worker_store, runner, capacity=1, owner="worker-1", clock=clock).run("work", 30)
    assert report.retried >= 1 and report.watched and report.claimed == 1
    record = services.store.read_wake_record("work")
    assert record.watcher is None and record.wake_sent_ms is None
    clock.advance(0.1)
    assert clock.now_ms() - (record.last_write_ms or 0) < WAKE_IN_FLIGHT_SECONDS * 1000
    assert write(services) == "woken"


def test_a_busy_worker_notices_a_write_while_its_tasks_keep_ending(services, topics, clock):
    """Capacity 8, seven tasks running (one long, six short), one slot free; a producer writes, then the short
    tasks end one after another a tenth of a second apart (each 0.3 s on the test's clock). The watcher reads the
    record on its own cadence whatever ends, so it claims the new task within about half a second of the test's
    clock; before, it read the record only after a whole poll interval in which no task ended, i.e. after the
    last ending (1.8 s)."""
    store = services.store
    put(store, clock, 7)
    lock = threading.Lock()
    gates = [threading.Event() for _ in range(6)]
    all_started, new_started = threading.Event(), threading.Event()
    calls: list[str] = []
    ages: list[int] = []

    def runner(task) -> None:
        with lock:
            calls.append(task.task_id)
            n = len(calls)
        if n == 7:
            all_started.set()
        if n == 1:  # the long task: ends once the new task has started (or the test gives up)
            new_started.wait(REAL_TIMEOUT)
        elif n <= 7:
            assert gates[n - 2].wait(REAL_TIMEOUT)
            clock.advance(0.3)
        else:
            ages.append(clock.now_ms() - task.created_ms)
            new_started.set()

    def producer() -> None:
        assert all_started.wait(REAL_TIMEOUT)
        assert write(services) == "watched"
        for gate in gates:
            time.sleep(0.1)  # endings faster than a poll interval of real time: the worker's wait never goes quiet
            gate.set()

    thread, _ = in_thread(producer)
    report = Worker(store, runner, capacity=8, owner="worker-1", clock=clock).run("work", 120)
    thread.join(REAL_TIMEOUT)
    assert (report.claimed, report.succeeded) == (8, 8) and topics.wakeups() == []
    assert ages and ages[0] <= 1000, f"the new task was claimed {ages[0]} ms (test clock) after its write"


def test_a_killed_workers_running_limit_slots_come_back_within_seconds(dynamodb, topics, clock):
    """Running limit 2: the queue's watcher, holding both slots, is killed mid-task. Its slots are held on the
    watcher's long lease (issue 29: not renewed every 2.5 s while it lives), good only while it watches: its watch
    lapses within WATCH_LEASE_SECONDS, and the next worker, watching then, takes both slots at once and runs new work;
    the killed worker's tasks come back only when their own leases pass (before issue 12 the slots stayed held as
    long: a ProcessTasks lease is at least the function's timeout)."""
    settings = make_settings(topics, running_limit=2, lease_seconds=300)
    store = TaskStore(dynamodb, settings, clock)
    put(store, clock, 2)
    dying = Dying(dynamodb, settings, clock)
    dying.die, dying.release = threading.Event(), threading.Event()
    started = threading.Barrier(3)

    def runner(task) -> None:
        started.wait(REAL_TIMEOUT)
        dying.release.wait(REAL_TIMEOUT * 3)

    thread, _ = in_thread(lambda: Worker(dying, runner, capacity=2, owner="killed", clock=clock).run("work", 120))
    try:
        started.wait(REAL_TIMEOUT)
        taken = store._token_expiries("slot", "work", 2)
        for _ in range(4):  # alive for 10 s, watching: nobody may take its slots, and they need no renewal
            clock.advance(SLOT_RENEW_SECONDS)
            deadline = time.monotonic() + REAL_TIMEOUT
            while store.read_wake_record("work").watch_until_ms <= clock.now_ms() + 1000:  # its watch is renewed
                assert time.monotonic() < deadline, "the live worker's watch was not renewed"
                time.sleep(0.01)
            assert store.acquire_slots("work", "helper", 1) == []
        assert store._token_expiries("slot", "work", 2) == taken  # no slot renewal in 10 s
        dying.die.set()
        put(store, clock)
        assert store.acquire_slots("work", "someone", 1) == []  # still held, until its watch lapses
        clock.advance(WATCH_LEASE_SECONDS)  # its watch lapses: a producer wakes the next worker, which watches
        report = Worker(store, lambda task: None, capacity=2, owner="next", clock=clock).run("work", 30)
        assert report.watched and report.limited == 0  # both slots free for it
        assert report.claimed == 1 and report.succeeded == 1  # the new task; the killed worker's two stay leased
        # Created when it died: claimed within a watch lease of the death (the run itself ends later: its stop takes
        # the index's lag allowance after it begins, issue 29).
        assert len(report.claim_ages_ms) == 1 and report.claim_ages_ms[0] <= WATCH_LEASE_SECONDS * 1000
    finally:
        dying.release.set()
        thread.join(REAL_TIMEOUT)


def test_a_watcher_shortens_its_slots_before_its_watch_ends_so_no_next_watcher_takes_them(dynamodb, topics, clock):
    """Issue 29: a watcher's slots hold the watcher's long lease, which the next watcher may take (it would pass the
    running limit while this run's tasks still run). So before the write that ends the watch (a hand-over, the budget:
    ``Watch.end``) the run shortens every slot it holds to SLOT_LEASE_SECONDS, and before a stop's last write
    (``try_stop``: the run stops claiming) it frees its spare slots; the next watcher then takes none of them."""
    settings = make_settings(topics, running_limit=2, lease_seconds=300)
    calls: list[str] = []

    class Recording(TaskStore):
        def relet_slot(self, slot, **kwargs):
            calls.append(f"relet watched={kwargs['watched']}")
            return super().relet_slot(slot, **kwargs)

        def free_token(self, token):
            calls.append("free")
            return super().free_token(token)

        def unwatch(self, queue, owner, seq):
            calls.append("unwatch")
            return super().unwatch(queue, owner, seq)

    store = Recording(dynamodb, settings, clock)
    for ending in ("end", "stop"):
        calls.clear()
        watch, held = _watch_with_slots(store, clock)
        assert watch.begin()
        running, spare = held.for_claims(2)
        assert running.watched and spare.watched
        held.done(spare)  # its task ended while the run claims: spare
        if ending == "end":
            watch.end(None)
            assert calls == ["relet watched=False", "relet watched=False", "unwatch"]
            assert store.acquire_slots("work", "next", 2, watcher=True) == []  # both held, on a helper's lease
        else:
            clock.advance(10)
            while watch.try_stop(clock.now_ms()) != STOPPED:
                clock.advance(1)
            assert calls[-3:] == ["free", "relet watched=False", "unwatch"]
            (taken,) = store.acquire_slots("work", "next", 2, watcher=True)  # the spare one, freed; not the running one
            assert taken.index == spare.index
            store.free_token(taken)
        clock.advance(SLOT_LEASE_SECONDS + 1)  # the run is gone: its shortened slot lapses


def test_a_full_watcher_calls_for_help_for_a_write_it_notices(dynamodb, services, topics, clock):
    """Every slot taken, several workers allowed (CLAIM_LANES 2): a producer writing to the watched queue wakes
    nobody, so the full watcher, noticing the write in its renewal's record, wakes another worker itself (once for
    that write)."""
    settings = make_settings(topics, claim_lanes=2)
    store = TaskStore(dynamodb, settings, clock)
    put(store, clock)
    called: list[str] = []
    helped = threading.Event()

    def runner(task) -> None:
        if called or helped.is_set():
            return
        assert write(services) == "watched"
        clock.advance(WATCH_RENEW_SECONDS)  # the next renewal returns the record with the write
        helped.wait(REAL_TIMEOUT)
        helped.set()

    def call_for_help(queue: str) -> None:
        called.append(queue)
        helped.set()

    report = Worker(store, runner, capacity=1, owner="worker-1", clock=clock, call_for_help=call_for_help).run("work", 60)
    assert called == ["work"] and report.helpers_woken == 1
    assert report.claimed == 2 and topics.wakeups() == []


def test_a_slot_shortening_refused_past_the_sdks_retries_does_not_fail_the_watchs_end(dynamodb, topics, clock):
    """Throttling past the SDK's retries as the watch ends: the shortening of the one slot is refused. The watch still
    ends (the run is not failed by it), the refusal is counted, and the run's next renewal round shortens the slot,
    so a live task's slot is not left on the watcher's lease for the next watcher to take."""
    settings = make_settings(topics, running_limit=1, lease_seconds=300)
    faulty = FaultyClient(dynamodb)
    store = TaskStore(faulty, settings, clock)
    errors: list[int] = []
    watch, held = _watch_with_slots(store, clock, on_error=lambda: errors.append(1))
    assert watch.begin()
    (running,) = held.for_claims(1)
    assert running.watched
    faulty.fail("update_item", "ProvisionedThroughputExceededException",
                when=lambda request: request.get("Key", {}).get("taskId", {}).get("S", "").endswith("#slot#0"))
    watch.end(None)
    assert errors == [1] and not watch.watching
    assert store.read_wake_record("work").watcher is None
    held.renew()  # the run's next round: the slot no longer matches the run's watch, so it is leased anew, short
    (expires,) = store._token_expiries("slot", "work", 1).values()
    assert expires == clock.now_ms() + SLOT_LEASE_SECONDS * 1000
    assert store.acquire_slots("work", "next", 1, watcher=True) == []  # still the run's, on a helper's lease


def _watch_with_slots(store: TaskStore, clock, on_error=lambda: None):
    """A run's watch and its running-limit slots, wired as Worker.run wires them."""
    import random

    from taskqueue.work.claim_control import ClaimControl
    from taskqueue.work.held_slots import HeldSlots

    control = ClaimControl(store, "work", "w", clock, random.Random(1), lambda *_: False)
    watch: Watch
    held = HeldSlots(store, control, on_error, clock, watching=lambda: watch.watching)
    watch = Watch(store, "work", "w", clock, index_peek=lambda: False,
                  on_leave=lambda stopping: held.leave_watch(free_spare=stopping))
    return watch, held


def _held_slots(store: TaskStore, clock, owner: str = "w"):
    import random

    from taskqueue.work.claim_control import ClaimControl
    from taskqueue.work.held_slots import HeldSlots

    control = ClaimControl(store, "work", owner, clock, random.Random(1), lambda *_: False)
    return HeldSlots(store, control, lambda: None, clock)


def test_a_spare_slot_is_not_renewed_and_a_lapsed_one_never_serves_a_claim(dynamodb, topics, clock):
    """Issue 29: a slot no task uses (spare, kept for the run's next claim) costs no renewal; its lease lapses, and
    another worker may take it. The run must then not claim on it (the running limit would be passed): it drops it and
    takes a free one, or none when every slot is another's."""
    settings = make_settings(topics, running_limit=1, lease_seconds=300)
    store = TaskStore(dynamodb, settings, clock)
    held = _held_slots(store, clock)
    (slot,) = held.for_claims(1)
    held.done(slot)  # its task ended while the run still claims: spare
    written = store._token_expiries("slot", "work", 1)
    clock.advance(SLOT_RENEW_SECONDS + 0.1)
    held.renew()
    assert store._token_expiries("slot", "work", 1) == written  # a spare slot is not renewed
    clock.advance(SLOT_LEASE_SECONDS)  # lapsed
    assert len(store.acquire_slots("work", "other", 1)) == 1  # another worker takes it
    assert held.for_claims(1) == []  # not handed out again: the other worker's now
    assert held.held == 0


def test_a_spare_slot_is_renewed_before_it_serves_a_claim_once_half_its_lease_passed(dynamodb, topics, clock):
    """A spare slot with less than half its lease left is renewed before a task runs on it (the loop renews a busy
    slot at half its lease; one handed out with less would have fewer attempts before it lapses)."""
    settings = make_settings(topics, running_limit=1, lease_seconds=300)
    store = TaskStore(dynamodb, settings, clock)
    held = _held_slots(store, clock)
    (slot,) = held.for_claims(1)
    held.done(slot)
    clock.advance(1.0)
    assert held.for_claims(1)[0].expires_ms == slot.expires_ms  # plenty left: handed out as it is, no write
    held.done(slot)
    clock.advance(SLOT_RENEW_SECONDS)
    (again,) = held.for_claims(1)
    assert again.expires_ms == clock.now_ms() + SLOT_LEASE_SECONDS * 1000
    assert store._token_expiries("slot", "work", 1) == {0: again.expires_ms}
    clock.advance(SLOT_LEASE_SECONDS - 0.5)  # in use: still ours, nobody may take it
    assert store.acquire_slots("work", "other", 1) == []
