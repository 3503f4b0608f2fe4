"""What one task costs in DynamoDB writes from creation to SUCCESS, measured on moto.

Runs N tasks through the real CreateTasks and ProcessTasks code paths (the serialized moto server, instant runner),
counts the write *requests* the store sends by operation (a botocore event hook), and derives the
*index* writes from the table's stream: for every change of a task item, an index whose key attributes
appear costs a put, one whose key disappears a delete, one whose key changes both, one whose key
stays but whose projected attributes change an update. (moto's ConsumedCapacity is wrong, so capacity
units are not read from it.) Run: .venv/bin/python bench/write_cost.py [N]
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "layers" / "taskqueue"), str(ROOT)]
os.environ.update(
    AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
    AWS_ACCOUNT_ID_ENDPOINT_MODE="disabled", POWERTOOLS_TRACE_DISABLED="true", POWERTOOLS_LOG_LEVEL="ERROR",
)


from taskqueue.core.model import new_tasks, parse_create_request  # noqa: E402
from taskqueue.core.settings import Settings  # noqa: E402
from taskqueue.store import TaskStore  # noqa: E402
from taskqueue.work.worker import Worker  # noqa: E402
from tests.support import create_queue_table, template  # noqa: E402

WRITE_OPERATIONS = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}


def index_definitions() -> dict[str, tuple[list[str], list[str] | None]]:
    """index name -> (key attributes, projected non-key attributes or None for ALL)."""
    props = template()["Resources"]["QueueTable"]["Properties"]
    found = {}
    for index in props["GlobalSecondaryIndexes"]:
        keys = [k["AttributeName"] for k in index["KeySchema"]]
        projection = index["Projection"]
        extra = None if projection["ProjectionType"] == "ALL" else projection.get("NonKeyAttributes", [])
        found[index["IndexName"]] = (keys, extra)
    return found


def index_writes(old: dict | None, new: dict | None, indexes) -> Counter:
    writes: Counter = Counter()
    for name, (keys, projected) in indexes.items():
        old_key = tuple(old.get(k) for k in keys) if old and all(k in old for k in keys) else None
        new_key = tuple(new.get(k) for k in keys) if new and all(k in new for k in keys) else None
        if old_key and new_key and old_key == new_key:
            watched = projected if projected is not None else sorted(set(old) | set(new))
            if any(old.get(a) != new.get(a) for a in watched):
                writes[name] += 1
        else:
            writes[name] += int(old_key is not None) + int(new_key is not None)
    return writes


def main(count: int) -> None:
    # The serialized moto server (local/emulator/server.py): in-process moto applies a write to the item and to its
    # index apart, and the worker's outcomes, written from runner threads while it looks, sometimes met an index entry
    # without its keys (a KeyError; never on DynamoDB).
    from bench.common import client_for
    from local.emulator.server import Emulator

    emulator = Emulator()
    endpoint = emulator.start()
    try:
        _measure(count, client_for(endpoint), client_for(endpoint, "dynamodbstreams"))
    finally:
        emulator.stop()


def _measure(count: int, client, streams) -> None:
    create_queue_table(client, "bench")
    requests: Counter = Counter()
    items_written: Counter = Counter()

    def count_call(model, params, **_):
        if model.name in WRITE_OPERATIONS:
            requests[model.name] += 1
            if model.name == "BatchWriteItem":
                items_written[model.name] += sum(len(v) for v in params["RequestItems"].values())
            else:
                items_written[model.name] += 1

    client.meta.events.register("before-parameter-build.dynamodb.*", count_call)
    # One worker run with a runner that takes no time: its claims leave the lease mark off (store/unmarked_leases.py).
    settings = Settings(queue_table_name="bench", page_size=10)
    store = TaskStore(client, settings)
    tasks = new_tasks(parse_create_request({"count": count}, settings), store._clock.now_ms(), settings)
    store.put_tasks(tasks)
    report = Worker(store, lambda task: None, capacity=3, owner="bench").run("work", 600)
    assert report.succeeded == count, report

    indexes = index_definitions()
    arn = client.describe_table(TableName="bench")["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    index_total: Counter = Counter()
    changes = 0
    while iterator:
        response = streams.get_records(ShardIterator=iterator, Limit=1000)
        for record in response["Records"]:
            changes += 1
            index_total += index_writes(record["dynamodb"].get("OldImage"), record["dynamodb"].get("NewImage"), indexes)
        iterator = response.get("NextShardIterator") if response["Records"] else None

    print(f"tasks: {count} (created in batches of 25, claimed and completed by one worker)")
    print(f"{'':34}{'total':>8}{'per task':>10}")
    for name in sorted(requests):
        print(f"{name + ' requests':34}{requests[name]:>8}{requests[name] / count:>10.2f}")
    table_items = sum(items_written.values())
    print(f"{'table item writes':34}{table_items:>8}{table_items / count:>10.2f}")
    for name in sorted(index_total):
        print(f"{name + ' writes':34}{index_total[name]:>8}{index_total[name] / count:>10.2f}")
    all_writes = table_items + sum(index_total.values())
    print(f"{'item writes incl. indexes':34}{all_writes:>8}{all_writes / count:>10.2f}")
    print(f"stream records: {changes}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
