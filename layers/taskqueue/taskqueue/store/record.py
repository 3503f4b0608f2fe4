"""Reading a queue's record (the control item ``queue#<name>``; ``taskqueue.core.record``), and the matching queue's
planner on it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from taskqueue.core.record import QueueRecord
from taskqueue.store.control import control_id
from taskqueue.store.dynamo import ConditionLost
from taskqueue.store.table import QueueTable, _key


class QueueRecords(QueueTable):
    def read_record(self, queue: str, *, consistent: bool = True) -> QueueRecord:
        """The record as it is (``consistent=False``: half the read cost, maybe a moment old)."""
        response = self._call("get_item", TableName=self._table, Key=_key(control_id(queue)), ConsistentRead=consistent)
        return record_of(response.get("Item", {}))


def record_of(item: Mapping[str, Any]) -> QueueRecord:
    def number(name: str) -> int | None:
        return int(item[name]["N"]) if name in item else None

    return QueueRecord(
        paused=bool(item.get("paused", {}).get("BOOL", False)),
        delayed_head_ms=number("delayedHead"),
        delayed_seq=number("delayedSeq") or 0,
        delayed_at_ms=number("delayedAt") or 0,
        wake_at_ms=number("wakeAt"),
        has_groups=bool(item.get("hasGroups", {}).get("BOOL", False)),
    )


# The planner's lease on a matching queue's record (``taskqueue.matching.planner``): how long a matcher that stopped
# renewing it (it died) is trusted to plan. Renewed at each pass, at least every PLANNER_RENEW_SECONDS.
PLANNER_LEASE_SECONDS = 5.0


class PlannerLeases(QueueTable):
    """The Matcher's planner on the queue's record: ``planner`` and ``plannerUntil`` (who reads and plans now), and
    ``knocks`` (how often other matchers found it planning: it passes again before it ends if that moved)."""

    def take_planner(self, queue: str, owner: str, now_ms: int) -> int | None:
        """Be the planner (none, one whose lease lapsed, or already this owner): the record's ``knocks`` as it left
        it; ``None``: another live matcher plans."""
        try:
            response = self._call(
                "update_item", TableName=self._table, Key=_key(control_id(queue)),
                UpdateExpression="SET #p = :me, #u = :until ADD #k :zero",
                ConditionExpression="attribute_not_exists(#u) OR #u <= :now OR #p = :me",
                ExpressionAttributeNames={"#p": "planner", "#u": "plannerUntil", "#k": "knocks"},
                ExpressionAttributeValues={":me": {"S": owner}, ":now": {"N": str(now_ms)}, ":zero": {"N": "0"},
                                           ":until": {"N": str(now_ms + int(PLANNER_LEASE_SECONDS * 1000))}},
                ReturnValues="ALL_NEW",
            )
        except ConditionLost:
            return None
        return int(response["Attributes"]["knocks"]["N"])

    def knock(self, queue: str) -> None:
        """Tell the live planner that work arrived after its pass may have begun (it passes again before it ends)."""
        self._call(
            "update_item", TableName=self._table, Key=_key(control_id(queue)), UpdateExpression="ADD #k :one",
            ExpressionAttributeNames={"#k": "knocks"}, ExpressionAttributeValues={":one": {"N": "1"}},
        )

    def release_planner(self, queue: str, owner: str, knocks: int) -> bool:
        """Stop planning, only if nobody knocked since the planner read ``knocks``; ``False``: pass again (or the
        lease was lost: another matcher plans now)."""
        try:
            self._call(
                "update_item", TableName=self._table, Key=_key(control_id(queue)), UpdateExpression="REMOVE #p, #u",
                ConditionExpression="#p = :me AND #k = :seen",
                ExpressionAttributeNames={"#p": "planner", "#u": "plannerUntil", "#k": "knocks"},
                ExpressionAttributeValues={":me": {"S": owner}, ":seen": {"N": str(knocks)}},
            )
        except ConditionLost:
            return False
        return True
