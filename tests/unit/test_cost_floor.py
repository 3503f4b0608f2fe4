"""The floor under issue 29's dollar targets (bench/cost_floor.py): the arithmetic of its bounds."""

from __future__ import annotations

import pytest

from bench.cost_floor import (
    ARCHITECTURE_WRITES_PER_TASK,
    FLOOR_WRITES_PER_TASK,
    SLOT_WRITES_PER_START,
    architecture_floor,
    awake_seconds_floor,
    floor,
    markdown,
    measured,
)


def test_a_worker_kept_running_runs_95_percent_of_the_time():
    assert awake_seconds_floor(1.0) == pytest.approx(0.95)
    assert awake_seconds_floor(10.0) == pytest.approx(0.095)
    with pytest.raises(ValueError, match="rate must be positive"):
        awake_seconds_floor(0.0)


def test_the_floor_at_one_task_a_second_by_hand():
    f = floor(1.0, 128, running_limit=False)
    # An invocation per task (batches of one at 1 task/s) is cheaper than 0.95 s of 128 MB ($1.58 per million).
    assert f.how == "invocation per batch"
    assert f.requests == pytest.approx(0.20)
    assert f.compute == pytest.approx(0.05 * 0.125 * 13.3334)
    assert f.writes == pytest.approx(FLOOR_WRITES_PER_TASK * 0.625)
    assert f.total == pytest.approx(0.20 + 0.05 * 0.125 * 13.3334 + 3.125)


def test_the_template_s_running_limit_costs_a_started_invocation_a_slot_taken_and_freed():
    free, limited = floor(1.0, running_limit=False), floor(1.0)
    assert limited.writes - free.writes == pytest.approx(SLOT_WRITES_PER_START * 0.625)  # one start a task at 1 task/s
    assert limited.how == "invocation per batch" and limited.total == pytest.approx(4.66, abs=0.005)
    # At 10 tasks/s a worker kept running (its slots held across tasks) is the cheaper: it pays no slot per task.
    assert floor(10.0).how == "worker kept running"
    assert floor(10.0).total == pytest.approx(3.125 + 0.095 * 0.125 * 13.3334)


def test_batches_share_an_invocation_at_higher_rates():
    assert floor(10.0, running_limit=False).requests == pytest.approx(0.20 / 2.5)  # 4 polls a second: 2.5 tasks a batch
    assert floor(100.0, running_limit=False).requests == pytest.approx(0.20 / 25)
    assert floor(10.0, billing="provisioned").writes < floor(10.0).writes  # provisioned at 70 % costs less a write


def test_this_architecture_pays_three_index_writes_the_producers_read_and_the_linger():
    a = architecture_floor(1.0)
    assert a.writes == pytest.approx(ARCHITECTURE_WRITES_PER_TASK * 0.625 + 0.125)
    assert a.compute == pytest.approx(0.95 * 0.125 * 13.3334)
    # From 4 tasks/s a producer process reads the record once per 0.5 s (read reuse): 0.2 reads a task at 10 tasks/s.
    assert architecture_floor(10.0).writes == pytest.approx(ARCHITECTURE_WRITES_PER_TASK * 0.625 + 0.2 * 0.125)


def test_bad_billing_is_refused_by_name():
    with pytest.raises(ValueError, match="on-demand' or 'provisioned'"):
        floor(1.0, 128, "reserved")


def test_the_table_says_which_targets_are_reachable_and_what_was_measured():
    table = markdown(measured({"dollars": {"product@1": {"total": 7.0}, "product-provisioned@10": {"total": 1.7}}}))
    rows = [line for line in table.splitlines() if line.startswith("| $")]
    assert len(rows) == 4
    # Every target is above the floor of any design; with 5 write units a task (a lone watcher's quick task gets no
    # lease mark) and producers reusing their reads at 10 tasks/s and more, every one is above this architecture's
    # (with 6, 1 task/s's was not: $5.46).
    assert ["yes, in this architecture" in row for row in rows] == [True, True, True, True]
    assert "| 4.83 |" in rows[0]
    assert "| 7.00 |" in rows[0] and "| no; +45% |" in rows[0]
    assert rows[3].endswith("| yes; +17% |")
