"""TaskStore.call_facts: the queue table's one adapter reads the Matcher's call payloads (and creation times) in
batches."""

from typing import Any

from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.store import TaskStore
from tests.conftest import TABLE


class CountingClient:
    """The DynamoDB client, with the BatchGetItem requests it was sent recorded."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.batch_gets: list[dict[str, Any]] = []

    def batch_get_item(self, **request: Any) -> dict[str, Any]:
        self.batch_gets.append(request)
        return self._client.batch_get_item(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def create(store: TaskStore, clock: Any, n: int, payload: dict[str, Any]) -> list[str]:
    body = {"queue": "calls", "count": n, "payload": payload}
    tasks = new_tasks(parse_create_request(body, store.settings), clock.now_ms(), store.settings)
    store.put_tasks(tasks)
    return [t.task_id for t in tasks]


def test_payloads_come_back_by_id_100_per_request_and_missing_ids_are_left_out(dynamodb, settings, clock):
    client = CountingClient(dynamodb)
    store = TaskStore(client, settings, clock)
    ids = create(store, clock, 150, {"caller": "c", "preferences": {"language": "fr"}})
    found = store.call_facts([*ids, "no-such-task", ids[0]])
    assert {i: f.payload for i, f in found.items()} == {i: {"caller": "c", "preferences": {"language": "fr"}} for i in ids}
    assert {f.created_ms for f in found.values()} == {clock.now_ms()}
    assert [len(r["RequestItems"][TABLE]["Keys"]) for r in client.batch_gets] == [100, 51]
    assert all(r["RequestItems"][TABLE]["ProjectionExpression"] == "taskId, payload, taskCreated" for r in client.batch_gets)


def test_a_payload_that_is_not_json_comes_back_marked_invalid(dynamodb, settings, clock):
    store = TaskStore(dynamodb, settings, clock)
    (task_id,) = create(store, clock, 1, {})
    dynamodb.update_item(TableName=TABLE, Key={"taskId": {"S": task_id}}, UpdateExpression="SET payload = :p",
                         ExpressionAttributeValues={":p": {"S": "{not json"}})
    assert store.call_facts([task_id])[task_id].payload == {"invalid": "{not json"}
