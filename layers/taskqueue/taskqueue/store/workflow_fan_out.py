"""What a workflow task's end does to the tasks that wait for it (its fan-out), and a workflow's start.

A terminal write (``complete``, ``fail``, ``recover_lease``, ``cancel``, ``shed``) of a task that others wait for also
puts it in its queue's FANOUT partition of the StatusIndex (``workflow_end_attributes``: the same write, so it can
never end without that mark). Then ``workflow_ended`` applies its end to each dependent (taskqueue.core.workflow_rules:
count its slot, or block the dependent), and takes the mark off. A writer that dies in between leaves the mark: the
sweep (``finish_owed_fan_outs``, the safety net's) finds it and does the fan-out again; each of its writes is
conditional (a counted slot is not counted twice, a dependent leaves WAITING once), so a fan-out done twice, or by two
processes at once, has the effect of one.

A dependent made ready is one conditional UpdateItem (WAITING -> PENDING with its ReadyIndex entry at its place: its
priority, its readiness as its order time, its group, its shard). That MODIFY into PENDING is its worker's start: the
table's stream hands it to the queue's worker (the template's TaskStream filter), as it does a new task's INSERT.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from taskqueue.core import keys
from taskqueue.core.model import Task, encode_json, from_item
from taskqueue.core.states import TaskStatus
from taskqueue.core.workflow_rules import (
    CANCELLED_WITH_WORKFLOW,
    DEADLINE_REASON,
    ENDINGS,
    FAN_IN,
    SKIPPED_RESULT,
    CounterStep,
    OutEdge,
    Policy,
    WorkflowState,
    blocked_reason,
    counter_key,
    counter_path,
    decode_out_edges,
    edge_effect,
    fan_out_key,
    is_record_key,
    out_page_key,
    root_page_key,
)
from taskqueue.store.dynamo import ConditionLost
from taskqueue.store.table import STATUS_INDEX, AttributeValue, QueueTable, _key, retention_of

logger = logging.getLogger(__name__)

# A FANOUT mark older than this is a writer's that died (a fan-out of 10,000 edges takes seconds): the sweep redoes it.
SWEEP_AFTER_SECONDS = 120
# Dependents written at once by one fan-out (one store's pool, shared by its fan-outs).
FAN_OUT_THREADS = 8
_PARALLEL_FROM = 4  # fewer edges than this are written in the caller's thread


class WorkflowFanOut(QueueTable):
    _fan_out_pool: ThreadPoolExecutor | None = None
    # Slots of a counter node: FAN_IN everywhere (every writer of a workflow must agree); a test makes trees deep.
    counter_fan_in = FAN_IN

    # ---- the hooks of the terminal writes -------------------------------------------------------------------------

    def workflow_end_attributes(self, task: Task, status: TaskStatus, now_ms: int) -> dict[str, AttributeValue]:
        """What a terminal write of a workflow task adds: its FANOUT mark when tasks wait for it, and its retention
        counted from the workflow's ``keep_until`` at least (a dependent that runs late still reads its result)."""
        if task.workflow_id is None:
            return {}
        attributes: dict[str, AttributeValue] = {}
        if task.workflow_keep_until is not None:
            keep = max(now_ms // 1000, task.workflow_keep_until) + retention_of(self._settings, status)
            attributes["deleteAt"] = {"N": str(keep)}
        if task.dependents:
            attributes["statusKey"] = {"S": fan_out_key(task.queue, task.shard)}
            attributes["statusSort"] = {"N": str(now_ms)}
        return attributes

    def workflow_ended(self, task: Task, now_ms: int | None = None) -> None:
        """After the terminal write of ``task``: its fan-out, if tasks wait for it. Never raises: a fan-out that fails
        leaves the task's mark, and the sweep finishes it (the terminal write stands either way)."""
        if not task.dependents:
            return
        try:
            self.finish_fan_out(task.task_id, now_ms)
        except Exception:  # noqa: BLE001 - the mark stays: finish_owed_fan_outs redoes it
            logger.exception("fan-out of %s not finished; the sweep will finish it", task.task_id)

    def shed_with_fan_out(self, task_id: str, now_ms: int) -> bool:
        """``shed`` of a task others wait for (its plain write refuses one, so that none is shed without its mark):
        PENDING past its ttl -> SHED with its FANOUT mark, then its fan-out. False if it was not that any more."""
        item = self._read(task_id)
        if item is None or "wfOut" not in item or item["taskStatus"]["S"] != TaskStatus.PENDING.value:
            return False
        task = from_item(item)
        set_ = self._finished_attributes(now_ms, TaskStatus.SHED) | self.workflow_end_attributes(task, TaskStatus.SHED, now_ms)
        written = self._transition(
            task_id, TaskStatus.PENDING, TaskStatus.SHED, now_ms=now_ms, set_=set_, remove=("readyKey", "readySort", "notBefore"),
            condition="#ttl <= :nowSeconds", names={"#ttl": "ttl"}, values={":nowSeconds": {"N": str(now_ms // 1000)}},
        )
        if written is None:
            return False
        self.workflow_ended(task, now_ms)
        return True

    def fan_out_removed(self, image: Mapping[str, Any], now_ms: int | None = None) -> int:
        """A PENDING task DynamoDB's TTL deleted (its stream record's old image): its dependents follow as for a shed
        task. Raises on a refused write, so that the stream record is retried (every write here may be repeated)."""
        if "wfOut" not in image or image.get("taskStatus", {}).get("S") != TaskStatus.PENDING.value:
            return 0
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        apply = functools.partial(self._apply_edge, image["taskId"]["S"], TaskStatus.SHED, "deleted by TTL",
                                  keep_until=int(image.get("wfKeepUntil", {"N": "0"})["N"]), now_ms=now_ms)
        readied: dict[str, int] = {}
        for queue, follow in self._each(apply, self._out_edges(image)):
            if queue is not None:
                readied[queue] = readied.get(queue, 0) + 1
            if follow is not None:
                readied_after = self.finish_fan_out(follow, now_ms)
                readied[""] = readied.get("", 0) + readied_after
        return sum(readied.values())

    # ---- the fan-out -------------------------------------------------------------------------------------------

    def finish_fan_out(self, item_id: str, now_ms: int | None = None) -> int:
        """Apply the end of the task ``item_id`` (or the start of a workflow, for its record) to what waits for it,
        then take its FANOUT mark off; the tasks that waited and are PENDING now, with those its blocked dependents'
        own fan-outs readied. Safe to repeat, and to run in several processes at once."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        readied: dict[str, int] = {}
        todo = [item_id]
        while todo:
            current = todo.pop()
            item = self._read(current)
            if item is None:
                continue
            if is_record_key(current):
                results = [(item["wfQueue"]["S"], None)] * self.start_workflow(item, None)
            else:
                status = TaskStatus(item["taskStatus"]["S"])
                if status not in ENDINGS:
                    continue  # redriven (back to PENDING) since its mark was read: its next end fans out again
                apply = functools.partial(self._apply_edge, current, status, item.get("lastError", {}).get("S"),
                                          keep_until=int(item.get("wfKeepUntil", {"N": "0"})["N"]), now_ms=now_ms)
                results = self._each(apply, self._out_edges(item))
            for queue, follow in results:
                if queue is not None:
                    readied[queue] = readied.get(queue, 0) + 1
                if follow is not None:
                    todo.append(follow)
            if not is_record_key(current):
                self._unmark(item, status, now_ms)
        return sum(readied.values())

    def finish_owed_fan_outs(self, queue: str, now_ms: int | None = None, older_than_s: float = SWEEP_AFTER_SECONDS) -> int:
        """The sweep: finish the fan-outs of ``queue`` whose mark is older than ``older_than_s`` (their writer died).
        One StatusIndex query a shard, which finds nothing unless a writer died; how many were finished."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        until = now_ms - int(older_than_s * 1000)
        owed: list[str] = []
        for shard in range(self._settings.queue_shards):
            owed += [
                item["taskId"]["S"]
                for item in self._query_all(
                    IndexName=STATUS_INDEX, KeyConditionExpression="statusKey = :k AND statusSort <= :until",
                    ExpressionAttributeValues={":k": {"S": fan_out_key(queue, shard)}, ":until": {"N": str(until)}},
                    limit=1000,
                )
            ]
        for item_id in dict.fromkeys(owed):
            self.finish_fan_out(item_id, now_ms)
        return len(owed)

    def _apply_edge(
        self, source: str, outcome: TaskStatus, error: str | None, edge: OutEdge, *, keep_until: int, now_ms: int
    ) -> tuple[str | None, str | None]:
        """One dependent's share of ``source``'s end: (the queue of a task made ready, a task whose own end must fan
        out next), either None."""
        effect = edge_effect(outcome, edge.policy)
        if not effect.counts:
            assert effect.blocked_status is not None
            reason = blocked_reason(source, outcome, error)
            return None, self._end_waiting(edge.dependent, effect.blocked_status, now_ms, reason=reason, blocked_by=source)
        failures = int(effect.failed)
        for step in counter_path(edge.slot, edge.total, self.counter_fan_in):
            remaining, failures = self._count_slot(edge.dependent, step, failures, keep_until, now_ms,
                                              track_failures=edge.policy is Policy.ON_FAILURE)
            if remaining > 0:
                return None, None
        if edge.policy is Policy.ON_FAILURE and failures == 0:  # every task succeeded: nothing for it to do
            self._end_waiting(edge.dependent, TaskStatus.SUCCESS, now_ms, result=SKIPPED_RESULT)
            return None, None
        # Its readiness is now (its place in the queue's order, its ttl), not the dependency's end: a long fan-out, or
        # one the sweep finishes minutes later, readies it when it does.
        return self.ready_waiting(edge.dependent, max(now_ms, self._clock.now_ms()))

    def _count_slot(
        self, dependent: str, step: CounterStep, failures: int, keep_until: int, now_ms: int, *, track_failures: bool
    ) -> tuple[int, int]:
        """Count one slot of a counter node, once: (the node's remaining count, its failures), as the write left the
        node, or as it was if the slot had been counted already (a redone step)."""
        update = "SET #r = if_not_exists(#r, :size) - :one, deleteAt = :keep"
        values: dict[str, AttributeValue] = {
            ":size": {"N": str(step.size)}, ":one": {"N": "1"}, ":slot": {"N": str(step.slot)},
            ":slots": {"NS": [str(step.slot)]},
            ":keep": {"N": str(keep_until + self._settings.dead_letter_retention_seconds)},
        }
        names = {"#r": "remaining", "#d": "done"}
        if track_failures:
            update += ", #f = if_not_exists(#f, :zero) + :failures"
            values |= {":zero": {"N": "0"}, ":failures": {"N": str(failures)}}
            names["#f"] = "failures"
        try:
            node = self._call(
                "update_item", TableName=self._table, Key=_key(counter_key(dependent, step.node)),
                UpdateExpression=update + " ADD #d :slots", ConditionExpression="NOT contains(#d, :slot)",
                ExpressionAttributeNames=names, ExpressionAttributeValues=values, ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )["Attributes"]
        except ConditionLost as lost:
            if lost.item is None:
                raise
            node = lost.item
        return int(node["remaining"]["N"]), int(node.get("failures", {"N": "0"})["N"])

    def ready_waiting(self, task_id: str, now_ms: int, attempts: int = 3) -> tuple[str | None, str | None]:
        """WAITING -> PENDING, one conditional write: its ReadyIndex entry at its place (priority, its readiness as
        order time, group, shard) and its ttl from now. Past its workflow's deadline it is SHED instead (then fans
        out). (queue made ready, task to fan out next), either None; nothing if it no longer waits."""
        item = self._read(task_id) if attempts else None
        if item is None or item["taskStatus"]["S"] != TaskStatus.WAITING.value:
            return None, None
        task = from_item(item)
        if task.ttl <= now_ms // 1000:
            return None, self._end_waiting(task_id, TaskStatus.SHED, now_ms, reason=DEADLINE_REASON)
        ttl = now_ms // 1000 + int(item.get("ttlSeconds", {"N": str(self._settings.default_ttl_seconds)})["N"])
        ready = task.with_changes(status=TaskStatus.PENDING, enqueued_ms=now_ms, ttl=ttl, not_before_ms=None)
        set_ = {"enqueued": {"N": str(now_ms)}, "ttl": {"N": str(ttl)}} | self._ready_attributes(ready)
        written = self._transition(
            task_id, TaskStatus.WAITING, TaskStatus.PENDING, now_ms=now_ms, set_=set_, condition="#ttl > :nowSeconds",
            names={"#ttl": "ttl"}, values={":nowSeconds": {"N": str(now_ms // 1000)}},
        )
        return (task.queue, None) if written is not None else self.ready_waiting(task_id, now_ms, attempts - 1)

    def _end_waiting(
        self, task_id: str, status: TaskStatus, now_ms: int, *, reason: str | None = None,
        blocked_by: str | None = None, result: Mapping[str, Any] | None = None,
    ) -> str | None:
        """A WAITING task ends without running (blocked by a dependency, past its deadline, an on-failure task not
        needed): one conditional write, with its FANOUT mark if tasks wait for it. The task to fan out next."""
        item = self._read(task_id)
        if item is None or item["taskStatus"]["S"] != TaskStatus.WAITING.value:
            return None
        task = from_item(item)
        set_ = self._finished_attributes(now_ms, status)
        if status in (TaskStatus.FAILURE, TaskStatus.CANCELLED):
            set_ |= {"statusKey": {"S": keys.status_key(task.queue, status.value, task.shard)},
                     "statusSort": {"N": str(now_ms)}}
        if reason is not None:
            set_["lastError"] = {"S": reason}
        if blocked_by is not None:
            set_["blockedBy"] = {"S": blocked_by}
        if result is not None:
            set_["result"] = {"S": encode_json(result)}
        set_ |= self.workflow_end_attributes(task, status, now_ms)
        written = self._transition(task_id, TaskStatus.WAITING, status, now_ms=now_ms, set_=set_)
        return task_id if written is not None and task.dependents else None

    def start_workflow(self, record: Mapping[str, Any], roots: list[dict[str, Any]] | None) -> int:
        """A workflow's start, owed while its record carries its FANOUT mark: its roots (the tasks with no dependency)
        put, each only if absent, then the mark off. Put PENDING (a new task's INSERT, which the stream hands to the
        worker) while it is RUNNING; put CANCELLED once it was cancelled, so that a start racing the cancel cannot
        put a root the cancel missed. ``roots``: as its creator planned them; None: read from its root pages. How
        many were put by this call."""
        state = record.get("wfState", {}).get("S")
        if state == WorkflowState.CREATING.value or "statusKey" not in record:
            return 0  # not created yet, or started already
        planned = roots is not None
        if roots is None:
            workflow_id = record["taskId"]["S"].removeprefix("wf#")
            pages = int(record.get("wfRootPages", {"N": "0"})["N"])
            roots = [root["M"] for page in self._get_items([root_page_key(workflow_id, n) for n in range(pages)])
                     for root in page["roots"]["L"]]
        # The creator puts (PutItem, as any producer); a sweep or a cancel creates them by UpdateItem, so the safety
        # net needs no PutItem (it could overwrite any task).
        write = self._put_absent if planned else self._create_absent
        if state == WorkflowState.CANCELLED.value:
            now_ms = self._clock.now_ms()
            put = sum(self._each(write, [self._cancelled_root(root, now_ms) for root in roots]))
        else:
            tasks = [from_item(root) for root in roots]
            self.note_groups(tasks, reuse=True)  # on the ring before their tasks (store/groups.py), and again after
            put = sum(self._each(write, roots))  # type: ignore[arg-type]
            self.note_groups(tasks, reuse=True)
        try:
            self._call("update_item", TableName=self._table, Key=_key(record["taskId"]["S"]),
                       UpdateExpression="REMOVE statusKey, statusSort", ConditionExpression="attribute_exists(statusKey)")
        except ConditionLost:
            pass  # another process finished the start first
        return put

    def _cancelled_root(self, root: Mapping[str, Any], now_ms: int) -> dict[str, Any]:
        """A root as the cancel of its workflow leaves it: CANCELLED, out of the ReadyIndex, a dead letter."""
        item = {name: value for name, value in root.items() if name not in ("readyKey", "readySort", "notBefore")}
        queue, shard = item["queue"]["S"], int(item.get("shard", {"N": "0"})["N"])
        return item | self._finished_attributes(now_ms, TaskStatus.CANCELLED) | {
            "taskStatus": {"S": TaskStatus.CANCELLED.value}, "taskUpdated": {"N": str(now_ms)},
            "lastError": {"S": CANCELLED_WITH_WORKFLOW},
            "statusKey": {"S": keys.status_key(queue, TaskStatus.CANCELLED.value, shard)}, "statusSort": {"N": str(now_ms)},
        }

    def _create_absent(self, item: Mapping[str, Any]) -> int:
        """``item`` written only if no item has its key, by UpdateItem (1 if written, else 0)."""
        names = {f"#a{n}": name for n, name in enumerate(k for k in item if k != "taskId")}
        values = {f":v{n}": item[name] for n, name in enumerate(k for k in item if k != "taskId")}
        try:
            self._call("update_item", TableName=self._table, Key=_key(item["taskId"]["S"]),
                       UpdateExpression="SET " + ", ".join(f"{n} = {n.replace('#a', ':v')}" for n in names),
                       ConditionExpression="attribute_not_exists(taskId)", ExpressionAttributeNames=names,
                       ExpressionAttributeValues=values)
            return 1
        except ConditionLost:
            return 0

    def _put_absent(self, item: Mapping[str, Any]) -> int:
        try:
            self._call("put_item", TableName=self._table, Item=dict(item), ConditionExpression="attribute_not_exists(taskId)")
            return 1
        except ConditionLost:
            return 0

    def _unmark(self, item: Mapping[str, Any], status: TaskStatus, now_ms: int) -> None:
        """The fan-out is done: the task leaves the FANOUT partition (a dead letter goes to its state's partition)."""
        if item.get("statusKey", {}).get("S") != fan_out_key(item["queue"]["S"], int(item.get("shard", {"N": "0"})["N"])):
            return
        request: dict[str, Any] = {
            "TableName": self._table, "Key": _key(item["taskId"]["S"]),
            "ConditionExpression": "statusKey = :mark AND taskStatus = :status",
            "ExpressionAttributeValues": {":mark": item["statusKey"], ":status": {"S": status.value}},
        }
        if status in (TaskStatus.FAILURE, TaskStatus.CANCELLED):
            request["UpdateExpression"] = "SET statusKey = :dead, statusSort = :sort"
            dead = keys.status_key(item["queue"]["S"], status.value, int(item.get("shard", {"N": "0"})["N"]))
            request["ExpressionAttributeValues"] |= {":dead": {"S": dead}, ":sort": item["statusSort"]}
        else:
            request["UpdateExpression"] = "REMOVE statusKey, statusSort"
        try:
            self._call("update_item", **request)
        except ConditionLost:
            pass  # another process finished it first, or the task was redriven meanwhile

    # ---- plumbing -----------------------------------------------------------------------------------------------

    def _out_edges(self, item: Mapping[str, Any]) -> list[OutEdge]:
        if "wfOutEdges" in item:
            return decode_out_edges(item["wfOutEdges"]["S"])
        pages = int(item.get("wfOutPages", {"N": "0"})["N"])
        task_id = item["taskId"]["S"]
        edges: list[OutEdge] = []
        for page in self._get_items([out_page_key(task_id, n) for n in range(pages)]):
            edges += decode_out_edges(page["edges"]["S"])
        return edges

    def _read(self, item_id: str) -> dict[str, Any] | None:
        return self._call("get_item", TableName=self._table, Key=_key(item_id), ConsistentRead=True).get("Item")

    def _get_items(self, item_ids: list[str]) -> list[dict[str, Any]]:
        """Items by id, in that order (strongly consistent; 100 a request); missing ones left out."""
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(item_ids), 100):
            keys_ = [_key(i) for i in item_ids[start : start + 100]]
            for item in self._batch_get({self._table: {"Keys": keys_, "ConsistentRead": True}}):
                found[item["taskId"]["S"]] = item
        return [found[i] for i in item_ids if i in found]

    def _each(self, work: Callable[[Any], tuple[str | None, str | None]], inputs: Iterable[Any]) -> list[tuple[str | None, str | None]]:
        listed = list(inputs)
        if len(listed) < _PARALLEL_FROM:
            return [work(one) for one in listed]
        if self._fan_out_pool is None:
            self._fan_out_pool = ThreadPoolExecutor(max_workers=FAN_OUT_THREADS, thread_name_prefix="fan-out")
        return list(self._fan_out_pool.map(work, listed))
