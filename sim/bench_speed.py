"""How fast the simulation's engine is: microseconds per request of the fake DynamoDB, alone and under the kernel
(two yield points and a latency each), with moto in process beside it for scale.

    .venv/bin/python -m sim.bench_speed [--requests N] [--no-moto]

Each figure is the median of three rounds of N requests of one kind, on the queue table as template.yaml declares it
(two indexes, a stream): a GetItem, a PutItem of a task, the claim's conditional UpdateItem (ALL_NEW, an index entry
changed), a ReadyIndex Query of 10 entries; then a whole claim race of the product's own store code (a producer and 4
workers) per request it sent.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

TABLE = "bench-queue"


def _task_item(n: int) -> dict[str, Any]:
    task_id = f"task-{n:08d}"
    return {
        "taskId": {"S": task_id}, "queue": {"S": "work"}, "taskStatus": {"S": "PENDING"},
        "taskCreated": {"N": str(1_795_348_800_000 + n)}, "taskUpdated": {"N": str(1_795_348_800_000 + n)},
        "enqueued": {"N": str(1_795_348_800_000 + n)}, "ttl": {"N": "1795352400"}, "deleteAt": {"N": "1795352400"},
        "priority": {"N": "0"}, "attempts": {"N": "0"}, "maxAttempts": {"N": "3"}, "shard": {"N": "0"},
        "payload": {"S": f'{{"n": {n}}}'}, "readyKey": {"S": "work#0"},
        "readySort": {"S": f"000#{1_795_348_800_000 + n:015d}#{task_id}"},
    }


def _claim(n: int) -> dict[str, Any]:
    return {
        "TableName": TABLE, "Key": {"taskId": {"S": f"task-{n:08d}"}}, "ReturnValues": "ALL_NEW",
        "UpdateExpression": "SET #status = :to, #updated = :now, #s0 = :s0, #s1 = :s1, "
                            "#attempts = if_not_exists(#attempts, :zero) + :one REMOVE #r0",
        "ConditionExpression": "#status = :from AND (#ttl > :nowSeconds AND (attribute_not_exists(notBefore) OR "
                               "notBefore <= :now))",
        "ExpressionAttributeNames": {"#status": "taskStatus", "#updated": "taskUpdated", "#s0": "leaseOwner",
                                     "#s1": "leaseExpires", "#attempts": "attempts", "#r0": "statusKey",
                                     "#ttl": "ttl"},
        "ExpressionAttributeValues": {":to": {"S": "TAKEN"}, ":from": {"S": "PENDING"}, ":now": {"N": "1795348801000"},
                                      ":s0": {"S": "worker-1"}, ":s1": {"N": "1795349101000"}, ":zero": {"N": "0"},
                                      ":one": {"N": "1"}, ":nowSeconds": {"N": "1795348801"}},
    }


def _query() -> dict[str, Any]:
    return {"TableName": TABLE, "IndexName": "ReadyIndex", "KeyConditionExpression": "readyKey = :k",
            "ExpressionAttributeValues": {":k": {"S": "work#0"}}, "ScanIndexForward": False, "Limit": 10}


def _round(client: Any, requests: int, kind: str, offset: int) -> float:
    calls: dict[str, Callable[[int], Any]] = {
        "GetItem": lambda n: client.get_item(TableName=TABLE, Key={"taskId": {"S": f"task-{n:08d}"}},
                                             ConsistentRead=True),
        "PutItem": lambda n: client.put_item(TableName=TABLE, Item=_task_item(offset + n)),
        "UpdateItem (claim)": lambda n: client.update_item(**_claim(n)),
        "Query (10 entries)": lambda n: client.query(**_query()),
    }
    call = calls[kind]
    start = time.perf_counter()
    for n in range(requests):
        call(n)
    return (time.perf_counter() - start) / requests * 1e6


def _fill(client: Any, count: int) -> None:
    for n in range(count):
        client.put_item(TableName=TABLE, Item=_task_item(n))


def measure(make: Callable[[], tuple[Any, Callable[[Callable[[], None]], None]]], requests: int) -> dict[str, float]:
    """Median µs per request of each kind: ``make()`` gives a fresh (client, runner) where runner(fn) runs fn the way
    the engine does (directly, or as a kernel task)."""
    figures: dict[str, list[float]] = {}
    for round_number in range(3):
        for kind in ("GetItem", "PutItem", "UpdateItem (claim)", "Query (10 entries)"):
            client, runner = make()
            runner(lambda c=client: _fill(c, requests))
            found: list[float] = []
            runner(lambda c=client, k=kind, f=found, r=round_number: f.append(_round(c, requests, k, requests * (r + 1))))
            figures.setdefault(kind, []).append(found[0])
    return {kind: statistics.median(values) for kind, values in figures.items()}


def _fake(kernel_mode: bool) -> Callable[[], tuple[Any, Callable[[Callable[[], None]], None]]]:
    from sim.dynamodb import FakeDynamoDB
    from sim.kernel import Kernel

    def make() -> tuple[Any, Callable[[Callable[[], None]], None]]:
        if not kernel_mode:
            return FakeDynamoDB.from_template({"QueueTable": TABLE}), lambda fn: fn()
        kernel = Kernel(1, trace=False, step_budget=10**9)
        client = FakeDynamoDB.from_template({"QueueTable": TABLE}, kernel)

        def run(fn: Callable[[], None]) -> None:
            kernel.invoke(fn)
            kernel.run()

        return client, run

    return make


def _moto() -> Callable[[], tuple[Any, Callable[[Callable[[], None]], None]]]:
    import boto3
    from moto import mock_aws

    from sim.dynamodb import _template_tables

    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_ACCOUNT_ID_ENDPOINT_MODE="disabled")
    mock = mock_aws()
    mock.start()
    properties = _template_tables(os.path.join(os.path.dirname(__file__), "..", "template.yaml"), 0)["QueueTable"]
    counter = iter(range(10**6))

    def make() -> tuple[Any, Callable[[Callable[[], None]], None]]:
        global TABLE
        client = boto3.client("dynamodb")
        name = f"bench-queue-{next(counter)}"
        client.create_table(TableName=name, AttributeDefinitions=properties["AttributeDefinitions"],
                            KeySchema=properties["KeySchema"], BillingMode="PAY_PER_REQUEST",
                            GlobalSecondaryIndexes=[{k: v for k, v in g.items() if k != "ProvisionedThroughput"}
                                                    for g in properties["GlobalSecondaryIndexes"]])
        return _Renamed(client, name), lambda fn: fn()

    return make


class _Renamed:
    """A client whose requests name another table than TABLE (moto keeps every table of the process)."""

    def __init__(self, client: Any, name: str) -> None:
        self._client, self._name = client, name

    def __getattr__(self, operation: str) -> Any:
        def call(**params: Any) -> Any:
            if params.get("TableName") == TABLE:
                params["TableName"] = self._name
            return getattr(self._client, operation)(**params)

        return call


def race_per_request() -> tuple[float, int]:
    """A claim race of the product's store (tests/sim/test_product_under_kernel.py): µs per request it sent."""
    from tests.sim.test_product_under_kernel import claim_race

    start = time.perf_counter()
    run = claim_race(1, workers=4, tasks=60)
    elapsed = time.perf_counter() - start
    requests = sum(1 for _, _, label in run["trace"] if label.endswith(":reply"))
    return elapsed / requests * 1e6, requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--no-moto", action="store_true")
    args = parser.parse_args()
    rows = {"fake": measure(_fake(False), args.requests), "fake under the kernel": measure(_fake(True), args.requests)}
    if not args.no_moto:
        rows["moto (in process)"] = measure(_moto(), max(50, args.requests // 20))
    kinds = list(next(iter(rows.values())))
    print(f"µs per request (median of 3 rounds; {args.requests} requests a round, moto {max(50, args.requests // 20)})")
    print(f"{'':24}" + "".join(f"{k:>22}" for k in kinds))
    for name, figures in rows.items():
        print(f"{name:24}" + "".join(f"{figures[k]:>22.1f}" for k in kinds))
    per_request, requests = race_per_request()
    print(f"product claim race under the kernel (store code, 4 workers, 60 tasks): {per_request:.1f} µs per request "
          f"({requests} requests)")


if __name__ == "__main__":
    main()
