"""A producer whose clock is off by 5 s either way never decides (issue 28), and the stream's backstop does not trust a
watcher that died after a producer trusted it; on moto and DynamoDB Local. A skewed producer never makes a watcher
stop before its write shows in the index, and never holds a watcher awake for its skew.

``lastWrite`` is stamped with the producer's clock. The watcher bounds it by the time it first read the write's
``seq`` on its own clock (``taskqueue.core.handshake.stop_look_due_ms``). The index here shows nothing (as a lagging
GSI would not yet): what is tested is when the watcher's empty look may count for a stop.
"""

from __future__ import annotations

import pytest

from taskqueue.core.handshake import (
    INDEX_LAG_ALLOWANCE_SECONDS,
    PRODUCER_CLOCK_SKEW_SECONDS,
    WATCH_LEASE_SECONDS,
    WATCH_RENEW_SECONDS,
)
from taskqueue.wakeups.watch import STOPPED, LookAgain, Watch

pytestmark = pytest.mark.dynamodb_engines

SKEW_MS = int(PRODUCER_CLOCK_SKEW_SECONDS * 1000)
LAG_MS = int(INDEX_LAG_ALLOWANCE_SECONDS * 1000)


def watcher_that_saw_a_skewed_write(services, clock, skew_ms: int) -> tuple[Watch, int]:
    """A watcher, then a producer's touch stamped ``skew_ms`` off the true time, which the watcher has read
    strongly consistently (its first stop attempt meets the moved seq). Returns the watch and the true write time."""
    watch = Watch(services.store, "work", "worker-1", clock)
    assert watch.begin()
    clock.advance(2)
    written_ms = clock.now_ms()
    services.store.touch_wake_record("work", now_ms=written_ms + skew_ms)  # the producer's clock
    clock.advance(0.2)  # the watcher reads it 0.2 s later
    outcome = watch.try_stop(clock.now_ms())  # seq moved: it must look again, and now knows the write
    assert isinstance(outcome, LookAgain) and watch.seen is not None and watch.seen.seq == 1
    return watch, written_ms


def test_a_producer_5_s_behind_cannot_make_a_look_right_after_its_write_count(services, clock):
    watch, written_ms = watcher_that_saw_a_skewed_write(services, clock, -SKEW_MS)
    clock.advance(0.1)  # an empty look right after: the index may not show the write yet
    outcome = watch.try_stop(clock.now_ms())
    assert isinstance(outcome, LookAgain), "stopped on a look the index's lag could hide the write from"
    assert outcome.at_ms >= written_ms + LAG_MS
    clock.advance(1.2)
    assert watch.try_stop(clock.now_ms()) == STOPPED


def test_a_producer_5_s_ahead_does_not_hold_the_watcher_awake_for_its_skew(services, clock):
    watch, written_ms = watcher_that_saw_a_skewed_write(services, clock, SKEW_MS)
    clock.advance(1.1)  # the lag allowance after the watcher read the write, not after the producer's stamp
    assert watch.try_stop(clock.now_ms()) == STOPPED
    assert clock.now_ms() < written_ms + SKEW_MS  # before the producer's own clock says the write was made


def test_the_streams_backstop_outwaits_a_watcher_that_missed_its_renewals(services, topics, clock):
    """A producer wrote while a watcher that has since died was still trusted (it said "watched"); the stream's batch
    may have begun before the death, so its Trigger can run while the dead lease still holds. It must not trust a
    watcher that missed a renewal: it waits the lease out (a few seconds) and wakes the queue."""
    dead = Watch(services.store, "work", "dead-worker", clock)
    assert dead.begin()
    assert services.store.touch_wake_record("work").watched(clock.now_ms())  # the producer trusted it
    clock.advance(2.5)  # no renewal since (a live watcher renews every 1.5 s): it was killed right after it began
    before = clock.monotonic()
    outcome = services.handshake.if_idle("work", "stream", outwait_lapse=True)
    assert outcome == "woken" and topics.wakeups() == ["work"]
    assert clock.monotonic() - before <= WATCH_LEASE_SECONDS  # it waited at most the rest of the lease


def test_the_streams_backstop_trusts_a_live_watcher_without_waiting(services, topics, clock):
    live = Watch(services.store, "work", "live-worker", clock)
    assert live.begin()
    clock.advance(WATCH_RENEW_SECONDS + 0.1)
    live.keep()  # renewed on its cadence
    before = clock.monotonic()
    assert services.handshake.if_idle("work", "stream", outwait_lapse=True) == "watched"
    assert clock.monotonic() == before and topics.wakeups() == []
