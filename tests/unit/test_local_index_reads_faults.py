"""The emulator's faults on top of the index reads: the same requests to the serialized moto server with its speed-ups
(``Emulator()``) and to moto as it is (``Emulator(fast_transactions=False)``), under GSI lag, the 400 KB item limit
and refused requests, get the same answers -- a lagged query still sees the table as it was, an oversized update is
still undone, a refused write still leaves nothing behind."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from local.emulator.server import Emulator
from tests.support import create_queue_table

TABLE = "faulty-tasks"
FAULTS = {
    "seed": 3,
    "index_lag": 600,  # every write from now on is still unseen by the indexes during the test
    "item_size_limit": True,
    "dynamodb_errors": [{"share": 0.3, "codes": ["ThrottlingException"], "per": "request",
                         "operations": ["PutItem", "UpdateItem", "DeleteItem"]}],
}


@pytest.fixture(scope="module")
def emulators() -> Iterator[tuple[Emulator, Emulator]]:
    with Emulator() as fast, Emulator(fast_transactions=False) as plain:
        yield fast, plain


def task(n: int, partition: str) -> dict[str, Any]:
    return {"taskId": {"S": f"t{n:03d}"}, "readyKey": {"S": partition}, "readySort": {"S": f"{n % 7}-{n:03d}"},
            "statusKey": {"S": "s0"}, "statusSort": {"N": str(n % 5)}, "ttl": {"N": str(10 + n % 4)},
            "notBefore": {"N": "1"}}


def writes(client: Any) -> list[str]:
    """Moves, deletes, new items and an update past 400 KB; what each write came to (refusals included)."""
    outcomes = []
    requests: list[tuple[str, dict[str, Any]]] = []
    for n in range(0, 30, 4):
        requests.append(("update_item", {"TableName": TABLE, "Key": {"taskId": {"S": f"t{n:03d}"}},
                                         "UpdateExpression": "SET readyKey = :k, readySort = :s",
                                         "ExpressionAttributeValues": {":k": {"S": "p1"}, ":s": {"S": "9"}}}))
    for n in range(1, 30, 6):
        requests.append(("delete_item", {"TableName": TABLE, "Key": {"taskId": {"S": f"t{n:03d}"}}}))
    for n in range(30, 36):
        requests.append(("put_item", {"TableName": TABLE, "Item": task(n, "p0")}))
    requests.append(("update_item", {"TableName": TABLE, "Key": {"taskId": {"S": "t002"}},
                                     "UpdateExpression": "SET readyKey = :k, padding = :big",
                                     "ExpressionAttributeValues": {":k": {"S": "p1"}, ":big": {"S": "x" * 420_000}}}))
    requests.append(("update_item", {"TableName": TABLE, "Key": {"taskId": {"S": "t003"}},
                                     "UpdateExpression": "REMOVE readyKey"}))
    for method, request in requests:
        try:
            getattr(client, method)(**request)
            outcomes.append("ok")
        except ClientError as exc:
            outcomes.append(exc.response["Error"]["Code"])
    return outcomes


def reads(client: Any) -> list[Any]:
    answers: list[Any] = []
    for partition in ("p0", "p1"):
        for forward in (True, False):
            request: dict[str, Any] = {"TableName": TABLE, "IndexName": "ReadyIndex", "ScanIndexForward": forward,
                                       "KeyConditionExpression": "readyKey = :k", "Limit": 4,
                                       "ExpressionAttributeValues": {":k": {"S": partition}}}
            while True:
                page = client.query(**request)
                answers.append({k: v for k, v in page.items() if k != "ResponseMetadata"})
                if "LastEvaluatedKey" not in page:
                    break
                request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        answers.append(client.query(TableName=TABLE, IndexName="ReadyIndex", Select="COUNT",
                                    KeyConditionExpression="readyKey = :k", FilterExpression="#ttl > :now",
                                    ExpressionAttributeNames={"#ttl": "ttl"},
                                    ExpressionAttributeValues={":k": {"S": partition}, ":now": {"N": "11"}})["Count"])
    answers.append(client.query(TableName=TABLE, IndexName="StatusIndex", KeyConditionExpression="statusKey = :k",
                                ExpressionAttributeValues={":k": {"S": "s0"}})["Items"])
    answers.append(sorted(item["taskId"]["S"] for item in client.scan(TableName=TABLE)["Items"]))
    return answers


def test_lag_size_limit_and_refusals_answer_as_on_moto_as_it_is(emulators: tuple[Emulator, Emulator]) -> None:
    found = []
    for emulator in emulators:
        setup = emulator.client(faults=False)
        create_queue_table(setup, TABLE)
        for n in range(30):
            setup.put_item(TableName=TABLE, Item=task(n, "p0"))
        before = reads(setup)
        emulator.set_faults(FAULTS)
        outcomes = writes(emulator.client(max_attempts=1))
        lagged = reads(emulator.client(faults=False))  # index lag is the table's: every client sees it
        emulator.set_faults({})
        now = reads(setup)
        found.append((outcomes, lagged, now))
        # A 600 s lag hides from the indexes every write made since it was switched on; the table Scan sees them.
        assert lagged[:-1] == before[:-1] and lagged[-1] != before[-1]
    (fast_outcomes, fast_lagged, fast_now), (plain_outcomes, plain_lagged, plain_now) = found
    assert "ThrottlingException" in fast_outcomes and "ValidationException" in fast_outcomes
    assert fast_outcomes == plain_outcomes
    assert fast_lagged == plain_lagged
    assert fast_now == plain_now
    assert fast_now != fast_lagged
