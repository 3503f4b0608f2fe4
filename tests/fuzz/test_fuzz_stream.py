"""ProcessTasks fed fuzzed batches of the queue table's stream (its TaskStream event): good records (new tasks, tasks
made PENDING again, TTL deletions of waiting tasks), records that can never be read, mutated records and garbage.

Whatever the batch: the invocation never fails (a failed batch would block its shard through the retries for nothing:
every record here is one a retry cannot fix), every task a good record names runs exactly once, each TTL deletion of
a waiting task counts once as shed, each record it cannot read counts as MalformedRecords, and no task is written but
the ones it runs."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taskqueue.core.model import new_tasks, parse_create_request
from tests.conftest import TABLE
from tests.fuzz.strategies import json_values, mutated
from tests.fuzz.support import FUZZ_EXAMPLES, fuzz, fuzz_services, invoke
from tests.support import load_event, load_function, metric_totals

app = load_function("process_tasks")
SHED = load_event("process_tasks-stream-ttl-remove.json")["Records"][0]
NOT_A_TASK = load_event("process_tasks-stream-malformed.json")["Records"][1]
_ids = itertools.count()


@pytest.fixture
def world(fuzz_dynamodb, clock, sns) -> Any:
    return fuzz_services(fuzz_dynamodb, clock, sns, runner_capacity=3), fuzz_dynamodb


class Runner:
    def __init__(self) -> None:
        self.ran: list[str] = []

    def __call__(self, task: Any) -> None:
        self.ran.append(task.task_id)


def insert(item: dict[str, Any]) -> dict[str, Any]:
    return {"eventName": "INSERT", "eventSource": "aws:dynamodb",
            "dynamodb": {"Keys": {"taskId": item["taskId"]}, "NewImage": item, "SequenceNumber": "1"}}


BAD = [
    {"eventName": "INSERT", "eventSource": "aws:dynamodb", "dynamodb": {"NewImage": {"queue": {"S": "work"}}}},
    {"eventName": "INSERT", "eventSource": "aws:dynamodb", "dynamodb": []},
    {"eventName": "INSERT", "eventSource": "aws:dynamodb"},
    5, None, "INSERT",
]
# A record of the batch: ("task", n) a new task to create and name, ("shed",) a TTL deletion, ("bad", record), or
# ("unknown", anything): a mutated record or JSON garbage, whose outcome is not known beforehand.
records = st.one_of(
    st.just(("task",)), st.just(("task",)), st.just(("shed",)),
    st.just(("unknown", copy.deepcopy(NOT_A_TASK))),  # no task's image: not for the worker (its filter passes none)
    st.sampled_from(BAD).map(lambda r: ("bad", copy.deepcopy(r))),
    st.one_of(mutated(SHED, 2), json_values).map(lambda r: ("unknown", r)),
)


# Each example creates its tasks and runs a worker over them: a fifth of the budget covers the mixes.
@settings(fuzz, max_examples=max(20, FUZZ_EXAMPLES // 5))
@given(batch=st.lists(records, min_size=1, max_size=8), replays=st.integers(1, 2))
def test_a_stream_batch_never_fails_runs_each_named_task_once_and_counts_what_it_cannot_read(world, capsys, batch, replays):
    svc, dynamodb = world
    # Hypothesis runs every example on one table: a task an earlier (failing, or shrinking) example left PENDING would
    # be claimed from the index here and fail this example for another's fault.
    left = dynamodb.scan(TableName=TABLE, FilterExpression="taskStatus IN (:p, :t)",
                         ExpressionAttributeValues={":p": {"S": "PENDING"}, ":t": {"S": "TAKEN"}})["Items"]
    for item in left:
        dynamodb.delete_item(TableName=TABLE, Key={"taskId": item["taskId"]})
    event_records: list[Any] = []
    named: list[str] = []
    for entry in batch:
        if entry[0] == "task":
            request = parse_create_request({"taskIds": [f"fuzz-{next(_ids)}"]}, svc.settings)
            (task,) = new_tasks(request, svc.clock.now_ms(), svc.settings)
            svc.store.put_tasks([task])
            named.append(task.task_id)
            event_records.append(insert(dynamodb.get_item(TableName=TABLE, Key={"taskId": {"S": task.task_id}})["Item"]))
        elif entry[0] == "shed":
            event_records.append(copy.deepcopy(SHED))
        else:
            event_records.append(entry[1])
    event_records.append(insert({"taskId": {"S": "fuzz-anchor"}, "queue": {"S": "calls"}}))  # makes it a stream batch
    runner = Runner()
    capsys.readouterr()
    for _ in range(replays):  # at least once: a batch delivered again runs nothing again
        report, error = invoke(lambda: app.handle({"Records": event_records}, 120, "fuzz", svc, runner))
        assert error is None, f"a stream batch failed: {error}"
    app.metrics.flush_metrics()
    metrics = metric_totals(capsys.readouterr().out)
    assert sorted(runner.ran) == sorted(named)  # each named task once, none other (the table holds no other)
    assert all(svc.store.get(task_id).status.value == "SUCCESS" for task_id in named)
    sheds = sum(1 for entry in batch if entry[0] == "shed")
    unknown = sum(1 for entry in batch if entry[0] == "unknown")
    assert sheds * replays <= metrics.get("TasksShed", 0) <= (sheds + unknown) * replays
    bad = sum(1 for entry in batch if entry[0] == "bad")
    assert bad * replays <= metrics.get("MalformedRecords", 0) <= (bad + unknown) * replays
