"""What changed in the emulator, counted for the engine's pollers: a generation per kind of change, and a wait for
the next one (``GET /_local/changes``).

The engine's pollers (the stream reader, SNS delivery, one-time schedules) asked every 0.1-0.25 s whether anything
had arrived: an idle stack kept about 40 % of a core busy answering them. Only a request can give a poller
something new, and the emulator sees every request: it counts those that can, per kind, and a poller with nothing
to do waits here for the next change of its kind instead of asking again (local/delivery/change_feed.py).
"""

from __future__ import annotations

import threading
from typing import Any

from local.faults.wsgi_request import signed_scope

ITEMS, MESSAGES, SCHEDULES = "items", "messages", "schedules"
KINDS = (ITEMS, MESSAGES, SCHEDULES)

_ITEM_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems",
                          "ExecuteStatement", "BatchExecuteStatement", "ExecuteTransaction"})
_MESSAGE_SENDS = frozenset({"SendMessage", "SendMessageBatch", "ChangeMessageVisibility",
                            "ChangeMessageVisibilityBatch"})


def change_kind(environ: dict[str, Any]) -> str | None:
    """The kind of change a request may make that a poller could see, from its headers alone (no body read):
    a write of DynamoDB items (stream records), an SNS request or an SQS send (messages), a scheduler write."""
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    prefix, _, operation = target.partition(".")
    if prefix.startswith("DynamoDB") and not prefix.startswith("DynamoDBStreams"):
        return ITEMS if operation in _ITEM_WRITES else None
    if prefix.startswith("AmazonSQS"):
        return MESSAGES if operation in _MESSAGE_SENDS else None
    _, service = signed_scope(environ) or ("", "")
    if service in ("sns", "sqs"):  # the query protocol names its action in the body: any such request may send
        return MESSAGES
    if service == "scheduler" and environ.get("REQUEST_METHOD", "GET") != "GET":
        return SCHEDULES
    return None


class Changes:
    """Generations per kind: ``note`` after a request is applied, ``wait_past`` until one passes what a poller saw."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._generations = dict.fromkeys(KINDS, 0)

    def note(self, kind: str) -> None:
        with self._cond:
            self._generations[kind] += 1
            self._cond.notify_all()

    def generations(self) -> dict[str, int]:
        with self._cond:
            return dict(self._generations)

    def wait_past(self, seen: dict[str, int], timeout: float) -> dict[str, int]:
        """Block until a kind in ``seen`` is past the generation given for it, or ``timeout`` seconds; the
        generations then."""
        with self._cond:
            self._cond.wait_for(lambda: any(self._generations.get(k, 0) > g for k, g in seen.items()), timeout)
            return dict(self._generations)
