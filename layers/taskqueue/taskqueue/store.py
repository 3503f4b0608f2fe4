"""The only module that talks to DynamoDB about tasks.

Every state change is one conditional UpdateItem that names the state it comes from; the transition is
checked against the lifecycle table before any request is sent. A write that loses its condition (another
worker claimed first, the lease passed, the task expired) is a domain outcome (``None``/``False``), never an
exception; other ``ClientError`` codes become ``StoreError`` with a message saying what to check.
"""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from taskqueue import keys
from taskqueue.clock import Clock, SystemClock
from taskqueue.errors import TaskNotFound, TaskQueueError
from taskqueue.model import Task, from_item, to_item
from taskqueue.settings import Settings
from taskqueue.states import TaskStatus, check_transition

READY_INDEX = "ReadyIndex"
STATUS_INDEX = "StatusIndex"
_BATCH_WRITE_LIMIT = 25
_MAX_BATCH_ROUNDS = 8
# How many index pages one candidate search may read past tasks that are delayed or expired.
_MAX_CANDIDATE_PAGES = 20

AttributeValue = dict[str, Any]


class StoreError(TaskQueueError):
    """DynamoDB refused a request for a reason other than a lost condition."""


@dataclass(frozen=True, order=True)
class Candidate:
    """A PENDING task as the ReadyIndex shows it: enough to decide whether to try a claim."""

    ready_sort: str
    task_id: str
    queue: str
    shard: int
    ttl: int
    not_before_ms: int | None


@dataclass(frozen=True)
class CreateResult:
    created: int
    already_existed: int


def make_client(region: str | None = None) -> Any:
    """A DynamoDB client with standard retries (throttling is retried by botocore, not by us)."""
    return boto3.client("dynamodb", region_name=region, config=Config(retries={"mode": "standard", "max_attempts": 6}))


