"""The wake-up handshake on the queue table (docs/wakeups.md), on moto and on DynamoDB Local.

A producer wakes an idle queue itself, once; a worker that watches the queue is trusted instead; the two
interleavings of a producer's write and a worker's stop each end with the work seen (the worker looks again, or
the producer wakes a new worker); an empty look that came before the index could show a known write does not let a
worker stop; and every lost wake-up (SNS refusing, a producer dying between its write and its wake-up or between
its claim and its publish, a crashed watcher) is repaired by the backstops within one safety-net period.
"""

from __future__ import annotations

import boto3
import pytest

from taskqueue.client.create import create_tasks
from taskqueue.core.handshake import (
    INDEX_LAG_ALLOWANCE_SECONDS,
    READ_REUSE_SECONDS,
    WAKE_IN_FLIGHT_SECONDS,
    WATCH_LEASE_SECONDS,
    WATCH_RENEW_SECONDS,
)
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.services import Services
from taskqueue.store import TaskStore
from taskqueue.wakeups.notify import Notifier
from taskqueue.wakeups.producer import ProducerHandshake
from taskqueue.wakeups.safety_net import run_safety_net
from taskqueue.wakeups.watch import STOPPED, LookAgain, Watch
from taskqueue.work.worker import HELP_SECONDS, Worker
from tests.conftest import make_settings
from tests.faults import FaultyClient


def write(services: Services, queue: str = "work", count: int = 1) -> str:
    """A producer's create request, through the path CreateTasks takes: the tasks, then the handshake."""
    request = parse_create_request({"queue": queue, "count": count}, services.settings)
    return create_tasks(request, services.store, services.clock.now_ms(), None, services.handshake).wakeup


def put_silently(store: TaskStore, clock, queue: str = "work") -> str:
    """A producer that wrote its task and died before its wake-up: no touch of the record."""
    (task,) = new_tasks(parse_create_request({"queue": queue}, store.settings), clock.now_ms(), store.settings)
    store.put_tasks([task])
    return task.task_id


def test_a_producer_wakes_an_idle_queue_once(services, topics, clock):
    assert write(services) == "woken"
    assert write(services) == "in-flight"  # the first wake-up is on its way: no second
    assert topics.wakeups() == ["work"]
    clock.advance(WAKE_IN_FLIGHT_SECONDS + 1)  # it never arrived (no worker began watching): wake again
    assert write(services) == "woken"
    assert topics.wakeups() == ["work"]


def test_no_wake_up_while_a_worker_watches(services, topics, clock):
    watch = Watch(services.store, "work", "worker-1", clock)
    assert watch.begin()
    assert [write(services) for _ in range(3)] == ["watched"] * 3
    assert topics.wakeups() == []
    # The woken worker's watch cleared the wake-up it answered.
    assert services.store.read_wake_record("work").wake_sent_ms is None


def test_a_write_before_the_stop_keeps_the_worker_looking(services, topics, clock):
    """Interleaving 1: the producer writes after the worker's last empty look, before its stop. The producer trusts
    the watcher; the watcher's stop fails on the record and it looks again, finding the task."""
    watch = Watch(services.store, "work", "worker-1", clock)
    assert watch.begin()
    clock.advance(INDEX_LAG_ALLOWANCE_SECONDS + 1)
    empty_look = clock.now_ms()
    assert services.store.candidates("work", 10) == []
    assert write(services) == "watched"
    outcome = watch.try_stop(empty_look)
    assert isinstance(outcome, LookAgain) and watch.watching
    assert [c.queue for c in services.store.candidates("work", 10)] == ["work"]
    assert topics.wakeups() == []


def test_a_write_after_the_stop_wakes_a_new_worker(services, topics, clock):
    """Interleaving 2: the worker stops first; the producer, writing after, finds nobody watching and wakes."""
    watch = Watch(services.store, "work", "worker-1", clock)
    assert watch.begin()
    clock.advance(INDEX_LAG_ALLOWANCE_SECONDS + 1)
    assert watch.try_stop(clock.now_ms()) == STOPPED and not watch.watching
    assert write(services) == "woken"
    assert topics.wakeups() == ["work"]


