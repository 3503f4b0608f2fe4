"""The invocation model's stream starts (issue 29): the table's stream invokes ProcessTasks for each batch of new tasks,
producers skip the wake-up handshake (bench/invocation_model.py), and the idle run's replay of them (bench/lifo_runs.py).
No AWS: the model is virtual time, the replay's records are built from a stand-in reader."""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
from collections import Counter
from typing import Any

import pytest

_environment = dict(os.environ)
from bench.common import template_values  # noqa: E402 - imported between the environment's save and its restore
from bench.invocation_model import DesignModel, ModelResult, peak_concurrency, product_model, simulate  # noqa: E402
from bench.lifo_runs import InsertRecords  # noqa: E402

# bench.common sets the benchmarks' environment on import (metrics off, a bench service name): the other tests of this
# process must not run under it.
os.environ.clear()
os.environ.update(_environment)


@functools.cache
def model(stream_starts: bool) -> DesignModel:
    return dataclasses.replace(product_model(template_values()), stream_starts=stream_starts)


@functools.cache
def run(rate: float, tasks: int, stream_starts: bool = True, seed: int = 1) -> ModelResult:
    return simulate(model(stream_starts), rate, tasks, seed=seed)


def test_product_model_reads_stream_starts_from_the_template() -> None:
    values = template_values()
    assert product_model(values).stream_starts is values.stream_starts
    assert product_model(values).stream_batch_size == values.stream_start_batch_size


def test_at_one_task_a_second_each_batch_is_claimed_where_it_lands() -> None:
    result = run(1.0, 300)
    assert result.completed == 300
    assert len(result.claim_waits) == 300
    assert result.summary()["claim_wait_p95"] < 1.0
    # Producers do no handshake at all.
    assert "producer touch" not in result.handshake_requests
    assert "producer claim" not in result.handshake_requests
    # One ProcessTasks invocation per batch (the few SNS wake-ups are the backstops' and the safety net's).
    sources = result.worker_sources
    assert result.invocations["ProcessTasks"] == len(result.stream_starts) + sources["wake-up"]
    assert sources["wake-up"] <= 0.05 * len(result.stream_starts)
    assert sources["stream: fast"] >= 0.7 * len(result.stream_starts)
    assert 0.8 <= result.invocations["ProcessTasks"] / 300 <= 1.05
    # Every fast path took running-limit slots and claimed by key; no task was claimed twice.
    assert result.handshake_requests["stream start claim"] >= len(result.fast_path_claims)
    assert result.handshake_requests["stream start read"] == len(result.stream_starts)


def test_at_ten_tasks_a_second_a_watcher_takes_over() -> None:
    result = run(10.0, 1000)
    assert result.completed == 1000
    sources = result.worker_sources
    assert sources["stream: regular"] + sources["wake-up"] >= 1  # the regular worker ran
    assert sources["stream: ended"] > 0.5 * len(result.stream_starts)  # most batches find it watching
    assert len(result.fast_path_claims) < 0.1 * 1000
    assert "producer touch" not in result.handshake_requests


def test_the_trace_names_every_fast_path_claim_in_exactly_one_stream_start() -> None:
    for rate, tasks in ((1.0, 300), (10.0, 1000), (100.0, 300)):
        result = run(rate, tasks)
        named = Counter(index for _, indices in result.stream_starts for index in indices)
        assert all(count == 1 for count in named.values()), "a record delivered twice"
        assert len(named) + result.skipped_stream_records == tasks
        claims = Counter(result.fast_path_claims)
        assert all(count == 1 for count in claims.values())
        assert set(claims) <= set(named)
        times = [t for t, _ in result.stream_starts]
        assert times == sorted(times)
        for t, indices in result.stream_starts:
            assert indices == sorted(indices)
            assert all(result.arrivals[i] <= t for i in indices), "a batch names a task written after it started"