class TaskStore:
    def __init__(self, client: Any, settings: Settings, clock: Clock | None = None) -> None:
        self._db = client
        self._settings = settings
        self._table = settings.queue_table_name
        self._clock = clock or SystemClock()

    @classmethod
    def from_settings(cls, settings: Settings, clock: Clock | None = None) -> TaskStore:
        return cls(make_client(), settings, clock)

    @property
    def settings(self) -> Settings:
        return self._settings

    # ---- creating and reading ---------------------------------------------------------------

    def put_tasks(self, tasks: Sequence[Task], *, idempotent: bool = False) -> CreateResult:
        """Write new PENDING tasks. With ``idempotent`` (caller-chosen ids), an id that exists is left alone."""
        for task in tasks:
            check_transition(TaskStatus.PENDING, task.status)
        if idempotent:
            return self._put_if_absent(tasks)
        requests = [
            {"PutRequest": {"Item": to_item(t, self._settings.order_of(t.queue))}} for t in tasks
        ]
        for start in range(0, len(requests), _BATCH_WRITE_LIMIT):
            self._batch_write(requests[start : start + _BATCH_WRITE_LIMIT])
        return CreateResult(created=len(tasks), already_existed=0)

    def _put_if_absent(self, tasks: Sequence[Task]) -> CreateResult:
        created = 0
        for task in tasks:
            try:
                self._call(
                    "put_item",
                    TableName=self._table,
                    Item=to_item(task, self._settings.order_of(task.queue)),
                    ConditionExpression="attribute_not_exists(taskId)",
                )
                created += 1
            except _ConditionLost:
                pass
        return CreateResult(created=created, already_existed=len(tasks) - created)

    def _batch_write(self, requests: list[dict[str, Any]]) -> None:
        pending = {self._table: requests}
        for round_number in range(_MAX_BATCH_ROUNDS):
            response = self._call("batch_write_item", RequestItems=pending)
            pending = response.get("UnprocessedItems") or {}
            if not pending:
                return
            # Unprocessed items mean the table is throttling: back off with jitter before the retry.
            self._clock.sleep(random.uniform(0, 0.05 * 2**round_number))
        left = sum(len(v) for v in pending.values())
        raise StoreError(f"{left} task(s) were still unprocessed after {_MAX_BATCH_ROUNDS} BatchWriteItem rounds; retry later")

    def get(self, task_id: str) -> Task:
        response = self._call("get_item", TableName=self._table, Key=_key(task_id), ConsistentRead=True)
        if "Item" not in response:
            raise TaskNotFound(f"no task {task_id!r} in table {self._table} (never created, or removed by TTL)")
        return from_item(response["Item"])

    # ---- finding work -----------------------------------------------------------------------

    def candidates(self, queue: str, limit: int, now_ms: int | None = None) -> list[Candidate]:
        """Up to ``limit`` claimable tasks of a queue in the order it serves them (across all shards).

        Tasks whose ttl has passed (DynamoDB deletes late) or whose not-before time is ahead are skipped.
        """
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        self._settings.order_of(queue)
        per_shard = (
            self._claimable_in_shard(queue, shard, now_ms) for shard in range(self._settings.queue_shards)
        )
        merged = heapq.merge(*per_shard, reverse=True)
        return [c for _, c in zip(range(limit), merged)]

    def has_claimable(self, queue: str, now_ms: int | None = None) -> bool:
        return bool(self.candidates(queue, 1, now_ms))

    def _claimable_in_shard(self, queue: str, shard: int, now_ms: int) -> Iterator[Candidate]:
        """Lazily walks one shard's ReadyIndex partition, newest key first."""
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": READY_INDEX,
            "KeyConditionExpression": "readyKey = :k",
            "ExpressionAttributeValues": {":k": {"S": keys.ready_key(queue, shard)}},
            "ScanIndexForward": False,
            "Limit": self._settings.page_size,
        }
        for _ in range(_MAX_CANDIDATE_PAGES):
            response = self._call("query", **kwargs)
            for item in response.get("Items", []):
                candidate = Candidate(
                    ready_sort=item["readySort"]["S"],
                    task_id=item["taskId"]["S"],
                    queue=queue,
                    shard=shard,
                    ttl=int(item["ttl"]["N"]),
                    not_before_ms=int(item["notBefore"]["N"]) if "notBefore" in item else None,
                )
                if is_claimable(candidate.ttl, candidate.not_before_ms, now_ms):
                    yield candidate
            if "LastEvaluatedKey" not in response:
                return
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    # ---- transitions ------------------------------------------------------------------------

    def claim(self, candidate: Candidate, owner: str, now_ms: int | None = None) -> Task | None:
        """PENDING -> TAKEN with a lease; ``None`` if someone else got it or it is no longer claimable."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        expires = now_ms + self._settings.lease_seconds * 1000
        item = self._transition(
            candidate.task_id,
            TaskStatus.PENDING,
            TaskStatus.TAKEN,
            now_ms=now_ms,
            set_={
                "leaseOwner": {"S": owner},
                "leaseExpires": {"N": str(expires)},
                "statusKey": {"S": keys.status_key(candidate.queue, TaskStatus.TAKEN.value, candidate.shard)},
                "statusSort": {"N": str(expires)},
            },
            remove=("readyKey", "readySort", "notBefore"),
            count_attempt=True,
            # DynamoDB's TTL deletes late: an expired task must be refused here, not only skipped above.
            condition="#ttl > :nowSeconds AND (attribute_not_exists(notBefore) OR notBefore <= :now)",
            names={"#ttl": "ttl"},
            values={":nowSeconds": {"N": str(now_ms // 1000)}},
        )
        return from_item(item) if item is not None else None

    def complete(self, task: Task, owner: str, result: Mapping[str, Any] | None = None, now_ms: int | None = None) -> bool:
        """TAKEN -> SUCCESS, only by the lease owner while the lease holds."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        set_ = self._finished_attributes(now_ms)
        if result is not None:
            set_["result"] = {"S": _json(result)}
        return self._owned_transition(task, owner, TaskStatus.SUCCESS, now_ms, set_, ("statusKey", "statusSort"))

    def fail(self, task: Task, owner: str, error: str, now_ms: int | None = None) -> bool:
        """TAKEN -> FAILURE (the dead-letter state), only by the lease owner while the lease holds."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        set_ = self._finished_attributes(now_ms) | {
            "lastError": {"S": error[:1000]},
            "statusKey": {"S": keys.status_key(task.queue, TaskStatus.FAILURE.value, task.shard)},
            "statusSort": {"N": str(now_ms)},
        }
        return self._owned_transition(task, owner, TaskStatus.FAILURE, now_ms, set_, ())

    def release(
        self,
        task: Task,
        owner: str,
        *,
        not_before_ms: int | None = None,
        error: str | None = None,
        refund_attempt: bool = False,
        now_ms: int | None = None,
    ) -> bool:
        """TAKEN -> PENDING at the task's old place in the order (a retry, or work handed back).

        ``refund_attempt`` gives back the attempt the claim counted, for work handed back without being
        tried (e.g. a call with no matching agent yet), so waiting never exhausts a task's attempts.
        """
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        set_ = self._ready_attributes(task)
        if not_before_ms is not None:
            set_["notBefore"] = {"N": str(not_before_ms)}
        if error is not None:
            set_["lastError"] = {"S": error[:1000]}
        if refund_attempt:
            set_["attempts"] = {"N": str(max(0, task.attempts - 1))}
        return self._owned_transition(task, owner, TaskStatus.PENDING, now_ms, set_, ("statusKey", "statusSort"))

    def completion_update(
        self, task: Task, owner: str, result: Mapping[str, Any] | None = None, now_ms: int | None = None
    ) -> dict[str, Any]:
        """The ``Update`` of a TransactWriteItems entry that completes ``task`` (TAKEN -> SUCCESS) under the
        same conditions as ``complete``, for callers that must finish a task atomically with other writes."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        set_ = self._finished_attributes(now_ms)
        if result is not None:
            set_["result"] = {"S": _json(result)}
        request = self._transition_request(
            task.task_id,
            TaskStatus.TAKEN,
            TaskStatus.SUCCESS,
            now_ms=now_ms,
            set_=set_,
            remove=("leaseOwner", "leaseExpires", "statusKey", "statusSort"),
            condition="leaseOwner = :owner AND leaseExpires > :now",
            values={":owner": {"S": owner}},
        )
        request.pop("ReturnValues")
        return request

    def expired_leases(self, queue: str, now_ms: int | None = None, limit: int = 100) -> list[str]:
        """Ids of TAKEN tasks whose lease has passed, found through the StatusIndex (no table scan)."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        found: list[str] = []
        for shard in range(self._settings.queue_shards):
            found += [
                item["taskId"]["S"]
                for item in self._query_all(
                    IndexName=STATUS_INDEX,
                    KeyConditionExpression="statusKey = :k AND statusSort <= :now",
                    ExpressionAttributeValues={
                        ":k": {"S": keys.status_key(queue, TaskStatus.TAKEN.value, shard)},
                        ":now": {"N": str(now_ms)},
                    },
                    limit=limit - len(found),
                )
            ]
        return found

    def recover_lease(self, task_id: str, retry_at_ms: int | None, now_ms: int | None = None) -> TaskStatus | None:
        """Return a TAKEN task whose lease expired to PENDING, or to FAILURE once its attempts are used up.

        The write is conditional on the lease expiry it read, so a worker that renewed or finished in the
        meantime wins. Returns the new status, or ``None`` if there was nothing to recover.
        """
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        try:
            task = self.get(task_id)
        except TaskNotFound:
            return None
        if task.status is not TaskStatus.TAKEN or task.lease_expires_ms is None or task.lease_expires_ms > now_ms:
            return None
        error = f"lease of {task.lease_owner} expired at attempt {task.attempts}"
        condition = "leaseExpires = :seenExpiry"
        values = {":seenExpiry": {"N": str(task.lease_expires_ms)}}
        if task.attempts >= task.max_attempts:
            target = TaskStatus.FAILURE
            set_ = self._finished_attributes(now_ms) | {
                "lastError": {"S": error},
                "statusKey": {"S": keys.status_key(task.queue, TaskStatus.FAILURE.value, task.shard)},
                "statusSort": {"N": str(now_ms)},
            }
            remove: tuple[str, ...] = ("leaseOwner", "leaseExpires")
        else:
            target = TaskStatus.PENDING
            set_ = self._ready_attributes(task) | {"lastError": {"S": error}}
            if retry_at_ms is not None:
                set_["notBefore"] = {"N": str(retry_at_ms)}
            remove = ("leaseOwner", "leaseExpires", "statusKey", "statusSort")
        written = self._transition(
            task_id, TaskStatus.TAKEN, target, now_ms=now_ms, set_=set_, remove=remove, condition=condition, values=values
        )
        return target if written is not None else None

    # ---- helpers ----------------------------------------------------------------------------

    def _ready_attributes(self, task: Task) -> dict[str, AttributeValue]:
        order = self._settings.order_of(task.queue)
        return {
            "readyKey": {"S": keys.ready_key(task.queue, task.shard)},
            "readySort": {"S": keys.ready_sort(task.priority, task.enqueued_ms, task.task_id, order)},
        }

    def _finished_attributes(self, now_ms: int) -> dict[str, AttributeValue]:
        # Finished tasks keep a short retention, so the table does not grow without bound.
        return {"ttl": {"N": str(now_ms // 1000 + self._settings.retention_seconds)}}

    def _owned_transition(
        self,
        task: Task,
        owner: str,
        target: TaskStatus,
        now_ms: int,
        set_: dict[str, AttributeValue],
        remove: tuple[str, ...],
    ) -> bool:
        written = self._transition(
            task.task_id,
            TaskStatus.TAKEN,
            target,
            now_ms=now_ms,
            set_=set_,
            remove=("leaseOwner", "leaseExpires", *remove),
            condition="leaseOwner = :owner AND leaseExpires > :now",
            values={":owner": {"S": owner}},
        )
        return written is not None

    def _transition(
        self,
        task_id: str,
        source: TaskStatus,
        target: TaskStatus,
        *,
        now_ms: int,
        set_: Mapping[str, AttributeValue],
        remove: Iterable[str] = (),
        count_attempt: bool = False,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, AttributeValue] | None = None,
    ) -> dict[str, Any] | None:
        """One conditional UpdateItem moving a task from ``source`` to ``target``; the new item, or None if lost."""
        request = self._transition_request(
            task_id, source, target, now_ms=now_ms, set_=set_, remove=remove, count_attempt=count_attempt,
            condition=condition, names=names, values=values,
        )
        try:
            response = self._call("update_item", **request)
        except _ConditionLost:
            return None
        return response["Attributes"]

    def _transition_request(
        self,
        task_id: str,
        source: TaskStatus,
        target: TaskStatus,
        *,
        now_ms: int,
        set_: Mapping[str, AttributeValue],
        remove: Iterable[str] = (),
        count_attempt: bool = False,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, AttributeValue] | None = None,
    ) -> dict[str, Any]:
        """The UpdateItem parameters of a transition; refuses a forbidden one before anything is sent."""
        check_transition(source, target)
        expr_names: dict[str, str] = {"#status": "taskStatus", "#updated": "taskUpdated", **(names or {})}
        expr_values: dict[str, AttributeValue] = {
            ":from": {"S": source.value},
            ":to": {"S": target.value},
            ":now": {"N": str(now_ms)},
            **(values or {}),
        }
        assignments = ["#status = :to", "#updated = :now"]
        for index, (name, value) in enumerate(set_.items()):
            expr_names[f"#s{index}"] = name
            expr_values[f":s{index}"] = value
            assignments.append(f"#s{index} = :s{index}")
        if count_attempt:
            expr_names["#attempts"] = "attempts"
            expr_values[":zero"] = {"N": "0"}
            expr_values[":one"] = {"N": "1"}
            assignments.append("#attempts = if_not_exists(#attempts, :zero) + :one")
        removals = [name for name in dict.fromkeys(remove) if name not in set_]
        for index, name in enumerate(removals):
            expr_names[f"#r{index}"] = name
        update = "SET " + ", ".join(assignments)
        if removals:
            update += " REMOVE " + ", ".join(f"#r{i}" for i in range(len(removals)))
        full_condition = "#status = :from" + (f" AND ({condition})" if condition else "")
        return {
            "TableName": self._table,
            "Key": _key(task_id),
            "UpdateExpression": update,
            "ConditionExpression": full_condition,
            "ExpressionAttributeNames": expr_names,
            "ExpressionAttributeValues": expr_values,
            "ReturnValues": "ALL_NEW",
        }

    def _query_all(self, *, limit: int, **kwargs: Any) -> Iterator[dict[str, Any]]:
        kwargs = {"TableName": self._table, **kwargs}
        seen = 0
        while seen < limit:
            response = self._call("query", **kwargs, Limit=min(100, limit - seen))
            for item in response.get("Items", []):
                seen += 1
                yield item
            if "LastEvaluatedKey" not in response:
                return
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        try:
            return getattr(self._db, operation)(**kwargs)
        except ClientError as exc:
            raise _translate(exc, self._table) from exc


class _ConditionLost(Exception):
    """Internal: a ConditionExpression did not hold (caught inside this module only)."""


def is_claimable(ttl: int, not_before_ms: int | None, now_ms: int) -> bool:
    """A task may be claimed only before its ttl (epoch s) and at or after its not-before time (epoch ms)."""
    return ttl > now_ms // 1000 and (not_before_ms is None or not_before_ms <= now_ms)


def _translate(exc: ClientError, table: str) -> Exception:
    code = exc.response.get("Error", {}).get("Code", "")
    message = exc.response.get("Error", {}).get("Message", "")
    if code == "ConditionalCheckFailedException":
        return _ConditionLost(message)
    if code == "ResourceNotFoundException":
        return StoreError(f"table {table!r} (or its index) does not exist: check QUEUE_TABLE_NAME and that the stack is deployed")
    if code in {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"}:
        return StoreError(f"DynamoDB is throttling {table!r} even after retries ({code}); the caller should retry later")
    if code == "ValidationException":
        return StoreError(f"DynamoDB rejected a request on {table!r} as invalid: {message}")
    return StoreError(f"DynamoDB error {code or 'unknown'} on {table!r}: {message}")


def _key(task_id: str) -> dict[str, AttributeValue]:
    return {"taskId": {"S": task_id}}


def _json(value: Mapping[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