def test_an_empty_look_that_may_not_show_a_known_write_does_not_count(services, clock):
    """A GSI shows writes late: a look begun within the lag allowance of the last write the worker knows of may
    have missed it, so it cannot end the watch."""
    assert write(services) == "woken"
    watch = Watch(services.store, "work", "worker-1", clock)
    assert watch.begin()  # knows of the write above
    clock.advance(0.2)
    too_soon = clock.now_ms()
    outcome = watch.try_stop(too_soon)
    assert outcome == LookAgain(watch.seen.last_write_ms + int(INDEX_LAG_ALLOWANCE_SECONDS * 1000)) and watch.watching
    clock.advance(INDEX_LAG_ALLOWANCE_SECONDS)
    assert watch.try_stop(clock.now_ms()) == STOPPED


class LaggingIndex(TaskStore):
    """A ReadyIndex that shows a task only ``lag`` seconds after it was created (by the test's clock), as a GSI
    does under load."""

    lag = 0.6

    def look(self, queue, limit, now_ms=None, **reads):  # a worker's look (**reads: delayed=, shards=, skip=)
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        shown, skipped = super().look(queue, limit, now_ms, **reads)
        return [c for c in shown if self.get(c.task_id).created_ms <= now_ms - self.lag * 1000], skipped


def test_a_worker_does_not_stop_on_an_index_that_has_not_shown_a_known_write(services, dynamodb, settings, clock):
    """End to end through Worker.run: the producer writes, wakes the worker, and the index hides the task for
    0.6 s. The worker's first looks are empty; it looks again until the lag allowance has passed, and claims the
    task in the same run (without the rule it stopped at once with the task left waiting)."""
    assert write(services) == "woken"
    store = LaggingIndex(dynamodb, settings, clock)
    report = Worker(store, lambda task: None, capacity=1, owner="worker-1", clock=clock).run("work", 30)
    assert report.watched and (report.claimed, report.succeeded, report.stopped_by) == (1, 1, "empty")


def test_a_lingering_worker_takes_work_written_meanwhile_in_the_same_run(dynamodb, topics, clock):
    settings = make_settings(topics, worker_linger_seconds=3.0)
    store = TaskStore(dynamodb, settings, clock)
    services = Services(settings, store, Notifier(boto3.client("sns"), settings), clock)
    outcomes: list[str] = []

    class ProducerDuringLinger:
        """The clock of the worker's run: 1.5 s into its linger, a producer writes a task."""

        def __getattr__(self, name):
            return getattr(clock, name)

        def sleep(self, seconds):
            clock.sleep(seconds)
            if not outcomes and clock.monotonic() >= start + 1.5:
                outcomes.append(write(services))

    start = clock.monotonic()
    report = Worker(store, lambda task: None, capacity=1, owner="worker-1", clock=ProducerDuringLinger()).run("work", 30)
    assert outcomes == ["watched"]  # the producer trusted the lingering worker: no wake-up, no new invocation
    assert (report.claimed, report.succeeded, report.stopped_by) == (1, 1, "empty")
    assert topics.wakeups() == []
    assert 3000 <= report.lingered_ms < 30_000
    assert store.read_wake_record("work").watcher is None  # it stopped watching as it stopped


def test_a_lingering_worker_on_a_fast_queue_looks_for_new_work_sooner(dynamodb, topics, clock):
    """A run that claimed 60 tasks within its first second polls for new work every 0.1 s (core.handshake.poll_seconds,
    60 tasks/s), not every 0.5 s: a task written as its linger begins is claimed within the first poll (with the
    fixed pace it waited 0.5 s; at 100 tasks/s some 50 tasks piled up between looks, the oldest over a second)."""
    settings = make_settings(topics, worker_linger_seconds=3.0)
    store = TaskStore(dynamodb, settings, clock)
    services = Services(settings, store, Notifier(boto3.client("sns"), settings), clock)
    write(services, count=60)
    written: list[str] = []

    class ProducerAsTheLingerBegins:
        """The clock of the worker's run: a producer writes a task as the run's first wait begins."""

        def __getattr__(self, name):
            return getattr(clock, name)

        def sleep(self, seconds):
            if not written:
                written.append(write(services))
            clock.sleep(seconds)

    report = Worker(store, lambda task: None, capacity=1, owner="worker-1", clock=ProducerAsTheLingerBegins()).run(
        "work", 30)
    assert written == ["watched"]
    assert (report.claimed, report.succeeded, report.stopped_by) == (61, 61, "empty")
    assert report.claim_ages_ms[-1] <= 150  # claimed at the first poll, 0.1 s after it was written


