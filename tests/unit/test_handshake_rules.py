"""The wake-up handshake's pure rules (taskqueue.core.handshake): what a producer does after it wrote, and when a
worker's empty look may count for a stop."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from taskqueue.core.handshake import (
    FASTEST_POLL_SECONDS,
    INDEX_LAG_ALLOWANCE_SECONDS,
    LINGER_POLL_SECONDS,
    PRODUCER_CLOCK_SKEW_SECONDS,
    READ_REUSE_SECONDS,
    WAKE_IN_FLIGHT_SECONDS,
    WATCH_LEASE_SECONDS,
    WATCH_RENEW_SECONDS,
    ProducerStep,
    WakeRecord,
    poll_seconds,
    producer_step,
    renewal_due,
    reuse_allows,
    stop_look_due_ms,
)

NOW = 1_800_000_000_000


def test_an_idle_queue_is_woken():
    assert producer_step(WakeRecord(), NOW) is ProducerStep.WAKE


def test_a_live_watcher_is_trusted_and_a_lapsed_one_is_not():
    assert producer_step(WakeRecord(watcher="w", watch_until_ms=NOW + 1), NOW) is ProducerStep.WATCHED
    assert producer_step(WakeRecord(watcher="w", watch_until_ms=NOW), NOW) is ProducerStep.WAKE


def test_a_wake_up_in_flight_is_trusted_for_its_window_only():
    sent = NOW - int(WAKE_IN_FLIGHT_SECONDS * 1000)
    assert producer_step(WakeRecord(wake_sent_ms=sent + 1), NOW) is ProducerStep.IN_FLIGHT
    assert producer_step(WakeRecord(wake_sent_ms=sent), NOW) is ProducerStep.WAKE


def test_a_paused_queue_is_never_woken_by_a_producer():
    assert producer_step(WakeRecord(paused=True), NOW) is ProducerStep.PAUSED
    assert producer_step(WakeRecord(paused=True, watcher="w", watch_until_ms=NOW + 1), NOW) is ProducerStep.PAUSED


@given(st.integers(0, 2**42), st.integers(0, 2**42), st.booleans(), st.booleans(), st.booleans())
def test_a_producer_stays_passive_only_if_someone_else_will_act(now, last_write, watcher_live, in_flight, paused):
    record = WakeRecord(
        last_write_ms=last_write,
        watcher="w" if watcher_live else None,
        watch_until_ms=now + 1 if watcher_live else 0,
        wake_sent_ms=now if in_flight else None,
        paused=paused,
    )
    step = producer_step(record, now)
    if step is not ProducerStep.WAKE:  # someone will look: a watcher, a wake-up on its way, or `taskq resume`
        assert watcher_live or in_flight or paused
    else:
        assert not (watcher_live or in_flight or paused)


@given(st.integers(0, 2**42))
def test_an_empty_look_counts_only_after_the_index_lag_allowance(last_write):
    due = stop_look_due_ms(WakeRecord(last_write_ms=last_write))
    assert due == last_write + int(INDEX_LAG_ALLOWANCE_SECONDS * 1000)
    assert stop_look_due_ms(WakeRecord(last_write_ms=last_write), lag_seconds=0) == last_write


@given(st.integers(10_000, 2**42), st.integers(-5_000, 5_000), st.integers(0, 3_000))
def test_a_skewed_producers_last_write_never_lets_a_look_count_before_the_write_shows(true_write, skew, read_after):
    """``lastWrite`` is the producer's clock, off by up to PRODUCER_CLOCK_SKEW_SECONDS either way. With the time this
    worker first read the write's seq (after the write, on its own clock), the due time is never before the true
    write plus the lag allowance, and never later than that read plus it (no waiting for a producer's clock)."""
    lag_ms = int(INDEX_LAG_ALLOWANCE_SECONDS * 1000)
    seen = WakeRecord(seq=7, last_write_ms=true_write + skew)
    due = stop_look_due_ms(seen, seen_at_ms=true_write + read_after)
    assert true_write + lag_ms <= due <= true_write + read_after + lag_ms


def test_without_the_read_time_a_producer_clock_behind_would_let_a_look_count_too_early():
    """What the read time fixes: a producer 5 s behind stamps its write 5 s early."""
    seen = WakeRecord(seq=7, last_write_ms=100_000 - 5_000)
    assert stop_look_due_ms(seen) < 100_000  # lastWrite alone: due before the write was even made
    # With the read time: lastWrite + the skew allowance (100,000, the write itself here) bounds it, before the read.
    assert stop_look_due_ms(seen, seen_at_ms=100_200) == 100_000 + int(INDEX_LAG_ALLOWANCE_SECONDS * 1000)
    assert PRODUCER_CLOCK_SKEW_SECONDS >= 5


def test_a_watch_is_renewed_every_renewal_interval_well_before_its_short_lease_lapses():
    """A short lease (a dead watcher is replaced within it), renewed often enough that about three renewals may fail
    before it lapses; a lease shorter than two intervals is renewed at half of it."""
    assert WATCH_LEASE_SECONDS <= 5 and WATCH_LEASE_SECONDS / WATCH_RENEW_SECONDS >= 3
    lease_ms = int(WATCH_LEASE_SECONDS * 1000)
    renewed_after = int(WATCH_RENEW_SECONDS * 1000)
    assert not renewal_due(NOW + lease_ms - renewed_after + 1, NOW)
    assert renewal_due(NOW + lease_ms - renewed_after, NOW)
    assert not renewal_due(NOW + 1001, NOW, lease_seconds=2.0, every_seconds=1.5)
    assert renewal_due(NOW + 1000, NOW, lease_seconds=2.0, every_seconds=1.5)


def test_a_read_is_reused_only_while_young_and_only_as_the_watcher_allows():
    now_ms = 1_000_000
    allowing = WakeRecord(watcher="w", watch_until_ms=now_ms + 5_000, index_looks=True, read_reuse=True)
    assert reuse_allows(allowing, 10.0, 10.0 + READ_REUSE_SECONDS - 0.01, now_ms)
    assert not reuse_allows(allowing, 10.0, 10.0 + READ_REUSE_SECONDS, now_ms)  # too old: read again
    assert not reuse_allows(replace(allowing, read_reuse=False), 10.0, 10.0, now_ms)  # not allowed
    assert not reuse_allows(replace(allowing, stopping_ms=now_ms - 1), 10.0, 10.0, now_ms)  # it was stopping: touch
    assert not reuse_allows(replace(allowing, watch_until_ms=now_ms), 10.0, 10.0, now_ms)  # its watch ended
    assert not reuse_allows(replace(allowing, paused=True), 10.0, 10.0, now_ms)


def test_a_watcher_polls_at_the_linger_pace_up_to_ten_tasks_a_second_and_sooner_above():
    assert poll_seconds(0, 0.0) == poll_seconds(0, 30.0) == LINGER_POLL_SECONDS  # nothing claimed yet
    assert poll_seconds(10, 1.0) == poll_seconds(300, 30.0) == LINGER_POLL_SECONDS  # 10 tasks/s: as before
    assert poll_seconds(1000, 10.0) == FASTEST_POLL_SECONDS  # 100 tasks/s
    assert poll_seconds(40, 0.01) == poll_seconds(40, 1.0) == 0.125  # a burst at a run's start: over a second at least


@given(st.integers(0, 100_000), st.floats(0.0, 900.0), st.integers(1, 1_000))
def test_the_poll_pace_stays_within_its_bounds_and_never_slows_as_the_rate_grows(claimed, seconds, more):
    pace = poll_seconds(claimed, seconds)
    assert FASTEST_POLL_SECONDS <= pace <= LINGER_POLL_SECONDS
    assert poll_seconds(claimed + more, seconds) <= pace
