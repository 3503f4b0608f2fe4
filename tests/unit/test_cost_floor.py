"""The floor under issue 29's dollar targets (bench/cost_floor.py): the arithmetic of its bounds."""

from __future__ import annotations

import math

import pytest

from bench.cost_floor import (
    ARCHITECTURE_READS_PER_BATCH,
    ARCHITECTURE_WRITES_PER_TASK,
    FLOOR_WRITES_PER_TASK,
    SLOT_WRITES_PER_START,
    architecture_floor,
    awake_seconds_floor,
    batches_per_task,
    floor,
    markdown,
    measured,
)


def test_a_worker_kept_running_runs_95_percent_of_the_time():
    assert awake_seconds_floor(1.0) == pytest.approx(0.95)
    assert awake_seconds_floor(10.0) == pytest.approx(0.095)
    with pytest.raises(ValueError, match="rate must be positive"):
        awake_seconds_floor(0.0)


def test_a_poll_makes_a_batch_of_what_arrived_since_the_last_one():
    # Poisson at 1 task/s, 4 polls a second: a quarter of a task a poll, 22 % of the polls find one (or more).
    assert batches_per_task(1.0) == pytest.approx((1 - math.exp(-0.25)) / 0.25)
    assert batches_per_task(1.0) == pytest.approx(0.885, abs=0.001)
    assert batches_per_task(100.0) == pytest.approx(0.04, abs=1e-6)  # a batch every poll, 25 tasks each


def test_the_floor_at_one_task_a_second_by_hand():
    f = floor(1.0, 128, running_limit=False)
    # An invocation per batch (0.885 a task at 1 task/s) is cheaper than 0.95 s of 128 MB ($1.58 per million).
    per_task = batches_per_task(1.0)
    assert f.how == "invocation per batch"
    assert f.requests == pytest.approx(0.20 * per_task)
    assert f.compute == pytest.approx(per_task * 0.05 * 0.125 * 13.3334)
    assert f.writes == pytest.approx(FLOOR_WRITES_PER_TASK * 0.625)
    assert f.total == pytest.approx(per_task * (0.20 + 0.05 * 0.125 * 13.3334) + 3.125)


def test_the_template_s_running_limit_costs_a_started_invocation_a_slot_taken_and_freed():
    free, limited = floor(1.0, running_limit=False), floor(1.0)
    assert limited.writes - free.writes == pytest.approx(batches_per_task(1.0) * SLOT_WRITES_PER_START * 0.625)
    assert limited.how == "invocation per batch" and limited.total == pytest.approx(4.48, abs=0.005)
    # At 10 tasks/s a worker kept running (its slots held across tasks) is the cheaper: it pays no slot per task.
    assert floor(10.0).how == "worker kept running"
    assert floor(10.0).total == pytest.approx(3.125 + 0.095 * 0.125 * 13.3334)


def test_batches_share_an_invocation_at_higher_rates():
    assert floor(10.0, running_limit=False).requests == pytest.approx(0.20 * batches_per_task(10.0))
    assert floor(100.0, running_limit=False).requests == pytest.approx(0.20 / 25, rel=1e-6)
    assert floor(10.0, billing="provisioned").writes < floor(10.0).writes  # provisioned at 70 % costs less a write


def test_this_architecture_claims_each_batch_in_its_own_invocation_at_every_rate():
    for rate in (1.0, 10.0, 100.0):
        a, per_task = architecture_floor(rate), batches_per_task(rate)
        assert a.how == "an invocation per stream batch"
        # 5 writes a task; per batch the record's read (1 read unit) and a slot taken and freed (2 writes).
        assert a.writes == pytest.approx(ARCHITECTURE_WRITES_PER_TASK * 0.625
                                         + per_task * (ARCHITECTURE_READS_PER_BATCH * 0.125 + SLOT_WRITES_PER_START * 0.625))
        assert a.requests == pytest.approx(per_task * 0.20)


def test_bad_billing_is_refused_by_name():
    with pytest.raises(ValueError, match="on-demand' or 'provisioned'"):
        floor(1.0, 128, "reserved")


def test_the_table_says_which_targets_are_reachable_and_what_was_measured():
    table = markdown(measured({"dollars": {"product@1": {"total": 7.0}, "product-provisioned@10": {"total": 1.7}}}))
    rows = [line for line in table.splitlines() if line.startswith("| $")]
    assert len(rows) == 4
    # Every target is above the floor of any design and of this architecture.
    assert ["yes, in this architecture" in row for row in rows] == [True, True, True, True]
    assert "| 4.59 (an invocation per stream batch) |" in rows[0]
    assert "| 7.00 |" in rows[0] and "| no; +52% |" in rows[0]
    assert rows[3].endswith("| yes; +6% |")