def test_a_fast_queues_linger_polls_soon_then_less_and_less_often(store, clock):
    """The pace of a fast queue (0.05 s) is the first poll's; each poll that finds nothing doubles it, up to the
    0.5 s of any queue: a 2 s linger peeks at the index 7 times, not 40 (issue 29)."""
    from taskqueue.wakeups.lingering import Lingering

    waits: list[float] = []
    peeks: list[float] = []

    class Recorded:
        def __getattr__(self, name):
            return getattr(clock, name)

        def sleep(self, seconds):
            waits.append(round(seconds, 3))
            clock.sleep(seconds)

    watch = Watch(store, "work", "w", Recorded(), index_peek=lambda: peeks.append(clock.monotonic()) and False)
    assert watch.begin()
    Lingering(watch, Recorded(), 2.0, lambda: 0.05).step(clock.now_ms(), 30.0)
    assert waits[:6] == [0.05, 0.1, 0.2, 0.4, 0.5, 0.5] and sum(waits[:7]) == 2.0
    assert len(peeks) == 7


def test_a_refused_publish_withdraws_the_claim_so_the_next_producer_wakes(services, settings, topics, clock):
    refusing = FaultyClient(boto3.client("sns")).fail("publish", "AuthorizationError")
    failing = ProducerHandshake(services.store, Notifier(refusing, settings), clock)
    request = parse_create_request({"queue": "work"}, settings)
    assert create_tasks(request, services.store, clock.now_ms(), None, failing).wakeup == "failed"
    assert services.store.read_wake_record("work").wake_sent_ms is None
    assert write(services) == "woken"
    assert topics.wakeups() == ["work"]


def test_a_producer_dead_after_its_write_is_covered_by_the_safety_net(services, topics, clock):
    put_silently(services.store, clock)
    assert run_safety_net(services) == ["work"]
    assert topics.wakeups() == ["work"]


def test_a_producer_dead_between_its_claim_and_its_publish_is_covered_within_one_safety_net_period(services, topics, clock):
    put_silently(services.store, clock)
    assert services.store.claim_wake("work", clock.now_ms(), int(WAKE_IN_FLIGHT_SECONDS * 1000))
    assert run_safety_net(services) == []  # trusted while it may still be on its way
    clock.advance(WAKE_IN_FLIGHT_SECONDS)
    assert run_safety_net(services) == ["work"]
    assert topics.wakeups() == ["work"]


def test_a_crashed_watcher_is_trusted_only_until_its_lease_lapses(services, topics, clock):
    assert Watch(services.store, "work", "crashed", clock).begin()  # never renewed, never stopped
    assert write(services) == "watched"
    clock.advance(WATCH_LEASE_SECONDS)
    assert write(services) == "woken"
    assert topics.wakeups() == ["work"]
    assert Watch(services.store, "work", "worker-2", clock).begin()  # the new worker takes the lapsed watch over


def test_a_paused_queue_is_not_woken_by_its_producers(services, topics):
    services.store.pause("work")
    assert write(services) == "paused"
    assert topics.wakeups() == []


@pytest.mark.parametrize("queue", ["work", "calls"])
def test_each_queue_has_its_own_handshake(services, topics, queue):
    assert write(services, queue) == "woken"
    assert topics.wakeups() == [queue]
    other = "calls" if queue == "work" else "work"
    assert services.store.read_wake_record(other).seq == 0


@pytest.mark.parametrize(("lanes", "helps"), [(1, False), (2, True)])
def test_a_full_worker_wakes_another_only_when_several_may_run(dynamodb, topics, clock, lanes, helps):
    """Producers wake a watched queue nobody: with several workers allowed (CLAIM_LANES > 1), a worker whose runner
    is full while claimable work waits wakes another itself, at most every HELP_SECONDS."""
    settings = make_settings(topics, claim_lanes=lanes)
    store = TaskStore(dynamodb, settings, clock)
    store.put_tasks(new_tasks(parse_create_request({"queue": "work", "count": 6}, settings), clock.now_ms(), settings))
    called: list[str] = []

    def slow(task):  # each task keeps the one runner slot busy for a second
        clock.advance(1.0)

    report = Worker(store, slow, capacity=1, owner="worker-1", clock=clock, call_for_help=called.append).run("work", 30)
    assert report.succeeded == 6
    if helps:
        assert called and set(called) == {"work"} and report.helpers_woken == len(called)
        assert len(called) <= 6 / HELP_SECONDS + 1  # not one per claim round
    else:
        assert called == [] and report.helpers_woken == 0


