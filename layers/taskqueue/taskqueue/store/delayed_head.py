"""The delayed head's writes on a queue's control item (``delayedHead``, ``delayedSeq``, ``delayedAt``; the rules
and the argument are in ``taskqueue.core.delayed_head``).

``note_delayed`` is called by every writer of a delayed ReadyIndex entry *after* the entry is written; it costs one
write (two when the head is already earlier: the conditional lowering fails, then the announcement alone).
"""

from __future__ import annotations

from collections.abc import Iterable

from taskqueue.core import delayed_head
from taskqueue.core.record import QueueRecord
from taskqueue.store.control import control_id
from taskqueue.store.dynamo import ConditionLost
from taskqueue.store.record import record_of
from taskqueue.store.table import QueueTable, _key


class DelayedHeads(QueueTable):
    def note_delayed(self, queue: str, not_before_ms: int, now_ms: int | None = None) -> None:
        """A delayed entry of ``queue`` due at ``not_before_ms`` was written: lower the head to it if it is earlier,
        and announce the write (``delayedSeq`` + 1, ``delayedAt`` = now) either way."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        values = {":nb": {"N": str(not_before_ms)}, ":now": {"N": str(now_ms)}, ":one": {"N": "1"}}
        try:
            self._call(
                "update_item", TableName=self._table, Key=_key(control_id(queue)),
                UpdateExpression="SET delayedHead = :nb, delayedAt = :now ADD delayedSeq :one",
                ConditionExpression="attribute_not_exists(delayedHead) OR delayedHead > :nb",
                ExpressionAttributeValues=values,
            )
        except ConditionLost:  # the head is earlier already: announce the write, so no raise can skip this entry
            self._call(
                "update_item", TableName=self._table, Key=_key(control_id(queue)),
                UpdateExpression="SET delayedAt = :now ADD delayedSeq :one",
                ExpressionAttributeValues={":now": values[":now"], ":one": values[":one"]},
            )

    def note_delayed_tasks(self, entries: Iterable[tuple[str, int | None]], now_ms: int | None = None) -> None:
        """``note_delayed`` for the earliest not-before of each queue among ``(queue, not_before_ms)`` pairs."""
        earliest: dict[str, int] = {}
        for queue, not_before in entries:
            if not_before is not None:
                earliest[queue] = min(not_before, earliest.get(queue, not_before))
        for queue, not_before in earliest.items():
            self.note_delayed(queue, not_before, now_ms)

    def raise_delayed_head(
        self, queue: str, seen: QueueRecord, found_ms: int | None, look_started_ms: int
    ) -> QueueRecord | None:
        """Set the head to ``found_ms`` (the earliest entry a look that began at ``look_started_ms`` found; ``None``:
        none), if no delayed entry was announced since ``seen`` was read and the look came late enough for the
        index's lag. Returns the record as the write left it or, if a writer came in between, as it is now (so the
        reader's next try names the right ``delayedSeq``); ``None`` when nothing was sent (too early, or nothing to
        change)."""
        if not delayed_head.raised(seen, found_ms) or not delayed_head.may_raise(seen, look_started_ms):
            return None
        update = "REMOVE delayedHead" if found_ms is None else "SET delayedHead = :found"
        values = {} if found_ms is None else {":found": {"N": str(found_ms)}}
        if seen.delayed_seq:
            condition = "delayedSeq = :seq"
            values[":seq"] = {"N": str(seen.delayed_seq)}
        else:
            condition = "attribute_not_exists(delayedSeq)"
        try:
            response = self._call(
                "update_item", TableName=self._table, Key=_key(control_id(queue)),
                UpdateExpression=update, ConditionExpression=condition, ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **({"ExpressionAttributeValues": values} if values else {}),
            )
        except ConditionLost as lost:
            return record_of(lost.item or {})
        return record_of(response.get("Attributes", {}))

    def repair_delayed_head(self, queue: str, now_ms: int | None = None) -> int | None:
        """The safety net's check: read the delayed partitions and lower the head to the earliest entry found when
        it is not covered (a writer died between its entry and its announcement). Returns what it found."""
        found = self.next_due_ms(queue, now_ms)  # type: ignore[attr-defined]  # WorkerTransitions, joined in TaskStore
        if found is None:
            return None
        record = self.read_record(queue, consistent=False)  # type: ignore[attr-defined]  # QueueRecords
        if record.delayed_head_ms is None or record.delayed_head_ms > found:
            self.note_delayed(queue, found, now_ms)
        return found

    def set_wake_at(self, queue: str, at_ms: int, now_ms: int, *, force: bool = False) -> bool:
        """Record that the queue's scheduled wake-up fires at ``at_ms`` (``wakeAt``; taskqueue.core.wake_schedule):
        only if none is set, the one set has fired (not after ``now_ms``), or it is later, so of two stopping
        workers only the earlier head is scheduled. ``False``: an earlier (or equal) one is set already. ``force``:
        set it whatever is there (the safety net, after it found the schedule missing or later)."""
        values = {":at": {"N": str(at_ms)}}
        condition = None
        if not force:
            condition = "attribute_not_exists(wakeAt) OR wakeAt <= :now OR wakeAt > :at"
            values[":now"] = {"N": str(now_ms)}
        try:
            self._call(
                "update_item", TableName=self._table, Key=_key(control_id(queue)), UpdateExpression="SET wakeAt = :at",
                ExpressionAttributeValues=values, **({"ConditionExpression": condition} if condition else {}),
            )
        except ConditionLost:
            return False
        return True

    def clear_wake_at(self, queue: str, at_ms: int) -> None:
        """Forget ``wakeAt`` if it is still ``at_ms`` (the schedule for it could not be set): the next stop tries again."""
        try:
            self._call(
                "update_item", TableName=self._table, Key=_key(control_id(queue)), UpdateExpression="REMOVE wakeAt",
                ConditionExpression="wakeAt = :at", ExpressionAttributeValues={":at": {"N": str(at_ms)}},
            )
        except ConditionLost:
            pass
