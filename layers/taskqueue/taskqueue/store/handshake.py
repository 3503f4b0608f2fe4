"""The wake-up handshake's writes on a queue's control item (``queue#<name>``, the item that also holds
``paused``): ``seq`` and ``lastWrite`` (a producer's touch), ``watcher`` and ``watchUntil`` (the worker that
watches the queue), ``wakeSent`` (a wake-up in flight). The rules are in ``taskqueue.core.handshake``.

Every write is strongly consistent and returns the record as it left it, so each side decides on what the
other did last. The control item has no ``taskStatus`` or index keys: no index, listing or stream filter sees
these writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from taskqueue.core.handshake import WakeRecord
from taskqueue.store.control import control_id
from taskqueue.store.dynamo import ConditionLost
from taskqueue.store.table import AttributeValue, QueueTable, _key


class WakeRecords(QueueTable):
    def touch_wake_record(self, queue: str, now_ms: int | None = None) -> WakeRecord:
        """A producer wrote to ``queue``: move ``seq`` on, and return the record (one write, ALL_NEW)."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        self._settings.order_of(queue)
        response = self._call(
            "update_item",
            TableName=self._table,
            Key=_key(control_id(queue)),
            UpdateExpression="ADD #seq :one SET #last = :now",
            ExpressionAttributeNames={"#seq": "seq", "#last": "lastWrite"},
            ExpressionAttributeValues={":one": {"N": "1"}, ":now": {"N": str(now_ms)}},
            ReturnValues="ALL_NEW",
        )
        return wake_record_of(response["Attributes"])

    def read_wake_record(self, queue: str, *, consistent: bool = True) -> WakeRecord:
        """The record as it is (``consistent=False``: half the read cost, maybe a moment old)."""
        response = self._call(
            "get_item", TableName=self._table, Key=_key(control_id(queue)), ConsistentRead=consistent
        )
        return wake_record_of(response.get("Item", {}))

    def claim_wake(self, queue: str, now_ms: int, in_flight_ms: int) -> bool:
        """Be the one who wakes ``queue``: holds only while no worker watches it and no other wake-up is in
        flight. ``False``: another producer (or worker) got there first, or a worker watches."""
        return self._conditional(
            queue,
            "SET #sent = :now",
            "(attribute_not_exists(#sent) OR #sent <= :stale) AND (attribute_not_exists(#until) OR #until <= :now)",
            {"#sent": "wakeSent", "#until": "watchUntil"},
            {":now": _n(now_ms), ":stale": _n(now_ms - in_flight_ms)},
        ) is not None

    def withdraw_wake(self, queue: str, sent_ms: int) -> bool:
        """A claimed wake-up that could not be published: let the next producer (or Trigger) send one at once."""
        return self._conditional(queue, "REMOVE #sent", "#sent = :sent", {"#sent": "wakeSent"}, {":sent": _n(sent_ms)}) is not None

    def watch(
        self, queue: str, owner: str, until_ms: int, now_ms: int | None = None, *, index_looks: bool = False
    ) -> WakeRecord | None:
        """``owner`` watches ``queue`` until ``until_ms`` (its wake-up has arrived: ``wakeSent`` is cleared);
        ``None`` if another live worker watches it. ``index_looks``: it looks at the index itself for new work, so
        producers that find it watching (and not stopping) need not touch the record; a previous watcher's
        ``stopping`` is cleared."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        return self._conditional(
            queue,
            "SET #w = :me, #until = :until, #seq = if_not_exists(#seq, :zero), #last = if_not_exists(#last, :zero), "
            "#looks = :looks REMOVE #sent, #stopping, #reuse",
            "attribute_not_exists(#until) OR #until <= :now OR #w = :me",
            {"#w": "watcher", "#until": "watchUntil", "#seq": "seq", "#last": "lastWrite", "#sent": "wakeSent",
             "#looks": "indexLooks", "#stopping": "stopping", "#reuse": "readReuse"},
            {":me": {"S": owner}, ":until": _n(until_ms), ":now": _n(now_ms), ":zero": _n(0),
             ":looks": {"BOOL": index_looks}},
        )

    def mark_stopping(self, queue: str, owner: str, seq: int, now_ms: int) -> WakeRecord | None:
        """The first step of an index-looking watcher's stop: ``stopping`` = now, only if ``owner`` watches and nothing
        was written since it saw ``seq``; from here on producers touch the record. ``None``: the condition failed."""
        return self._conditional(
            queue, "SET #stopping = :now", "#w = :me AND #seq = :seq",
            {"#w": "watcher", "#seq": "seq", "#stopping": "stopping"},
            {":me": {"S": owner}, ":seq": _n(seq), ":now": _n(now_ms)},
        )

    def clear_stopping(self, queue: str, owner: str) -> WakeRecord | None:
        """The watcher found work after it began to stop: producers may skip their touch again."""
        return self._conditional(
            queue, "REMOVE #stopping", "#w = :me", {"#w": "watcher", "#stopping": "stopping"}, {":me": {"S": owner}}
        )

    def renew_watch(self, queue: str, owner: str, until_ms: int, *, read_reuse: bool = False) -> WakeRecord | None:
        """Move the watch on; ``None`` if ``owner`` no longer watches (its lease lapsed and another took over).

        A watch that had lapsed is revived, and a wake-up claimed meanwhile is cleared with it: producers trust the
        live watcher from here on, and a ``wakeSent`` left behind would tell them, once this watch ends, that a
        wake-up is in flight when its worker has come and gone (or is a helper here). ``read_reuse``: producers may
        reuse a read of the record from now on (``taskqueue.core.handshake.reuse_allows``; cleared when the watch ends)."""
        return self._conditional(
            queue, "SET #until = :until" + (", #reuse = :true" if read_reuse else "") + " REMOVE #sent", "#w = :me",
            {"#w": "watcher", "#until": "watchUntil", "#sent": "wakeSent"} | ({"#reuse": "readReuse"} if read_reuse else {}),
            {":me": {"S": owner}, ":until": _n(until_ms)} | ({":true": {"BOOL": True}} if read_reuse else {}),
        )

    def unwatch(self, queue: str, owner: str, seq: int | None) -> bool:
        """Stop watching ``queue`` if nothing was written since ``owner`` saw ``seq`` (``None``: whatever was
        written). ``False``: a producer touched the record since (or ``owner`` no longer watched)."""
        condition = "#w = :me" + (" AND #seq = :seq" if seq is not None else "")
        values = {":me": {"S": owner}} | ({":seq": _n(seq)} if seq is not None else {})
        names = {"#w": "watcher", "#until": "watchUntil", "#looks": "indexLooks", "#stopping": "stopping",
                 "#reuse": "readReuse"} | ({"#seq": "seq"} if seq is not None else {})
        return self._conditional(queue, "REMOVE #w, #until, #looks, #stopping, #reuse", condition, names, values) is not None

    def _conditional(
        self, queue: str, update: str, condition: str, names: Mapping[str, str], values: Mapping[str, AttributeValue]
    ) -> WakeRecord | None:
        try:
            response = self._call(
                "update_item",
                TableName=self._table,
                Key=_key(control_id(queue)),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=dict(names),
                ExpressionAttributeValues=dict(values),
                ReturnValues="ALL_NEW",
            )
        except ConditionLost:
            return None
        return wake_record_of(response.get("Attributes", {}))


def wake_record_of(item: Mapping[str, Any]) -> WakeRecord:
    def number(name: str) -> int | None:
        return int(item[name]["N"]) if name in item else None

    return WakeRecord(
        seq=number("seq") or 0,
        last_write_ms=number("lastWrite") or 0,
        watcher=item["watcher"]["S"] if "watcher" in item else None,
        watch_until_ms=number("watchUntil") or 0,
        wake_sent_ms=number("wakeSent"),
        paused=bool(item.get("paused", {}).get("BOOL", False)),
        delayed_head_ms=number("delayedHead"),
        delayed_seq=number("delayedSeq") or 0,
        delayed_at_ms=number("delayedAt") or 0,
        wake_at_ms=number("wakeAt"),
        has_groups=bool(item.get("hasGroups", {}).get("BOOL", False)),
        index_looks=bool(item.get("indexLooks", {}).get("BOOL", False)),
        stopping_ms=number("stopping"),
        read_reuse=bool(item.get("readReuse", {}).get("BOOL", False)),
    )


def _n(value: int) -> AttributeValue:
    return {"N": str(value)}
