"""The partition-load simulation of bench/scale_model.py on cases small enough to check by hand.

Deterministic arrivals (exactly ``rate`` tasks per second) and round-robin shards make the answer exact:
a partition of capacity C that receives u units per task of its shard sustains C / u tasks/s per shard.
"""

from __future__ import annotations

import pytest

from bench.scale_model import (
    EVERY_SHARD,
    OWN_SHARD,
    SINGLE,
    Load,
    lease_marked,
    loads_from_partitions,
    max_sustainable_rate,
    simulate,
)

EXACT = dict(poisson=False, seconds=60, max_backlog_seconds=0.0, tolerance=0.001)


def rate(loads: list[Load], shards: int, **overrides: float) -> float:
    found, _ = max_sustainable_rate(loads, shards, **{**EXACT, **overrides})  # type: ignore[arg-type]
    return found


def test_one_partition_one_write_per_task_sustains_its_capacity() -> None:
    assert rate([Load("ready", "write", 1.0, OWN_SHARD)], 1, write_capacity=10) == pytest.approx(10, rel=0.01)


def test_two_writes_per_task_halve_it() -> None:
    assert rate([Load("ready", "write", 2.0, OWN_SHARD)], 1, write_capacity=10) == pytest.approx(5, rel=0.01)


def test_shards_multiply_what_own_shard_writes_allow() -> None:
    loads = [Load("ready", "write", 2.0, OWN_SHARD)]
    assert rate(loads, 4, write_capacity=10) == pytest.approx(20, rel=0.01)  # 4 partitions x 5 tasks/s


def test_reads_of_every_shard_do_not_scale_with_shards() -> None:
    loads = [Load("ready", "write", 2.0, OWN_SHARD), Load("ready", "read", 1.0, EVERY_SHARD)]
    # Writes alone would allow 4 x 5 = 20 tasks/s; every poll reads every shard: 30 read units / 1 per task.
    assert rate(loads, 4, write_capacity=10, read_capacity=30) == pytest.approx(20, rel=0.01)
    assert rate(loads, 16, write_capacity=10, read_capacity=30) == pytest.approx(30, rel=0.01)


def test_a_single_key_does_not_scale_at_all() -> None:
    loads = [Load("PENDING", "write", 4.0, SINGLE)]  # put + delete, and one claim-then-bounce (2 more)
    assert rate(loads, 1, write_capacity=100) == pytest.approx(25, rel=0.01)
    assert rate(loads, 32, write_capacity=100) == pytest.approx(25, rel=0.01)


def test_the_limiting_partition_is_named() -> None:
    loads = [Load("ready", "write", 1.0, OWN_SHARD), Load("TAKEN", "write", 3.0, OWN_SHARD)]
    found, hottest = max_sustainable_rate(loads, 1, write_capacity=30, **EXACT)  # type: ignore[arg-type]
    assert found == pytest.approx(10, rel=0.01)
    assert hottest.startswith("TAKEN")


def test_a_backlog_carries_over_to_the_next_second() -> None:
    loads = [Load("ready", "write", 1.0, OWN_SHARD)]
    # 12 tasks/s on a 10-unit partition: 2 units behind after one second, 20 after ten.
    result = simulate(loads, 1, 12, write_capacity=10, poisson=False, seconds=10, max_backlog_seconds=1.0)
    assert result.worst_backlog_seconds == pytest.approx(2.0)
    assert not result.sustainable


def test_random_arrivals_and_shards_at_thousands_per_second_stay_near_the_average() -> None:
    loads = [Load("ready", "write", 2.0, OWN_SHARD)]
    found, _ = max_sustainable_rate(loads, 4, write_capacity=1000, seconds=300)
    # The average allows 4 x 500 = 2,000; at these rates Poisson bursts and uneven shards are a few percent.
    assert found == pytest.approx(2000, rel=0.03)
    # A few tasks a second on many shards: bursts matter more (a shard's second can see twice its mean).
    small, _ = max_sustainable_rate(loads, 4, write_capacity=10, seconds=300, max_backlog_seconds=0.0)
    assert small < 20 * 0.8


def test_measured_partitions_become_loads() -> None:
    measured = {
        "write|ReadyIndex|work#0": 2.0,
        "read|ReadyIndex|work#0": 0.5,
        "read|ReadyIndex|work#0#delayed": 0.5,
        "write|StatusIndex|work#TAKEN#0": 2.0,
        "read|StatusIndex|calls#TAKEN#0": 0.01,
    }
    loads = loads_from_partitions(measured, shardable=True)
    assert {(load.name, load.kind, load.spread) for load in loads} == {
        ("ReadyIndex ready", "write", OWN_SHARD),
        ("ReadyIndex ready", "read", EVERY_SHARD),
        ("ReadyIndex delayed", "read", EVERY_SHARD),
        ("StatusIndex TAKEN", "write", OWN_SHARD),
    }
    seed = loads_from_partitions({"write|task-status-created-index|PENDING": 2.0}, shardable=False)
    assert seed == [Load("task-status-created-index PENDING", "write", 2.0, SINGLE)]


def test_the_queue_record_is_read_once_per_stream_batch_on_one_partition():
    from bench.scale_model import control_item_load

    (full,) = control_item_load(100)
    (single,) = control_item_load(1)
    assert (full.units, full.kind, full.spread, single.units) == (0.01, "read", SINGLE, 1.0)


def test_the_scale_model_adds_the_lease_mark_a_quick_run_left_off() -> None:
    measured = {"write|ReadyIndex|work#0": 2.0, "write|ReadyIndex|work#0#delayed": 0.5, "read|ReadyIndex|work#0": 0.2}
    assert lease_marked(measured) == {**measured, "write|ReadyIndex|work#0": 3.0}
    # One write unit a task more on the ready partition: a shard of 1,000 write units/s sustains 333 tasks/s, not 500.
    loads = loads_from_partitions(lease_marked({"write|ReadyIndex|work#0": 2.0}), shardable=True)
    assert rate(loads, 1, write_capacity=1000) == pytest.approx(1000 / 3, rel=0.01)
