"""The local stack's state on disk (``python -m local up --persist DIR``): saved on stop (tables also every few
seconds while it runs), put back when a stack starts with the same DIR.

Format (plain files; delete any of them, or DIR, to start from empty):

    DIR/stack.json                          {"format": 1, "stack": ..., "saved_at": ...}
    DIR/dynamodb/<TableLogicalId>.jsonl     one item per line, in DynamoDB JSON ({"taskId": {"S": "..."}, ...};
                                            binary values base64)
    DIR/sqs/<QueueLogicalId>.jsonl          one message per line: {"Body": ..., "MessageAttributes": {...}}

Files are keyed by the template's logical ids, so they survive a change of stack name. A table's items come
back without stream records (the functions do not see them as new writes); a queue's messages come back as
new messages (new ids, receive count 0).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger("local.engine")
FORMAT = 1


def _to_json(value: Any) -> Any:
    """A boto3 low-level attribute value (bytes for B/BS) -> JSON-able."""
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    return value


def _from_json(value: Any) -> Any:
    """The inverse of ``_to_json`` for DynamoDB JSON: B and BS back to bytes."""
    if isinstance(value, dict):
        out = {}
        for key, inner in value.items():
            if key == "B" and isinstance(inner, str):
                out[key] = base64.b64decode(inner)
            elif key == "BS" and isinstance(inner, list):
                out[key] = [base64.b64decode(v) for v in inner]
            else:
                out[key] = _from_json(inner)
        return out
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def _write_lines(path: Path, rows: Iterable[Any]) -> int:
    """Write JSON lines atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    count = 0
    with tmp.open("w") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=True) + "\n")
            count += 1
    os.replace(tmp, path)
    return count


def _read_lines(path: Path) -> list[Any]:
    if not path.exists():
        return []
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number} is not a JSON line ({exc}); fix or delete the file") from None
    return rows


class StateDir:
    """One ``--persist`` directory. Also the engine's ``Seeder``: it fills each table and queue as it is made."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()
        self.path.mkdir(parents=True, exist_ok=True)
        self.restored: dict[str, int] = {}  # logical id -> items or messages put back

    def table_file(self, logical: str) -> Path:
        return self.path / "dynamodb" / f"{logical}.jsonl"

    def queue_file(self, logical: str) -> Path:
        return self.path / "sqs" / f"{logical}.jsonl"

    # ------------------------------------------------------------------ restore (the engine's Seeder)

    def seed_table(self, ddb: Any, logical: str, table: str) -> int:
        items = [_from_json(item) for item in _read_lines(self.table_file(logical))]
        for start in range(0, len(items), 25):
            requests = {table: [{"PutRequest": {"Item": item}} for item in items[start:start + 25]]}
            while requests:
                requests = ddb.batch_write_item(RequestItems=requests).get("UnprocessedItems") or {}
        self.restored[logical] = len(items)
        return len(items)

    def seed_queue(self, sqs: Any, logical: str, url: str) -> int:
        messages = _read_lines(self.queue_file(logical))
        for message in messages:
            attributes = {name: ({**a, "BinaryValue": base64.b64decode(a["BinaryValue"])} if "BinaryValue" in a else a)
                          for name, a in (message.get("MessageAttributes") or {}).items()}
            sqs.send_message(QueueUrl=url, MessageBody=message["Body"],
                             **({"MessageAttributes": attributes} if attributes else {}))
        self.restored[logical] = len(messages)
        return len(messages)

    # ------------------------------------------------------------------ save

    def save_tables(self, ddb: Any, tables: dict[str, str]) -> dict[str, int]:
        """``tables``: logical id -> table name. Every item, by Scan."""
        counts = {}
        for logical, name in tables.items():
            counts[logical] = _write_lines(self.table_file(logical), (_to_json(item) for item in _scan(ddb, name)))
        self._stamp()
        return counts

    def save_queues(self, sqs: Any, queues: dict[str, str]) -> dict[str, int]:
        """``queues``: logical id -> queue URL. Reads every visible message, then makes them visible again at
        once (their receive count goes up by one: SQS has no way to peek)."""
        counts = {}
        for logical, url in queues.items():
            messages = _drain(sqs, url)
            counts[logical] = _write_lines(self.queue_file(logical), (
                {"Body": m["Body"], "MessageAttributes": _message_attributes(m)} for m in messages))
            for start in range(0, len(messages), 10):
                sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                    for i, m in enumerate(messages[start:start + 10])])
        self._stamp()
        return counts

    def _stamp(self) -> None:
        (self.path / "stack.json").write_text(json.dumps(
            {"format": FORMAT, "saved_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}) + "\n")


def _scan(ddb: Any, table: str) -> Iterable[dict[str, Any]]:
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = ddb.scan(**kwargs)
        yield from page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while True:
        batch = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60, WaitTimeSeconds=0,
                                    MessageAttributeNames=["All"]).get("Messages", [])
        if not batch:
            return messages
        messages.extend(batch)


def _message_attributes(message: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, attribute in (message.get("MessageAttributes") or {}).items():
        kept = {k: v for k, v in attribute.items() if k in ("DataType", "StringValue", "BinaryValue")}
        if "BinaryValue" in kept:
            kept["BinaryValue"] = base64.b64encode(kept["BinaryValue"]).decode()
        out[name] = kept
    return out
