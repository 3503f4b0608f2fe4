"""The board's metric series and chart geometry: pure functions, and CloudWatch read back through moto."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import boto3
from hypothesis import given
from hypothesis import strategies as st

from taskq.board import charts
from taskq.board.metrics import MINUTE_MS, WINDOW_MINUTES, CloudWatchMetrics, bucket, emf_values, percentiles

NOW = 1_795_348_800_000 + 30_000  # half a minute into a minute


def blob(at_ms: int, queue: str, **values: object) -> str:
    metrics = [{"Name": name, "Unit": "Count"} for name in values]
    body = {"_aws": {"Timestamp": at_ms, "CloudWatchMetrics": [{"Namespace": "TaskQueues", "Dimensions": [["queue", "service"]],
                                                               "Metrics": metrics}]}, "queue": queue, "service": "taskqueue", **values}
    return "ProcessTasksFunction " + json.dumps(body)


def test_emf_lines_are_bucketed_per_minute_and_queue():
    lines = [
        blob(NOW, "work", TasksSucceeded=2.0, AgeAtClaim=[100.0, 200.0, 900.0]),
        blob(NOW - 5_000, "work", TasksSucceeded=3.0),
        blob(NOW - 2 * MINUTE_MS, "work", TasksCreated=10.0),
        blob(NOW - WINDOW_MINUTES * MINUTE_MS, "work", TasksSucceeded=50.0),  # before the window
        blob(NOW, "calls", CallsMatched=4.0),
        "TriggerFunction {\"_aws\": broken",
        "plain log line",
    ]
    series = bucket(emf_values(lines), ["work", "calls"], NOW, "test")
    work = series["work"]
    assert work.counts["TasksSucceeded"][-1] == 5.0 and work.total("TasksSucceeded") == 5.0
    assert work.counts["TasksCreated"][-3] == 10.0
    assert work.timings["AgeAtClaim"][-1] == (200.0, 900.0)
    assert series["calls"].total("CallsMatched") == 4.0 and series["calls"].total("TasksSucceeded") == 0.0


@given(st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1, max_size=200))
def test_percentiles_lie_within_the_values(values):
    p50, p95 = percentiles(values)
    assert min(values) <= p50 <= p95 <= max(values)


@given(st.lists(st.one_of(st.none(), st.floats(min_value=0, max_value=1e9, allow_nan=False)), min_size=2, max_size=60))
def test_every_point_lies_inside_the_plot(values):
    top = charts.scale([values])
    for pair in filter(None, charts.polyline(values, top).split(" ")):
        x, y = map(float, pair.split(","))
        assert charts.PAD_LEFT <= x <= charts.WIDTH + 0.01 and -0.01 <= y <= charts.HEIGHT - charts.PAD_BOTTOM + 0.01


def test_cloudwatch_series_come_back_per_minute(aws):
    cloudwatch = boto3.client("cloudwatch")
    at = datetime.fromtimestamp((NOW - MINUTE_MS) / 1000, UTC)
    for name, value in (("TasksSucceeded", 6.0), ("TasksShed", 1.0)):
        cloudwatch.put_metric_data(Namespace="TaskQueues", MetricData=[{
            "MetricName": name, "Value": value, "Unit": "Count", "Timestamp": at,
            "Dimensions": [{"Name": "service", "Value": "taskqueue"}, {"Name": "queue", "Value": "work"}]}])
    series = CloudWatchMetrics(cloudwatch).series(["work", "calls"], NOW)
    assert series["work"].total("TasksSucceeded") == 6.0 and series["work"].total("TasksShed") == 1.0
    assert series["calls"].total("TasksSucceeded") == 0.0 and series["work"].problem is None
