"""Faults AWS produces and the emulators do not, injected in front of a real (moto) client.

``FaultyClient`` wraps a boto3 client: each listed operation raises, in order, the ``ClientError`` codes
queued for it (as botocore raises them once its own retries are spent), then behaves normally.
``on_item(task_id)`` limits a fault to the requests on one item (the queue's record takes writes of its
own: slots, the planner's lease). ``ttl_sweep`` deletes what DynamoDB's TTL would delete at a given time, by the attribute the template names.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from tests.support import template


class FaultyClient:
    def __init__(self, client: Any) -> None:
        self._client = client
        self._faults: dict[str, list[str]] = defaultdict(list)
        self._when: dict[str, Callable[[dict[str, Any]], bool]] = {}
        self._lock = threading.Lock()
        self.raised: list[tuple[str, str]] = []
        self.calls: list[str] = []  # every operation asked for, in order
        self.requests: list[tuple[str, dict[str, Any]]] = []  # every operation with its arguments, in order

    def fail(self, operation: str, *codes: str, when: Callable[[dict[str, Any]], bool] | None = None) -> FaultyClient:
        """Make the next calls of ``operation`` raise ``codes``, one per call; with ``when``, only the calls whose
        request it accepts (e.g. those on one task's item)."""
        with self._lock:
            self._faults[operation].extend(codes)
            if when is not None:
                self._when[operation] = when
        return self

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._client, name)
        if not callable(real):
            return real

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.calls.append(name)
                self.requests.append((name, kwargs))
                when = self._when.get(name)
                chosen = self._faults.get(name) and (when is None or when(kwargs))
                code = self._faults[name].pop(0) if chosen else None
                if code:
                    self.raised.append((name, code))
            if code:
                raise ClientError({"Error": {"Code": code, "Message": f"injected {code}"}}, name)
            return real(*args, **kwargs)

        return call


def on_item(task_id: str) -> Callable[[dict[str, Any]], bool]:
    """A ``when`` for ``FaultyClient.fail``: the requests whose Key is the item ``task_id``."""
    return lambda request: request.get("Key", {}).get("taskId", {}).get("S") == task_id


def on_tasks(request: dict[str, Any]) -> bool:
    """A ``when`` for ``FaultyClient.fail``: requests on task items, not on a queue's record (slots and the
    planner's lease are written there)."""
    task_id = request.get("Key", {}).get("taskId", {}).get("S")
    return task_id is not None and not task_id.startswith("queue#")


def ttl_attribute() -> str:
    return template()["Resources"]["QueueTable"]["Properties"]["TimeToLiveSpecification"]["AttributeName"]


def ttl_sweep(client: Any, table: str, now_s: int) -> list[str]:
    """Delete every item whose TTL attribute (the one template.yaml names) is at or before ``now_s``, as
    DynamoDB's TTL may; returns the deleted task ids."""
    attribute = ttl_attribute()
    deleted: list[str] = []
    kwargs: dict[str, Any] = {"TableName": table}
    while True:
        page = client.scan(**kwargs)
        for item in page["Items"]:
            if attribute in item and int(item[attribute]["N"]) <= now_s:
                client.delete_item(TableName=table, Key={"taskId": item["taskId"]})
                deleted.append(item["taskId"]["S"])
        if "LastEvaluatedKey" not in page:
            return deleted
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