# ---- issue 29: producers skip their touch while an index-looking watcher watches --------------------------------


def test_a_producer_reads_instead_of_touching_while_an_index_looking_watcher_watches(services, clock):
    """A live watcher that looks at the index itself (ProcessTasks) and has not begun to stop: the producer's strongly
    consistent read finds it, and no write of the queue's record is made (a fifth of a write's price)."""
    watch = Watch(services.store, "work", "worker-1", clock, index_peek=lambda: False)
    assert watch.begin()
    seq = services.store.read_wake_record("work").seq
    assert write(services) == "watched"
    assert services.store.read_wake_record("work").seq == seq  # read, not touched
    matcher_like = Watch(services.store, "calls", "matcher-1", clock)  # the Matcher: its work is agents too
    assert matcher_like.begin()
    seq = services.store.read_wake_record("calls").seq
    assert write(services, "calls") == "watched"
    assert services.store.read_wake_record("calls").seq == seq + 1  # touched, as always


def test_a_write_without_a_touch_keeps_the_watcher_from_stopping_until_the_index_shows_it(services, dynamodb, settings, clock):
    """The lost wake-up the skipped touch could cause: the watcher's last empty look began before the write, nothing
    moved ``seq``, and its one-step stop would succeed with the task unseen. The stop now begins by setting
    ``stopping`` and counts only a look that begins the index's lag allowance after that, which shows the task even
    on an index that shows writes late."""
    store = LaggingIndex(dynamodb, settings, clock)
    watch = Watch(store, "work", "worker-1", clock, index_peek=lambda: False)
    assert watch.begin()
    look_started = clock.now_ms()  # an empty look
    clock.advance(INDEX_LAG_ALLOWANCE_SECONDS + 0.1)  # late enough for every write the record tells of
    assert write(services) == "watched"  # no touch
    written_ms = clock.now_ms()
    outcome = watch.try_stop(look_started)
    assert isinstance(outcome, LookAgain) and outcome.at_ms >= written_ms + INDEX_LAG_ALLOWANCE_SECONDS * 1000
    assert services.store.read_wake_record("work").stopping_ms is not None and watch.watching
    clock.advance((outcome.at_ms - clock.now_ms()) / 1000)
    shown, _ = store.look("work", 10, clock.now_ms())
    assert len(shown) == 1  # the look that may count sees it: the worker claims it instead of stopping


def test_a_producer_reuses_a_read_the_watcher_allows_and_the_watchers_stop_waits_for_it(services, clock):
    """Read reuse (READ_REUSE_SECONDS, issue 29's scale): once the watcher allows it, a producer reads the record once
    per READ_REUSE_SECONDS instead of once per request. A write made under a read taken before ``stopping`` was set
    (the producer did not see it) must still be seen: the stop's last look begins READ_REUSE_SECONDS later."""
    store = services.store
    reads = []
    read = store.read_wake_record
    store.read_wake_record = lambda *a, **k: reads.append(clock.now_ms()) or read(*a, **k)
    watch = Watch(store, "work", "worker-1", clock, index_peek=lambda: False)
    assert watch.begin()
    assert write(services) == "watched" and write(services) == "watched" and len(reads) == 2  # no reuse yet: a read each
    watch.allow_read_reuse()
    clock.advance(WATCH_RENEW_SECONDS)
    watch.keep()  # the renewal says so on the record
    look_started = clock.now_ms()  # an empty look
    clock.advance(INDEX_LAG_ALLOWANCE_SECONDS + 0.1)
    assert write(services) == "watched" and len(reads) == 3  # read, and kept for reuse
    clock.advance(0.1)
    first = watch.try_stop(look_started)  # the stop's first step: ``stopping`` set now
    assert isinstance(first, LookAgain) and store.read_wake_record("work").stopping_ms is not None
    reads.pop()  # (the test's own read)
    clock.advance(READ_REUSE_SECONDS - 0.2)
    assert write(services) == "watched" and len(reads) == 3  # under the reused read: no read, no touch
    written_ms = clock.now_ms()
    assert first.at_ms >= written_ms + INDEX_LAG_ALLOWANCE_SECONDS * 1000  # the last look comes after the index shows it
    clock.advance(0.2)  # the read is READ_REUSE_SECONDS old: the next producer reads, finds ``stopping`` and touches
    seq = read("work").seq
    assert write(services) == "watched" and len(reads) == 4 and read("work").seq == seq + 1


