"""Differential runs: the same product code against the fake DynamoDB and against the run's engine (moto, or
DynamoDB Local with ``--dynamodb=local|both``), each request's answer recorded and the two compared.

A scenario is a function of (DynamoDB client, clock) that drives the product's own stores. ``run_both`` runs it on a
``Recorder`` around each client, with the process's randomness made deterministic (``sim.determinism``: the same
task ids, the same random draws) and a fresh ``FakeClock`` at the same start, so both runs send the same requests as
long as they get the same answers. The answers are compared request by request, in a canonical order (a
product's thread pool may send a few requests in either order), with what DynamoDB leaves unspecified taken out:
the order of a Scan's or a BatchGetItem's items, request ids, consumed capacity (moto's is wrong).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import boto3
from botocore.exceptions import ClientError

from sim.determinism import deterministic_entropy
from sim.dynamodb import FakeDynamoDB
from tests.support import FakeClock

DATA_OPERATIONS = frozenset({"get_item", "put_item", "update_item", "delete_item", "query", "scan", "batch_get_item",
                             "batch_write_item", "transact_write_items", "transact_get_items"})


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def normalized_response(operation: str, response: dict[str, Any]) -> dict[str, Any]:
    answer = {k: v for k, v in response.items() if k not in ("ResponseMetadata", "ConsumedCapacity")}
    if not answer.get("ItemCollectionMetrics", True):  # moto's empty one, never asked for
        del answer["ItemCollectionMetrics"]
    if operation == "scan" and "Items" in answer:
        answer["Items"] = sorted(answer["Items"], key=_canonical)
    if operation == "batch_get_item":
        answer["Responses"] = {t: sorted(items, key=_canonical) for t, items in answer.get("Responses", {}).items()}
    for empty in ("UnprocessedKeys", "UnprocessedItems"):
        if empty in answer and not answer[empty]:
            del answer[empty]
    return answer


def normalized_error(exc: ClientError) -> dict[str, Any]:
    response = exc.response
    shown: dict[str, Any] = {"Code": response["Error"]["Code"]}
    if "Item" in response:
        shown["Item"] = response["Item"]
    if "CancellationReasons" in response:
        shown["Reasons"] = [{k: v for k, v in r.items() if k != "Message"} for r in response["CancellationReasons"]]
    return shown


class Recorder:
    """A DynamoDB client that records each data request with its normalized answer."""

    def __init__(self, client: Any, entropy: Any = None) -> None:
        self._client = client
        self.entropy = entropy  # sim.determinism.Entropy: paused while a real client sends (botocore draws ids)
        self.log: list[tuple[str, str, str]] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if name not in DATA_OPERATIONS:
            return attribute

        def call(**params: Any) -> Any:
            request = _canonical(params)
            try:
                if self.entropy is not None:
                    with self.entropy.paused():
                        response = attribute(**params)
                else:
                    response = attribute(**params)
            except ClientError as exc:
                self.log.append((name, request, _canonical({"error": normalized_error(exc)})))
                raise
            self.log.append((name, request, _canonical(normalized_response(name, response))))
            return response

        return call


Scenario = Callable[[Any, FakeClock], Any]


def run_on(client: Any, scenario: Scenario, start_ms: int, seed: int) -> tuple[Recorder, Any]:
    with deterministic_entropy(seed) as entropy:
        recorder = Recorder(client, entropy)
        outcome = scenario(recorder, FakeClock(start_ms))
    return recorder, outcome


def run_both(scenario: Scenario, setup: Callable[[Any], None], start_ms: int, seed: int = 1
             ) -> tuple[Recorder, Recorder, Any, Any, FakeDynamoDB]:
    """Run ``scenario`` on the engine of the test (``boto3.client("dynamodb")``, inside the ``aws`` fixture) and on a
    fresh fake, each after ``setup(client)`` (create the tables)."""
    engine = boto3.client("dynamodb")
    setup(engine)
    fake = FakeDynamoDB(start_ms=start_ms)
    setup(fake)
    on_engine, engine_outcome = run_on(engine, scenario, start_ms, seed)
    on_fake, fake_outcome = run_on(fake, scenario, start_ms, seed)
    return on_engine, on_fake, engine_outcome, fake_outcome, fake


def assert_same_answers(engine: Recorder, fake: Recorder) -> None:
    """Every request got the same answer from both (the two logs as multisets of (operation, request, answer))."""
    assert engine.log, "the scenario sent no request"
    mine, theirs = sorted(fake.log), sorted(engine.log)
    if mine == theirs:
        return
    only_fake = [entry for entry in fake.log if entry not in engine.log]
    only_engine = [entry for entry in engine.log if entry not in fake.log]
    shown = "\n".join(f"  fake:   {e}" for e in only_fake[:3]) + "\n" + "\n".join(f"  engine: {e}" for e in only_engine[:3])
    raise AssertionError(f"{len(only_fake)} answer(s) differ ({len(fake.log)} requests on the fake, "
                         f"{len(engine.log)} on the engine); first ones:\n{shown}")


def all_items(client: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    request: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = client.scan(**request)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            return sorted(items, key=_canonical)
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
