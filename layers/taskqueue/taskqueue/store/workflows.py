"""A workflow's writes and reads other than its fan-out (store/workflow_fan_out.py): its creation, all or nothing; its
cancel; the restore of the tasks a redriven dependency had blocked; and what a runner and an operator read of it.

Creation (docs/workflows.md, "Creation"): the record first (CREATING, conditional on no record of that id), then every
task (WAITING: in no index, so nothing runs) and page, each a conditional put that never overwrites, then ONE write
that makes the record RUNNING: the workflow is created. Until that write nothing of it is visible as created, and a
retry of the same request (same id, same content) finishes what a crashed one began; after it, the roots are made
ready by the record's start, which its FANOUT mark keeps owed until done (the sweep finishes it after a crash).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from taskqueue.core import keys
from taskqueue.core.errors import InvalidField, InvalidTransition, TaskNotFound
from taskqueue.core.model import Dependency, Task, from_item
from taskqueue.core.states import TaskStatus
from taskqueue.core.workflow_plan import WorkflowPlan
from taskqueue.core.workflow_rules import (
    CANCELLED_WITH_WORKFLOW,
    ENDINGS,
    InEdge,
    WorkflowState,
    blocked_reason,
    decode_in_edges,
    edge_effect,
    fan_out_key,
    in_page_key,
    key_of,
    member_page_key,
    record_key,
)
from taskqueue.store.dynamo import ConditionLost
from taskqueue.store.table import _key
from taskqueue.store.workflow_fan_out import WorkflowFanOut

# What one runner is handed of its dependencies' results and errors together; past it, results are left out (the
# dependency's ``result_omitted``): a fan-in of 10,000 results of 100 KB would not fit a Lambda's memory.
MAX_DEPENDENCY_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class WorkflowRecord:
    workflow_id: str
    queue: str
    state: WorkflowState
    fingerprint: str
    created_ms: int
    deadline: int  # epoch s
    tasks: int
    edges: int
    member_pages: int
    starting: bool  # its roots are still being made ready (its FANOUT mark is on)


@dataclass(frozen=True)
class WorkflowTaskView:
    task: Task
    depends_on: list[InEdge]
    on_failure: bool


def record_of(item: Mapping[str, Any]) -> WorkflowRecord:
    """A workflow's record as stored -> ``WorkflowRecord``."""
    return WorkflowRecord(
        workflow_id=item["taskId"]["S"].removeprefix("wf#"), queue=item["wfQueue"]["S"],
        state=WorkflowState(item["wfState"]["S"]), fingerprint=item["fingerprint"]["S"],
        created_ms=int(item["taskCreated"]["N"]), deadline=int(item["wfDeadline"]["N"]), tasks=int(item["wfTasks"]["N"]),
        edges=int(item["wfEdges"]["N"]), member_pages=int(item["wfMemberPages"]["N"]), starting="statusKey" in item,
    )