def test_a_watcher_allows_read_reuse_only_when_its_run_claims_fast(services, settings, clock):
    store = services.store
    for _ in range(3):
        write(services)
    Worker(store, lambda task: None, capacity=3, owner="slow", clock=clock).run("work", 1)
    assert not store.read_wake_record("work").read_reuse and store.read_wake_record("work").watcher is None
    for _ in range(20):
        write(services)
    worker = Worker(store, lambda task: None, capacity=3, owner="fast", clock=clock)
    seen = []
    original = store.renew_watch
    store.renew_watch = lambda *a, **k: seen.append(k.get("read_reuse")) or original(*a, **k)
    report = worker.run("work", 5)
    assert report.claimed == 20 and True in seen  # 20 claims at once: producers may reuse their reads
    assert not store.read_wake_record("work").read_reuse  # cleared with the watch


def test_a_producer_that_finds_the_watcher_stopping_touches_and_the_stop_fails(services, clock):
    """After the stop's first step producers touch again, so the second step's condition (``seq`` unchanged) fails
    and the watcher looks again; once it finds work, ``stopping`` is cleared and producers skip their touch again."""
    watch = Watch(services.store, "work", "worker-1", clock, index_peek=lambda: False)
    assert watch.begin()
    look_started = clock.now_ms()
    clock.advance(INDEX_LAG_ALLOWANCE_SECONDS + 0.1)
    first = watch.try_stop(look_started)
    assert isinstance(first, LookAgain)
    seq = services.store.read_wake_record("work").seq
    assert write(services) == "watched"
    assert services.store.read_wake_record("work").seq == seq + 1  # touched: the watcher is stopping
    clock.advance((first.at_ms - clock.now_ms()) / 1000)
    second = watch.try_stop(clock.now_ms())
    assert isinstance(second, LookAgain) and watch.watching  # the write stopped the stop: look again
    watch.resumed()  # the look found the task
    assert services.store.read_wake_record("work").stopping_ms is None
    seq = services.store.read_wake_record("work").seq
    assert write(services) == "watched" and services.store.read_wake_record("work").seq == seq


def test_a_touch_before_the_stops_first_step_makes_it_look_again(services, clock):
    """The first step is conditional too: a producer that touched after the watcher's last read (it found no live
    watcher a moment ago, say, or the queue paused) makes it fail, and the watcher looks again."""
    watch = Watch(services.store, "work", "worker-1", clock, index_peek=lambda: False)
    assert watch.begin()
    look_started = clock.now_ms()
    clock.advance(INDEX_LAG_ALLOWANCE_SECONDS + 0.1)
    services.store.touch_wake_record("work")
    outcome = watch.try_stop(look_started)
    assert isinstance(outcome, LookAgain) and outcome.at_ms <= clock.now_ms() and watch.watching
    assert services.store.read_wake_record("work").stopping_ms is None


def test_a_write_without_a_touch_before_the_budgets_end_is_found_by_the_look_for_work_left(services, dynamodb, settings, clock):
    """At its budget a watcher stops watching without the two steps. A producer that found it watching a moment before
    wrote without a touch; the worker's look for work left (its tail-call decision) waits until the index's lag
    allowance has passed since the watch ended, so even an index that shows writes late shows the task then."""
    store = LaggingIndex(dynamodb, settings, clock)
    watch = Watch(store, "work", "worker-1", clock, index_peek=lambda: False)
    assert watch.begin()
    assert write(services) == "watched"  # no touch
    assert watch.end(clock.now_ms()) is False  # nothing it knows of was missed
    assert not store.has_claimable("work")  # the index does not show it yet
    ended = clock.now_ms()
    watch.await_skipped_writes()
    assert clock.now_ms() >= ended + INDEX_LAG_ALLOWANCE_SECONDS * 1000
    assert store.has_claimable("work")  # the look for work left finds it: the worker tail-calls