def test_a_runner_that_takes_time_keeps_every_task_and_the_running_limit() -> None:
    result = run_with_runner(0.5, 2.0)
    assert result.completed == len(result.arrivals) == 120
    assert len(result.claim_waits) == 120


def run_with_runner(rate: float, runner_seconds: float) -> ModelResult:
    return simulate(model(True), rate, 120, runner_seconds=runner_seconds, seed=2)


def test_without_stream_starts_the_model_is_as_before() -> None:
    result = run(1.0, 300, stream_starts=False)
    assert result.completed == 300
    assert result.stream_starts == [] and result.fast_path_claims == []
    assert result.handshake_requests["producer touch"] == 300
    assert not any(key.startswith("stream start") for key in result.handshake_requests)
    assert set(result.worker_sources) == {"wake-up"}
    assert result.invocations["ProcessTasks"] == len(result.worker_starts)


def test_the_seed_has_no_stream_starts() -> None:
    from bench.invocation_model import seed_model

    with pytest.raises(ValueError):
        simulate(dataclasses.replace(seed_model(), stream_starts=True), 1.0, 10)


# ---- the idle run's replay (bench/lifo_runs.py): the stream records of a stream start --------------------------------


class Reader:
    """A stand-in for the unmetered client: the table's description and its items."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.gets = 0

    def describe_table(self, TableName: str) -> dict[str, Any]:  # noqa: N803 - boto3's names
        return {"Table": {"KeySchema": [{"AttributeName": "taskId", "KeyType": "HASH"}],
                          "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}}}

    def get_item(self, TableName: str, Key: dict[str, Any], ConsistentRead: bool) -> dict[str, Any]:  # noqa: N803
        assert ConsistentRead
        self.gets += 1
        return {"Item": copy.deepcopy(self.items[Key["taskId"]["S"]])}  # a client answers with its own copy


class Queue:
    """A stand-in ProductLifo: each create writes one task."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.created_ids: list[str] = []

    def create(self) -> None:
        task_id = f"task-{len(self.created_ids)}"
        self.reader.items[task_id] = {"taskId": {"S": task_id}, "queue": {"S": "work"}, "taskStatus": {"S": "PENDING"},
                                      "taskCreated": {"N": str(1_800_000_000_000 + len(self.created_ids))}}
        self.created_ids.append(task_id)


def test_the_replay_hands_a_stream_start_the_inserts_of_the_tasks_its_batch_names() -> None:

    reader = Reader()
    queue = Queue(reader)
    inserts = InsertRecords(reader, "bench-table", queue)  # type: ignore[arg-type]
    for _ in range(3):
        inserts.create()
    written = copy.deepcopy(reader.items)
    reader.items["task-1"]["taskStatus"] = {"S": "SUCCESS"}  # a worker's later write does not change the INSERT
    event = inserts.event([2, 1])
    assert reader.gets == 3
    records = event["Records"]
    assert [r["dynamodb"]["Keys"] for r in records] == [{"taskId": {"S": "task-2"}}, {"taskId": {"S": "task-1"}}]
    assert [r["dynamodb"]["NewImage"] for r in records] == [written["task-2"], written["task-1"]]
    for record in records:
        assert record["eventName"] == "INSERT"
        assert record["eventSource"] == "aws:dynamodb"
        assert record["eventSourceARN"].startswith("arn:aws:dynamodb:us-east-1:000000000000:table/")
        assert record["dynamodb"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert len({r["eventID"] for r in records}) == 2


def test_peak_concurrency_counts_the_invocations_running_at_one_instant() -> None:
    assert peak_concurrency([]) == 0
    assert peak_concurrency([(0.0, 1.0), (1.0, 2.0)]) == 1  # one ends as the next begins
    assert peak_concurrency([(0.0, 3.0), (1.0, 2.0), (1.5, 4.0), (3.5, 5.0)]) == 3
    # A stream start beside the watcher: two at once at 10 tasks/s, as the model reports it.
    assert run(10.0, 300).summary()["peak_concurrency"] >= 2
