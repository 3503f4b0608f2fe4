"""Helpers of the fuzz tests: the example budget, a spy on every request a client sends, and the one check every
handler must pass: it succeeds, or raises a TaskQueueError with a message. Anything else — a raw TypeError,
KeyError, AttributeError, ValueError — escapes and fails the example."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, TypeVar

from botocore.exceptions import ClientError
from hypothesis import HealthCheck, settings

from taskqueue.core.errors import TaskQueueError
from taskqueue.services import Services
from taskqueue.store import TaskStore
from taskqueue.store.control import control_id, is_control_id
from taskqueue.wakeups.notify import Notifier
from tests.agent_support import create_agent_table
from tests.conftest import TABLE, make_settings
from tests.support import template

T = TypeVar("T")

# 1,000 by default; FUZZ_EXAMPLES=100 for a quick run.
FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "1000"))
# Function-scoped fixtures are shared by every example on purpose (the moto world is built once per test); the
# examples are cheap, so the too_slow/data_too_large checks would only flag the recursive JSON strategy.
fuzz = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)

# DynamoDB operations that change a table.
WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}


class RequestSpy:
    """Records the operation name (and the queue table item it names) of every request a boto3 client makes."""

    def __init__(self, *clients: Any) -> None:
        self.calls: list[str] = []
        self.keys: list[str | None] = []  # the queue table item each call names (its Key's taskId), if one
        # before-parameter-build: the operation and its arguments as the code passed them (Key included).
        self._hooks = [(client, f"before-parameter-build.{client.meta.service_model.endpoint_prefix}") for client in clients]
        for client, event in self._hooks:
            client.meta.events.register(event, self._record)

    def close(self) -> None:
        for client, event in self._hooks:
            client.meta.events.unregister(event, self._record)

    def _record(self, model: Any, params: Any = None, **_: Any) -> None:
        self.calls.append(model.name)
        key = params.get("Key", {}).get("taskId", {}).get("S") if isinstance(params, dict) else None
        self.keys.append(key)

    def writes(self) -> list[str]:
        return [name for name in self.calls if name in WRITES]

    def task_writes(self) -> list[str]:
        """Writes other than to a queue's control item (its record)."""
        return [name for name, key in zip(self.calls, self.keys) if name in WRITES and not (key and is_control_id(key))]

    def publishes(self) -> list[str]:
        return [name for name in self.calls if name == "Publish"]

    def clear(self) -> None:
        self.calls.clear()
        self.keys.clear()


def invoke(call: Callable[[], T]) -> tuple[T | None, TaskQueueError | None]:
    """(result, None) or (None, the TaskQueueError it raised, checked to carry a message). Any other exception
    escapes and fails the example."""
    try:
        return call(), None
    except TaskQueueError as exc:
        assert str(exc).strip(), f"{type(exc).__name__} without a message"
        return None, exc


def scan(client: Any, table: str) -> list[dict[str, Any]]:
    """Every item of ``table``, in a stable order, as a Scan returns them. Read from moto's own state, the table
    itself: a Scan request costs about 1 ms per agent-table item (botocore and moto serialize each value), which
    thousands of before/after comparisons cannot afford. A table moto does not hold is scanned."""
    try:
        items = [item.to_json()["Attributes"] for item in _moto_table(client, table).all_items()]
    except LookupError:
        items = []
        kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
        while True:
            page = client.scan(**kwargs)
            items += page["Items"]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))


def is_task(item: dict[str, Any]) -> bool:
    """A task item, not a queue's control item (its record: pause, the delayed head)."""
    return not is_control_id(item["taskId"]["S"])


def forget_wake_records(client: Any) -> None:
    """Delete the queues' control items, so the next example starts from a queue as new."""
    for queue in ("work", "calls"):
        client.delete_item(TableName=TABLE, Key={"taskId": {"S": control_id(queue)}})


def _moto_table(client: Any, table: str) -> Any:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    tables = dynamodb_backends[DEFAULT_ACCOUNT_ID][client.meta.region_name].tables
    if table not in tables:
        raise LookupError(table)
    return tables[table]


class RecordingSns:
    """An SNS client that records the queue of each wake-up or tail call, and refuses those of the queues in
    ``down`` as a throttled publish would."""

    def __init__(self) -> None:
        self.published: list[str] = []
        self.down: tuple[str, ...] = ()

    def publish(self, **kwargs: Any) -> dict[str, str]:
        queue = kwargs["MessageAttributes"]["queue"]["StringValue"]
        if queue in self.down:
            raise ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "Publish")
        self.published.append(queue)
        return {"MessageId": f"m-{len(self.published)}"}


def create_tables(client: Any) -> None:
    """The queue table and the agent table as template.yaml declares them, without their streams: moto keeps every
    stream record and deep-copies all tables with them on each TransactWriteItems, which makes a run of thousands
    of invocations quadratic. No handler fuzzed here reads a stream (Trigger's records are made by the tests)."""
    props = template()["Resources"]["QueueTable"]["Properties"]
    client.create_table(
        TableName=TABLE,
        AttributeDefinitions=props["AttributeDefinitions"],
        KeySchema=props["KeySchema"],
        GlobalSecondaryIndexes=props["GlobalSecondaryIndexes"],
        BillingMode=props["BillingMode"],
    )
    client.update_time_to_live(
        TableName=TABLE,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": props["TimeToLiveSpecification"]["AttributeName"]},
    )
    create_agent_table(client, stream=False)


# Topic ARNs for the settings: publishing goes to a RecordingSns, never to these.
TOPICS = {"worker_wake_up_topic_arn": "arn:aws:sns:us-east-1:123456789012:worker-wake-up-topic"}


def fuzz_services(client: Any, clock: Any, sns: RecordingSns, **overrides: Any) -> Services:
    """The handlers' Services on the fuzz tables, publishing to ``sns``. A refused publish is tried again at once:
    what is fuzzed is what gets published, not when (the backoff's real waits took a fifth of the Trigger fuzz)."""
    settings = make_settings(None, **TOPICS, **overrides)
    notifier = Notifier(sns, settings, sleep=lambda _seconds: None)
    return Services(settings, TaskStore(client, settings, clock), notifier, clock)
