"""When a lone watcher's claims leave the lease mark off (taskqueue.work.lease_marks): while fewer than half of the
recent tasks ran past LEASE_MARK_AFTER_SECONDS (a late mark costs a write unit more than a claim's)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from taskqueue.store.unmarked_leases import LEASE_MARK_AFTER_SECONDS
from taskqueue.work.lease_marks import RECENT_RUNS, MarkChoice

SHORT, LONG = 0.1, LEASE_MARK_AFTER_SECONDS


def test_with_nothing_seen_yet_the_claims_go_unmarked() -> None:
    assert MarkChoice().unmarked_pays


def test_one_long_task_turns_the_marks_back_on_and_quick_ones_turn_them_off_again() -> None:
    marks = MarkChoice()
    marks.ran(LONG)
    assert not marks.unmarked_pays
    marks.ran(SHORT)
    assert not marks.unmarked_pays  # one of two ran on: half, no gain
    marks.ran(SHORT)
    assert marks.unmarked_pays


@given(st.lists(st.booleans(), min_size=1, max_size=40))
def test_it_judges_by_the_last_runs_alone(ran_on: list[bool]) -> None:
    marks = MarkChoice()
    for long in ran_on:
        marks.ran(LONG if long else SHORT)
    recent = ran_on[-RECENT_RUNS:]
    assert marks.unmarked_pays == (2 * sum(recent) < len(recent))
