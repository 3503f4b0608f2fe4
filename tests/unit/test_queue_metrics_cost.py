"""bench/queue_metrics_cost.py: a run's reads, logs and metrics priced a month as docs/operations.md states them, and
each query counted at DynamoDB's minimum when DynamoDB Local reports less."""

from __future__ import annotations

import pytest

from bench.queue_metrics_cost import RUNS_A_MONTH, ReadUnits, Run


def test_a_runs_figures_priced_a_month():
    dollars = Run(read_units=3.5, queries=3, emf_bytes=419, events=1, metrics=4).dollars()
    assert RUNS_A_MONTH == 43_800  # 730 hours of one run a minute
    assert dollars["reads"] == pytest.approx(3.5 * 43_800 * 0.125 / 1e6)  # $0.019
    assert dollars["logs"] == pytest.approx((419 + 26) * 43_800 / 1e9 * 0.50)  # $0.010
    assert dollars["metrics"] == pytest.approx(1.20)


class Events:
    def __init__(self) -> None:
        self.handlers: dict[str, object] = {}

    def register(self, name: str, handler: object) -> None:
        self.handlers[name] = handler


class Client:
    def __init__(self) -> None:
        self.meta = type("Meta", (), {"events": Events()})()


def test_each_query_costs_at_least_half_a_unit_and_asks_for_its_capacity():
    client = Client()
    units = ReadUnits(client)
    params: dict = {}
    client.meta.events.handlers["provide-client-params.dynamodb.Query"](params=params)
    assert params["ReturnConsumedCapacity"] == "TOTAL"
    count = client.meta.events.handlers["after-call.dynamodb.Query"]
    count(parsed={"ConsumedCapacity": {"CapacityUnits": 0.0}})  # DynamoDB Local's empty query
    count(parsed={"ConsumedCapacity": {"CapacityUnits": 2.5}})
    assert (units.units, units.queries) == (3.0, 2)
    with pytest.raises(RuntimeError, match="with-dynamodb-local"):
        count(parsed={})  # an engine that reports nothing (moto without it): refused, not counted as free


def test_importing_it_leaves_the_environment_alone():
    """bench.common sets the benchmarks' environment on import (metrics off): imported with this module, it silenced
    the metrics of every later test in the same process."""
    import os
    import subprocess
    import sys

    check = ("import os; before = dict(os.environ); import bench.queue_metrics_cost; "
             "assert dict(os.environ) == before, set(os.environ) ^ set(before)")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("POWERTOOLS_")}
    environment["PYTHONPATH"] = os.pathsep.join(["layers/taskqueue", "."])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    subprocess.run([sys.executable, "-c", check], check=True, env=environment, cwd=root)
