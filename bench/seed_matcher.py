"""A Python port of the seed's FIFO-with-filtering matcher (seed 000: "Implement serverless FIFO queues with
filtering capabilities using Amazon DynamoDB transactions"), for the benchmarks only. Written from the
article and DESIGN.md's account of its scripts.

One table (``pk``/``sk``) holds three kinds of item, as in the article:

- agents: ``pk = "AllAgents"``, ``sk = "Agent#<id>"``, with ``AgentStatus`` (queued / attendingCall);
- queue metadata: ``pk = "AllQueues"``, ``sk = <queue key>``, with ``QueueVersionId`` and ``QueueDepth``;
- agent queue entries: ``pk = <queue key>``, ``sk = <available time>#<agent id>``, one per combination the
  agent serves (fan-out on write).

Queuing an agent is one transaction: put its entries, mark it queued, and bump the version and depth of
every queue it enters. Matching a caller (``match``):

1. ``TransactGetItems`` of *all* queue metadata (a snapshot of every version);
2. a strongly consistent ``Query`` of the caller's queue, ``Limit=1``: the agent who waited longest;
3. one ``TransactWriteItems``: delete every entry of that agent, update the metadata of every queue it was
   in (condition: the version seen in step 1; bump it, depth - 1), mark the agent attendingCall;
4. on ``TransactionCanceledException`` (another match or enqueue bumped a version it read), start again
   from step 1 — the port retries (the article's script does not, and crashes), ``max_retries`` times
   with the same jittered backoff as the product's matcher, then gives the caller up for now.

Every match bumps versions that other matches read (every agent is in the no-preference queues), so
concurrent matchers abort each other: that is the defect the product's design removes.

Two adaptations, so that both designs serve the very same callers: the fan-out is the product's
(``taskqueue.matching.rules.entry_keys``: each attribute may be "*" = no preference; the article fans out over
language x gender only), and callers come from an in-process FIFO list standing in for the article's SQS
FIFO queue (one consumer per message: no DynamoDB cost, no lost claims on calls).
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

AGENTS_PK = "AllAgents"
QUEUES_PK = "AllQueues"


def create_seed_agent_table(client: Any, name: str) -> None:
    client.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        BillingMode="PAY_PER_REQUEST",
    )


def entry_sort(available_ms: int, agent_id: str) -> str:
    return f"{available_ms:015d}#{agent_id}"


@dataclass
class SeedMatchReport:
    matched: int = 0
    no_agent: int = 0
    aborted: int = 0  # cancelled match transactions
    gave_up: int = 0  # callers handed back after max retries
    lost: int = 0  # never: each caller reaches one matcher (SQS FIFO)
    matches: list[tuple[str, str]] = field(default_factory=list)  # (caller, agent)


class SeedMatcher:
    def __init__(self, client: Any, table: str, queue_keys: list[str], *, max_retries: int = 4,
                 retry_base_ms: float = 5.0, rng: random.Random | None = None) -> None:
        self._db = client
        self.table = table
        self.queue_keys = sorted(queue_keys)
        self.max_retries = max_retries
        self.retry_base_ms = retry_base_ms
        self._rng = rng or random.Random()

    # ---- setup (not measured) -----------------------------------------------------------------------

    def create_queues(self) -> None:
        for key in self.queue_keys:
            self._db.put_item(TableName=self.table, Item={
                "pk": {"S": QUEUES_PK}, "sk": {"S": key}, "QueueVersionId": {"N": "0"}, "QueueDepth": {"N": "0"},
            })

    def enqueue(self, agent_id: str, name: str, keys: list[str], available_ms: int) -> None:
        """Queue an available agent: its entries, its status, and a version bump of every queue it enters."""
        sort = entry_sort(available_ms, agent_id)
        items: list[dict[str, Any]] = [
            {"Put": {"TableName": self.table, "Item": {
                "pk": {"S": key}, "sk": {"S": sort}, "AgentID": {"S": agent_id}, "AgentName": {"S": name},
                "Queues": {"L": [{"S": k} for k in keys]},
            }}}
            for key in keys
        ]
        items += [
            {"Update": {"TableName": self.table, "Key": {"pk": {"S": QUEUES_PK}, "sk": {"S": key}},
                        "UpdateExpression": "ADD QueueVersionId :one, QueueDepth :one",
                        "ExpressionAttributeValues": {":one": {"N": "1"}}}}
            for key in keys
        ]
        items.append({"Put": {"TableName": self.table, "Item": {
            "pk": {"S": AGENTS_PK}, "sk": {"S": f"Agent#{agent_id}"}, "AgentID": {"S": agent_id},
            "AgentName": {"S": name}, "AgentStatus": {"S": "queued"},
        }}})
        self._db.transact_write_items(TransactItems=items)

    # ---- matching ---------------------------------------------------------------------------------------

    def _snapshot(self) -> dict[str, int]:
        versions: dict[str, int] = {}
        for start in range(0, len(self.queue_keys), 100):
            chunk = self.queue_keys[start : start + 100]
            response = self._db.transact_get_items(TransactItems=[
                {"Get": {"TableName": self.table, "Key": {"pk": {"S": QUEUES_PK}, "sk": {"S": key}}}} for key in chunk
            ])
            for key, entry in zip(chunk, response["Responses"]):
                item = entry.get("Item") or {}
                versions[key] = int(item.get("QueueVersionId", {}).get("N", "0"))
        return versions

    def _head(self, key: str) -> dict[str, Any] | None:
        response = self._db.query(
            TableName=self.table,
            KeyConditionExpression="pk = :k",
            ExpressionAttributeValues={":k": {"S": key}},
            ConsistentRead=True,
            Limit=1,
        )
        items = response.get("Items", [])
        return items[0] if items else None

    def match(self, caller: str, key: str, report: SeedMatchReport) -> str:
        """"matched", "no-agent" or "gave-up" (handed back: the caller will be tried again)."""
        for attempt in range(self.max_retries + 1):
            versions = self._snapshot()
            head = self._head(key)
            if head is None:
                report.no_agent += 1
                return "no-agent"
            agent_id = head["AgentID"]["S"]
            queues = [q["S"] for q in head["Queues"]["L"]]
            items: list[dict[str, Any]] = [
                {"Delete": {"TableName": self.table, "Key": {"pk": {"S": q}, "sk": head["sk"]}}} for q in queues
            ]
            items += [
                {"Update": {
                    "TableName": self.table,
                    "Key": {"pk": {"S": QUEUES_PK}, "sk": {"S": q}},
                    "UpdateExpression": "SET QueueVersionId = :next, QueueDepth = QueueDepth - :one",
                    "ConditionExpression": "QueueVersionId = :seen",
                    "ExpressionAttributeValues": {":seen": {"N": str(versions.get(q, 0))},
                                                  ":next": {"N": str(versions.get(q, 0) + 1)}, ":one": {"N": "1"}},
                }}
                for q in queues
            ]
            items.append({"Update": {
                "TableName": self.table,
                "Key": {"pk": {"S": AGENTS_PK}, "sk": {"S": f"Agent#{agent_id}"}},
                "UpdateExpression": "SET AgentStatus = :busy, CallerId = :caller",
                "ExpressionAttributeValues": {":busy": {"S": "attendingCall"}, ":caller": {"S": caller}},
            }})
            try:
                self._db.transact_write_items(TransactItems=items)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") not in ("TransactionCanceledException", "TransactionConflictException"):
                    raise
                report.aborted += 1
                time.sleep(self._rng.uniform(0, self.retry_base_ms * 2**attempt) / 1000)
                continue
            report.matched += 1
            report.matches.append((caller, agent_id))
            return "matched"
        report.gave_up += 1
        return "gave-up"


class CallerQueue:
    """The article's SQS FIFO queue of callers, in process: each caller goes to exactly one matcher; one
    handed back goes to the end, as a message whose visibility timeout passed."""

    def __init__(self, callers: list[tuple[str, str]]) -> None:
        self._items = deque(callers)
        self._lock = threading.Lock()
        self._busy = 0
        self._idle = threading.Condition(self._lock)

    def take(self) -> tuple[str, str] | None:
        with self._lock:
            while not self._items:
                if self._busy == 0:
                    return None
                self._idle.wait(0.05)
            self._busy += 1
            return self._items.popleft()

    def done(self, caller: tuple[str, str] | None = None) -> None:
        with self._lock:
            self._busy -= 1
            if caller is not None:
                self._items.append(caller)
            self._idle.notify_all()
