"""What a worker may claim with the time its invocation has left (taskqueue/run_time.py): pure rules."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from taskqueue.core.run_time import (
    FINISH_RESERVE_SECONDS,
    LAMBDA_MAX_TIMEOUT_SECONDS,
    MIN_RUN_SECONDS,
    START_RESERVE_SECONDS,
    InvocationTime,
    claim_lease_seconds,
    claim_window_seconds,
    effective_run_seconds,
    fits,
    longest_run_seconds,
    run_within,
    too_long_message,
)
from tests.support import FakeClock

timeouts = st.integers(min_value=int(START_RESERVE_SECONDS + FINISH_RESERVE_SECONDS + MIN_RUN_SECONDS),
                       max_value=LAMBDA_MAX_TIMEOUT_SECONDS)


def test_the_longest_run_is_the_timeout_less_the_start_and_the_finish():
    assert longest_run_seconds(180) == 165
    assert longest_run_seconds(900) == 885
    assert longest_run_seconds(15) == 0 and longest_run_seconds(3) == 0


def test_a_task_fits_when_its_run_and_the_finish_reserve_fit_in_the_time_left():
    assert fits(50, 60) and not fits(51, 60)
    assert run_within(60) == 50
    assert not fits(1, 10)


def test_a_task_without_a_run_of_its_own_takes_its_queues():
    assert effective_run_seconds(None, 60) == 60
    assert effective_run_seconds(300, 60) == 300


@given(timeouts, st.floats(min_value=0, max_value=START_RESERVE_SECONDS))
def test_the_longest_declarable_task_fits_any_invocation_that_started_within_the_start_reserve(timeout, spent):
    """What CreateTasks accepts, a fresh invocation can claim: no task is accepted that no invocation can run."""
    assert fits(longest_run_seconds(timeout), timeout - spent)
    assert not fits(longest_run_seconds(timeout) + 1, timeout - START_RESERVE_SECONDS)


@given(st.floats(min_value=0.01, max_value=900), st.floats(min_value=-10, max_value=900))
def test_the_claim_window_ends_while_the_shortest_task_can_still_finish(budget, remaining):
    window = claim_window_seconds(budget, remaining)
    assert 0 <= window <= budget
    if window > 0:
        assert fits(MIN_RUN_SECONDS, remaining - window + 1e-9)


@given(st.integers(min_value=1, max_value=43200), st.one_of(st.none(), timeouts))
def test_a_workers_claim_outlasts_its_invocation(lease, timeout):
    held = claim_lease_seconds(lease, timeout)
    assert held >= lease
    assert timeout is None or held >= timeout


@given(st.floats(min_value=20, max_value=900),
       st.lists(st.tuples(st.floats(min_value=0, max_value=60), st.integers(min_value=1, max_value=885)), max_size=30))
def test_an_invocation_never_claims_what_it_cannot_finish(hold, steps):
    """Whatever time passes between claims, every claim the rule admits finishes before the invocation ends, with
    the finish reserve kept after it."""
    clock = FakeClock()
    time = InvocationTime(clock, hold, None)
    end = clock.monotonic() + hold
    for elapsed, run_seconds in steps:
        clock.advance(elapsed)
        within = time.run_within()
        assert within is not None
        if run_seconds <= within:
            assert clock.monotonic() + run_seconds + FINISH_RESERVE_SECONDS <= end + 1e-6


def test_an_invocation_remembers_what_it_found_too_long_and_tells_what_no_invocation_can_run():
    clock = FakeClock()
    time = InvocationTime(clock, 180, worker_timeout_seconds=180)
    assert time.run_within() == 170
    clock.advance(100)
    assert time.run_within() == 70
    assert time.too_long("a", 100) is False  # a fresh invocation can run it
    assert time.too_long("b", 166) is True  # none can: the Timeout leaves 165 s
    assert time.found_too_long == {"a", "b"}  # both passed over by this invocation's looks, "c" is not


def test_without_the_workers_timeout_no_task_is_judged_beyond_every_invocation():
    time = InvocationTime(FakeClock(), 20, worker_timeout_seconds=None)
    assert time.too_long("a", 800) is False
    assert InvocationTime(FakeClock(), None, None).run_within() is None  # an unbounded run claims anything


def test_the_refusal_says_what_the_timeout_leaves_and_what_to_do():
    message = too_long_message(1200, 900)
    assert "runSeconds (1200)" in message and "leaves 885 s" in message and "ProcessTasksTimeout" in message
