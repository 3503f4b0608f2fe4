"""work/fair_share.FairShare's claim order (recent use) without a store: what a claim round asks after each claim."""

from __future__ import annotations

import random

from taskqueue.store import Candidate
from taskqueue.work.fair_share import FairShare
from tests.support import FakeClock


def candidate(task_id: str, group: str | None) -> Candidate:
    return Candidate("", task_id, "work", 0, 0, None, group)


def share(clock: FakeClock) -> FairShare:
    return FairShare(None, "work", "w", clock, random.Random(1), on_error=lambda: None)  # type: ignore[arg-type]


def test_a_claim_weighs_on_its_group_at_once_so_the_rest_of_a_round_goes_elsewhere():
    clock = FakeClock()
    fair = share(clock)
    fair.claimed(candidate("q0", "quiet"))
    clock.advance(2)
    fair.ended("q0")  # the quiet group had the runner for 2 s; the busy group nothing yet
    look = [candidate("b1", "busy"), candidate("q1", "quiet"), candidate("b2", "busy"), candidate("q2", "quiet")]
    first = fair.order(look)
    assert [c.task_id for c in first] == ["b1", "b2", "q1", "q2"]
    fair.claimed(first[0])  # counted as the run's mean task time (2 s) from its claim: level with the quiet group
    rest = fair.order(first[1:])
    assert [c.task_id for c in rest] == ["q1", "q2", "b2"]  # equal use: fewer running first


def test_use_decays_and_a_run_with_no_ended_task_counts_a_running_one_as_one_second():
    clock = FakeClock()
    fair = share(clock)
    fair.claimed(candidate("a0", "a"))
    look = [candidate("a1", "a"), candidate("b1", "b")]
    assert [c.task_id for c in fair.order(look)] == ["b1", "a1"]
    clock.advance(0.5)
    fair.ended("a0")  # 0.5 s of use, the mean task time now 0.5 s
    fair.claimed(candidate("b0", "b"))  # weighs 0.5 s at once
    assert [c.task_id for c in fair.order(look)] == ["a1", "b1"]  # equal use (0.5 each): fewer running first
    clock.advance(0.6)  # b's task has run 0.6 s, a's 0.5 s decays
    assert [c.task_id for c in fair.order(look)] == ["a1", "b1"]
