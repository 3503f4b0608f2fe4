"""What a batch of the queue table's stream asks of a worker function (the ``TaskStream`` event; pure: records in).

The template's filter hands a worker function the records that make work of its queues claimable: a task written
PENDING (an INSERT, or a MODIFY into PENDING: a release, a redrive, a lease recovery, a dependency's end), a queue
or one of its groups resumed (a resume's mark, ``store/control.py``), and tasks DynamoDB's TTL deleted while PENDING (shed, counted here). A task
in a ready partition is *named*: the worker claims it by key, strongly consistent, without waiting for the index. A
delayed one only makes its queue run (the run schedules the wake-up at its delayed head).

Records are delivered at least once and may be old (a retried batch, one held behind a long run on its shard): the
claim's condition decides (``store/claims.py``: state, partition, lease, TTL), so a stale image never claims a task
that has moved on. A record that is no task as this version writes it is skipped and counted, never failed: retrying
it would block its shard for nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from taskqueue.core.fairness import is_delayed_partition
from taskqueue.core.states import TaskStatus
from taskqueue.core.stream import TTL_PRINCIPAL
from taskqueue.store import Candidate
from taskqueue.store.control import CONTROL_PREFIX, resumed_queue
from taskqueue.store.table import candidate_of


@dataclass
class StreamBatch:
    named: dict[str, list[Candidate]] = field(default_factory=dict)  # queue -> its tasks the batch made claimable
    runs: list[str] = field(default_factory=list)  # the queues whose worker runs for this batch, in order
    shed: Counter[str] = field(default_factory=Counter)  # queue -> PENDING tasks DynamoDB's TTL deleted
    malformed: list[str] = field(default_factory=list)  # why each skipped record could not be read
    # queue -> (the creating request's id, the task's id) of the first task it names: the run's correlation ids
    first: dict[str, tuple[str | None, str]] = field(default_factory=dict)
    oldest_s: float | None = None  # the earliest ApproximateCreationDateTime of its records (epoch s)

    def run(self, queue: str) -> None:
        if queue not in self.runs:
            self.runs.append(queue)


def is_stream_batch(event: object) -> bool:
    """A DynamoDB stream batch (any of its records says so: one that cannot be read is skipped by ``read_batch``)."""
    return isinstance(event, Mapping) and isinstance(event.get("Records"), list) and any(
        isinstance(r, Mapping) and r.get("eventSource") == "aws:dynamodb" for r in event["Records"])


def read_batch(records: Iterable[Any], served: Collection[str]) -> StreamBatch:
    """The batch's meaning for the queues in ``served`` (records of other queues are left out)."""
    batch = StreamBatch()
    for n, record in enumerate(records):
        try:
            _read_record(record, served, batch)
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
            batch.malformed.append(f"Records[{n}]: {type(exc).__name__}: {exc}")
    return batch


def _read_record(record: Mapping[str, Any], served: Collection[str], batch: StreamBatch) -> None:
    ddb = record["dynamodb"]
    created = ddb.get("ApproximateCreationDateTime")
    if isinstance(created, (int, float)):
        batch.oldest_s = created if batch.oldest_s is None else min(batch.oldest_s, created)
    name = record.get("eventName")
    new, old = ddb.get("NewImage") or {}, ddb.get("OldImage") or {}
    if name == "REMOVE":
        identity = record.get("userIdentity") or {}
        if identity.get("principalId") == TTL_PRINCIPAL and _status(old) == TaskStatus.PENDING.value:
            queue = old["queue"]["S"]
            if queue in served:
                batch.shed[queue] += 1
        return
    task_id = ddb["Keys"]["taskId"]["S"]
    if not isinstance(task_id, str):
        raise ValueError(f"Keys.taskId is {task_id!r}, not a string")
    if task_id.startswith(CONTROL_PREFIX):  # a control item: a resume's mark (queue or group) starts the worker
        queue = resumed_queue(task_id)
        if name == "INSERT" and queue in served:
            batch.run(queue)
        return
    if _status(new) != TaskStatus.PENDING.value or (name == "MODIFY" and _status(old) == TaskStatus.PENDING.value):
        return  # not newly claimable (a touch, a reprioritization: the task was waiting already)
    queue = new["queue"]["S"]
    if queue not in served:
        return
    batch.run(queue)
    partition = _text(new, "readyKey")
    if "notBefore" in new or is_delayed_partition(partition):
        return  # due later: the run schedules the queue's wake-up at its delayed head
    if _text(new, "taskId") != task_id:
        raise ValueError(f"NewImage.taskId {new['taskId']['S']!r} is not the record's key {task_id!r}")
    _text(new, "readySort")
    _number(new, "ttl")
    shard = _number(new, "shard") if "shard" in new else int(partition.split("#")[1])
    batch.named.setdefault(queue, []).append(candidate_of(new, queue, shard))
    batch.first.setdefault(queue, (new.get("requestId", {}).get("S"), task_id))


def _text(image: Mapping[str, Any], field: str) -> str:
    value = image[field]["S"]
    if not isinstance(value, str):
        raise ValueError(f"NewImage.{field} is {value!r}, not a string")
    return value


def _number(image: Mapping[str, Any], field: str) -> int:
    value = image[field]["N"]
    if not isinstance(value, str) or not value.lstrip("-").isdigit():
        raise ValueError(f"NewImage.{field} is {value!r}, not a whole number")
    return int(value)


def _status(image: Mapping[str, Any]) -> str | None:
    status = image.get("taskStatus")
    return status.get("S") if isinstance(status, Mapping) else None
