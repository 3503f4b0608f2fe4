"""Issue 29: the stream start's rule (what a batch of new tasks does, from the queue's record) and the arrival history
that tells a busy queue (taskqueue.work.stream_start)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from taskqueue.core.handshake import WakeRecord
from taskqueue.work.stream_start import BUSY_SECONDS, BUSY_TASKS, ArrivalHistory, StreamStep, stream_step

NOW = 1_800_000_000_000


def test_nobody_watching_claims_here_unless_the_queue_is_busy_or_has_groups():
    idle = WakeRecord()
    assert stream_step(idle, NOW, busy=False) is StreamStep.CLAIM
    assert stream_step(idle, NOW, busy=True) is StreamStep.WORKER
    assert stream_step(WakeRecord(has_groups=True), NOW, busy=False) is StreamStep.WORKER


def test_a_live_index_looking_watcher_has_them_but_not_once_it_began_to_stop():
    watching = WakeRecord(watcher="w", watch_until_ms=NOW + 3_000, index_looks=True)
    assert stream_step(watching, NOW, busy=False) is StreamStep.WATCHED
    stopping = WakeRecord(watcher="w", watch_until_ms=NOW + 3_000, index_looks=True, stopping_ms=NOW - 100)
    assert stream_step(stopping, NOW, busy=True) is StreamStep.CLAIM
    lapsed = WakeRecord(watcher="w", watch_until_ms=NOW - 1, index_looks=True)
    assert stream_step(lapsed, NOW, busy=False) is StreamStep.CLAIM


def test_a_wake_up_in_flight_or_a_pause_claims_nothing():
    assert stream_step(WakeRecord(wake_sent_ms=NOW - 500), NOW, busy=False) is StreamStep.IN_FLIGHT
    assert stream_step(WakeRecord(wake_sent_ms=NOW - 60_000), NOW, busy=False) is StreamStep.CLAIM  # stale claim
    assert stream_step(WakeRecord(paused=True), NOW, busy=False) is StreamStep.PAUSED


def test_busy_is_the_last_window_of_arrivals_only():
    history = ArrivalHistory()
    history.note(BUSY_TASKS - 1, 100.0)
    assert not history.busy(100.0)
    history.note(1, 101.0)
    assert history.busy(101.0)
    assert not history.busy(100.0 + BUSY_SECONDS + 0.01)  # the first note left the window


@given(st.lists(st.tuples(st.floats(0, 0.5), st.integers(1, 5)), max_size=60))
def test_busy_means_at_least_busy_tasks_in_the_window(notes):
    history, now, seen = ArrivalHistory(), 0.0, []
    for gap, count in notes:
        now += gap
        history.note(count, now)
        seen.append((now, count))
        expected = sum(c for t, c in seen if t > now - BUSY_SECONDS) >= BUSY_TASKS
        assert history.busy(now) == expected
