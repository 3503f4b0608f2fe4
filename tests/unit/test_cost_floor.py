"""The floor under the dollar targets (bench/cost_floor.py): the arithmetic of its two bounds."""

from __future__ import annotations

import pytest

from bench.cost_floor import DESIGN_WRITES_PER_TASK, awake_seconds_floor, floor, markdown


def test_a_worker_runs_at_least_the_share_of_time_the_invocations_cannot_cover():
    assert awake_seconds_floor(1.0, 0.15) == pytest.approx(0.80)  # 1 - 0.15 invocations - 0.05 late
    assert awake_seconds_floor(10.0, 0.15) == pytest.approx(0.080)
    assert awake_seconds_floor(1.0, 0.99) == 0.0  # an invocation per task: no need to wait at all
    with pytest.raises(ValueError, match="rate must be positive"):
        awake_seconds_floor(0.0, 0.1)


def test_the_floor_at_one_task_a_second_by_hand():
    f = floor(1.0, 0.15, 128)
    # 0.8 s x 0.125 GB x $13.3334 per million GB-s, 0.15 x $0.20 per million requests, 6 x $0.625 per million writes.
    assert f.compute == pytest.approx(0.8 * 0.125 * 13.3334)
    assert f.requests == pytest.approx(0.03)
    assert f.writes == pytest.approx(DESIGN_WRITES_PER_TASK * 0.625)
    assert f.total == pytest.approx(1.333340 + 0.03 + 3.75)
    assert floor(1.0, 0.15, 256).total > f.total  # more memory, more dollars for the same time


def test_where_requests_cost_more_than_the_time_they_save_the_floor_spends_none():
    # At 10 tasks/s an invocation saves 0.1 s of 128 MB ($0.17 per million) and costs $0.20 per million.
    f = floor(10.0, 0.077, 128, "provisioned")
    assert f.requests == 0.0 and f.awake_seconds == pytest.approx(0.095)
    assert floor(10.0, 0.077, 128, "on-demand").writes > f.writes  # provisioned at 70 % costs less per write


def test_bad_billing_is_refused_by_name():
    with pytest.raises(ValueError, match="on-demand' or 'provisioned'"):
        floor(1.0, 0.1, 128, "reserved")


def test_the_table_says_which_targets_no_design_reaches():
    table = markdown({1.0: 0.583, 10.0: 0.3083})
    rows = [line for line in table.splitlines() if line.startswith("| issue")]
    assert len(rows) == 3
    assert rows[0].endswith("| no |") and rows[1].endswith("| no |")
    assert rows[2].endswith("| only below 256 MB |")