class WorkflowStore(WorkflowFanOut):
    # ---- creation ---------------------------------------------------------------------------------------------

    def begin_workflow(self, plan: WorkflowPlan) -> WorkflowRecord | None:
        """Put the workflow's record (CREATING) if it has none: None. Else the record there (the same content, or
        ``InvalidField`` on ``workflow.id``): a retry resumes a creation still CREATING with its first time."""
        try:
            self._call("put_item", TableName=self._table, Item=plan.record, ConditionExpression="attribute_not_exists(taskId)")
            return None
        except ConditionLost:
            pass
        existing = self.workflow_record(plan.workflow_id)
        if existing is None:  # deleted by TTL a moment ago (its deadline long passed): start afresh
            return self.begin_workflow(plan)
        if existing.fingerprint != plan.record["fingerprint"]["S"] or existing.queue != plan.queue:
            raise InvalidField(
                f"workflow {plan.workflow_id!r} exists (created {existing.created_ms} ms, {existing.tasks} tasks) with "
                "other content: sending a workflow again creates nothing new only when it is the same request; choose "
                "another id for another workflow", "workflow.id")
        return existing

    def write_workflow(self, plan: WorkflowPlan) -> int:
        """Every page and task of the plan, each only if absent (a retry never overwrites a task that moved on); how
        many tasks this call wrote."""
        self._each(self._put_absent, plan.pages)  # type: ignore[arg-type]
        return sum(self._each(self._put_absent, plan.tasks))  # type: ignore[arg-type]

    def commit_workflow(self, plan: WorkflowPlan, now_ms: int) -> bool:
        """The final write: CREATING -> RUNNING, with the record's FANOUT mark (its roots are owed their start).
        False if it was committed (or cancelled) already."""
        record = plan.record
        try:
            self._call(
                "update_item", TableName=self._table, Key=_key(record["taskId"]["S"]),
                UpdateExpression="SET wfState = :running, statusKey = :mark, statusSort = :now, taskUpdated = :now",
                ConditionExpression="wfState = :creating AND fingerprint = :fingerprint",
                ExpressionAttributeValues={
                    ":running": {"S": WorkflowState.RUNNING.value}, ":creating": {"S": WorkflowState.CREATING.value},
                    ":mark": {"S": fan_out_key(plan.queue, int(record["shard"]["N"]))}, ":now": {"N": str(now_ms)},
                    ":fingerprint": record["fingerprint"],
                },
            )
            return True
        except ConditionLost:
            return False

    # ---- reads ------------------------------------------------------------------------------------------------

    def workflow_record_item(self, workflow_id: str) -> dict[str, Any] | None:
        """The workflow's record as stored (strongly consistent), or None."""
        return self._read(record_key(workflow_id))

    def workflow_record(self, workflow_id: str) -> WorkflowRecord | None:
        item = self.workflow_record_item(workflow_id)
        return record_of(item) if item is not None else None


    def workflow_members(self, record: WorkflowRecord) -> list[str]:
        """The workflow's task ids, each after its dependencies."""
        ids: list[str] = []
        for page in self._get_items([member_page_key(record.workflow_id, n) for n in range(record.member_pages)]):
            ids += json.loads(page["members"]["S"])
        return ids

    def workflow_tasks(self, record: WorkflowRecord, limit: int | None = None) -> list[WorkflowTaskView]:
        """Its tasks as they are now, with what each waits for (one read per 100 tasks, and per edge page)."""
        ids = self.workflow_members(record)[:limit]
        views: list[WorkflowTaskView] = []
        for item in self._get_items(ids):
            views.append(WorkflowTaskView(from_item(item), self._in_edges(item), "wfOnFailure" in item))
        return views

    def dependencies_of(self, task: Task) -> tuple[Dependency, ...]:
        """What ``task``'s dependencies came to, in the order it named them, for its runner: each one's status, and its
        result or error, up to MAX_DEPENDENCY_BYTES together (the rest with ``result_omitted``)."""
        if not task.waits_for:
            return ()
        item = self._read(task.task_id)
        edges = self._in_edges(item) if item is not None else []
        found: dict[str, dict[str, Any]] = {}
        ids = [e.dependency for e in edges]
        for start in range(0, len(ids), 100):
            request = {"Keys": [_key(i) for i in ids[start : start + 100]], "ConsistentRead": True,
                       "ProjectionExpression": "taskId, taskStatus, #r, lastError", "ExpressionAttributeNames": {"#r": "result"}}
            for got in self._batch_get({self._table: request}):
                found[got["taskId"]["S"]] = got
        left = MAX_DEPENDENCY_BYTES
        dependencies: list[Dependency] = []
        for edge in edges:
            got = found.get(edge.dependency, {})
            result_text, error = got.get("result", {}).get("S"), got.get("lastError", {}).get("S")
            size = len(result_text or "") + len(error or "")
            omitted = size > left
            left -= 0 if omitted else size
            dependencies.append(Dependency(
                task_id=edge.dependency, key=key_of(edge.dependency),
                status=TaskStatus(got["taskStatus"]["S"]) if got else None, policy=edge.policy.value,
                result=json.loads(result_text) if result_text and not omitted else None,
                error=error if not omitted else None, result_omitted=omitted and bool(result_text or error),
            ))
        return tuple(dependencies)

    def _in_edges(self, item: Mapping[str, Any]) -> list[InEdge]:
        if "wfInEdges" in item:
            return decode_in_edges(item["wfInEdges"]["S"])
        pages = int(item.get("wfInPages", {"N": "0"})["N"])
        edges: list[InEdge] = []
        for page in self._get_items([in_page_key(item["taskId"]["S"], n) for n in range(pages)]):
            edges += decode_in_edges(page["edges"]["S"])
        return edges

    # ---- cancel and redrive ----------------------------------------------------------------------------------

    def cancel_workflow(self, workflow_id: str, now_ms: int | None = None) -> list[str]:
        """Cancel a workflow whole: its record CANCELLED (a start still owed puts its roots CANCELLED), then every task
        of it still PENDING (first, so that none is claimed meanwhile) or WAITING -> CANCELLED, its on-failure task
        included. The ids cancelled. A running task runs on; whatever waited for it is cancelled already."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        record = self.workflow_record(workflow_id)
        if record is None or record.state is WorkflowState.CREATING:
            raise TaskNotFound(f"no workflow {workflow_id!r} (never created, its creation did not finish, or removed "
                               "by TTL)")
        cancelled = self._call(
            "update_item", TableName=self._table, Key=_key(record_key(workflow_id)),
            UpdateExpression="SET wfState = :cancelled, taskUpdated = :now",
            ExpressionAttributeValues={":cancelled": {"S": WorkflowState.CANCELLED.value}, ":now": {"N": str(now_ms)}},
            ReturnValues="ALL_NEW",
        )["Attributes"]
        self.start_workflow(cancelled, None)  # a start still owed puts its roots CANCELLED (none can run)
        tasks = [from_item(item) for item in self._get_items(self.workflow_members(record))]
        order = [t for t in tasks if t.status is TaskStatus.PENDING] + [t for t in tasks if t.status is TaskStatus.WAITING]
        return [t.task_id for t in order if self._cancel_member(t, now_ms)]

    def _cancel_member(self, task: Task, now_ms: int) -> bool:
        for _ in range(3):  # a root made ready meanwhile is cancelled as PENDING
            if task.status not in (TaskStatus.PENDING, TaskStatus.WAITING):
                return False
            set_ = self._finished_attributes(now_ms, TaskStatus.CANCELLED) | {
                "lastError": {"S": CANCELLED_WITH_WORKFLOW},
                "statusKey": {"S": keys.status_key(task.queue, TaskStatus.CANCELLED.value, task.shard)},
                "statusSort": {"N": str(now_ms)},
            }
            written = self._transition(task.task_id, task.status, TaskStatus.CANCELLED, now_ms=now_ms, set_=set_,
                                       remove=("readyKey", "readySort", "notBefore"))
            if written is not None:
                return True
            task = self.get(task.task_id)
        return False

    def refuse_blocked_redrive(self, task: Task) -> None:
        """A task that ended unrun because a dependency ended is not redriven itself: its dependency is."""
        if task.blocked_by is not None:
            raise InvalidTransition(
                f"cannot redrive task {task.task_id!r}: it did not run because its dependency {task.blocked_by!r} "
                f"ended first ({task.last_error}); redrive {task.blocked_by!r}, and this task waits for it again")

    def restore_blocked(self, source: Task, now_ms: int) -> list[str]:
        """Before ``source`` is redriven: the tasks its end blocked, and theirs after them, wait again (FAILURE or
        CANCELLED -> WAITING), each unless another of its dependencies blocks it still (it then names that one). In
        the workflow's order, so a task's dependencies are restored before it is looked at. The ids restored."""
        blocked: dict[str, dict[str, Any]] = {}
        frontier = [source.task_id]
        while frontier:
            item = self._read(frontier.pop())
            for edge in self._out_edges(item) if item is not None else []:
                got = self._read(edge.dependent) if edge.dependent not in blocked else None
                if got is not None and got.get("blockedBy", {}).get("S") == item["taskId"]["S"] and \
                        got["taskStatus"]["S"] in (TaskStatus.FAILURE.value, TaskStatus.CANCELLED.value):
                    blocked[edge.dependent] = got
                    frontier.append(edge.dependent)
        restored: list[str] = [source.task_id]
        for task_id, item in sorted(blocked.items(), key=lambda pair: int(pair[1]["wfNode"]["N"])):
            blocker = item["blockedBy"]["S"]
            if blocker not in restored:
                continue  # its blocker stays ended: so does it
            status = TaskStatus(item["taskStatus"]["S"])
            other = self._still_blocking(item, blocker)
            if other is not None:  # it stays ended, now for that one (a plain update: its state does not change)
                dependency, outcome, error = other
                try:
                    self._call(
                        "update_item", TableName=self._table, Key=_key(task_id),
                        UpdateExpression="SET blockedBy = :by, lastError = :why",
                        ConditionExpression="taskStatus = :status AND blockedBy = :was",
                        ExpressionAttributeValues={":by": {"S": dependency}, ":was": {"S": blocker}, ":status": {"S": status.value},
                                                   ":why": {"S": blocked_reason(dependency, outcome, error)}},
                    )
                except ConditionLost:
                    pass
                continue
            written = self._transition(
                task_id, status, TaskStatus.WAITING, now_ms=now_ms, set_={"deleteAt": item["ttl"]},
                remove=("blockedBy", "lastError", "statusKey", "statusSort"), condition="blockedBy = :was",
                values={":was": {"S": blocker}},
            )
            if written is not None:
                restored.append(task_id)
        return restored[1:]

    def _still_blocking(self, item: Mapping[str, Any], blocker: str) -> tuple[str, TaskStatus, str | None] | None:
        """Another dependency of the task ``item`` that ended in a way its policy does not let it run after."""
        edges = [e for e in self._in_edges(item) if e.dependency != blocker]
        states = {got["taskId"]["S"]: got for got in self._get_items([e.dependency for e in edges])}
        for edge in edges:
            got = states.get(edge.dependency)
            status = TaskStatus(got["taskStatus"]["S"]) if got is not None else TaskStatus.SHED
            if status in ENDINGS and not edge_effect(status, edge.policy).counts:
                return edge.dependency, status, (got or {}).get("lastError", {}).get("S")
        return None
