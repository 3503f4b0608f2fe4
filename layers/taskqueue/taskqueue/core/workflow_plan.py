"""What creating a workflow writes (pure): its tasks that wait (WAITING), with their edges; its edge, member and root
pages; its record, whose one final write makes the workflow visible (docs/workflows.md, "Creation"); and its roots, the
tasks with no dependency, PENDING, put once it is visible (a new task's INSERT: the stream starts their worker).

Times: a waiting task's ``ttl`` (and its ``deleteAt``) is the workflow's deadline: past it, it is never made ready
(SHED when its last dependency ends) and DynamoDB's TTL deletes it. Once ready it is shed ``ttlSeconds`` after it
became ready, like a new task. A workflow keeps what its dependents read (finished tasks, pages, counters) until
``keep_until``: its deadline plus the longest ttl of its tasks (a task made ready at the deadline may run that late),
plus the retention of each.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from taskqueue.core import keys
from taskqueue.core.model import Task, encode_json, to_item
from taskqueue.core.settings import Settings
from taskqueue.core.states import TaskStatus
from taskqueue.core.workflow_rules import (
    InEdge,
    OutEdge,
    Policy,
    WorkflowState,
    edge_pages,
    in_page_key,
    member_page_key,
    out_page_key,
    pages_of,
    record_key,
    root_page_key,
)
from taskqueue.core.workflow_spec import WorkflowSpec

AttributeValue = dict[str, Any]
Item = dict[str, AttributeValue]
# A page of roots (their items, payloads included) stays under DynamoDB's 400 KB item limit.
ROOT_PAGE_BYTES = 300 * 1024


@dataclass(frozen=True)
class WorkflowPlan:
    workflow_id: str
    queue: str
    created_ms: int
    deadline: int  # epoch s
    keep_until: int  # epoch s
    record: Item  # written first (CREATING), then made RUNNING by the final write
    tasks: list[Item]  # the tasks that wait (WAITING), written before the final write
    pages: list[Item]  # edge pages, member pages and root pages, written before the final write
    task_ids: list[str]  # every task, each after its dependencies
    roots: list[Item]  # the tasks with no dependency (PENDING): put once the workflow is visible (its start)
    edges: int


def plan_workflow(spec: WorkflowSpec, created_ms: int, settings: Settings, request_id: str | None = None) -> WorkflowPlan:
    deadline = created_ms // 1000 + spec.deadline_seconds
    keep_until = deadline + max(t.ttl_seconds for t in spec.tasks)
    aux_delete_at = {"N": str(keep_until + settings.dead_letter_retention_seconds)}
    order = keys.Order(settings.order_of(spec.queue))
    ids = [spec.task_id(t.key) for t in spec.tasks]
    ins: dict[str, list[InEdge]] = {task_id: [] for task_id in ids}
    outs: dict[str, list[OutEdge]] = {task_id: [] for task_id in ids}
    for task, task_id in zip(spec.tasks, ids):
        named = [(spec.task_id(e.dependency), e.policy) for e in task.depends_on]
        if task.on_failure:  # every other task, in the workflow's order
            named = [(other, Policy.ON_FAILURE) for other in ids if other != task_id]
        for slot, (dependency, policy) in enumerate(named):
            ins[task_id].append(InEdge(dependency, policy))
            outs[dependency].append(OutEdge(task_id, slot, len(named), policy))
    pages: list[Item] = []
    items: list[Item] = []
    roots: list[Item] = []
    for node, (task, task_id) in enumerate(zip(spec.tasks, ids)):
        root = not ins[task_id]  # ready from the start: PENDING, shed ttlSeconds after creation like a new task
        waiting = Task(
            task_id=task_id, queue=spec.queue, status=TaskStatus.PENDING if root else TaskStatus.WAITING,
            priority=task.priority, created_ms=created_ms, updated_ms=created_ms, enqueued_ms=created_ms,
            ttl=created_ms // 1000 + task.ttl_seconds if root else deadline, max_attempts=task.max_attempts,
            shard=keys.shard_for(task_id, settings.queue_shards), payload=task.payload, request_id=request_id,
            run_seconds=task.run_seconds, group=task.group, workflow_id=spec.workflow_id, dependents=len(outs[task_id]),
            waits_for=len(ins[task_id]), workflow_keep_until=keep_until,
        )
        item = to_item(waiting, order) | {"wfNode": {"N": str(node)}, "ttlSeconds": {"N": str(task.ttl_seconds)}}
        if task.on_failure:
            item["wfOnFailure"] = {"BOOL": True}
        for name, edges, page_key in (("In", ins[task_id], in_page_key), ("Out", outs[task_id], out_page_key)):
            inline, paged = edge_pages(edges)
            if inline is not None:
                item[f"wf{name}Edges"] = {"S": inline}
            for number, text in enumerate(paged):
                pages.append({"taskId": {"S": page_key(task_id, number)}, "edges": {"S": text}, "deleteAt": aux_delete_at})
            if paged:
                item[f"wf{name}Pages"] = {"N": str(len(paged))}
        (roots if root else items).append(item)
    members = pages_of(ids)
    for number, page in enumerate(members):
        pages.append({"taskId": {"S": member_page_key(spec.workflow_id, number)}, "members": {"S": encode_json(page)},
                      "deleteAt": aux_delete_at})
    # The roots as they will be put once the workflow is visible: kept in pages, so that a sweep can put them for a
    # creator that died after its final write.
    root_pages = item_pages(roots)
    for number, page in enumerate(root_pages):
        pages.append({"taskId": {"S": root_page_key(spec.workflow_id, number)},
                      "roots": {"L": [{"M": root} for root in page]}, "deleteAt": aux_delete_at})
    record: Item = {
        "taskId": {"S": record_key(spec.workflow_id)},
        "entity": {"S": "workflow"},
        "wfState": {"S": WorkflowState.CREATING.value},
        "wfQueue": {"S": spec.queue},
        "fingerprint": {"S": spec.fingerprint},
        "taskCreated": {"N": str(created_ms)},
        "taskUpdated": {"N": str(created_ms)},
        "wfDeadline": {"N": str(deadline)},
        "wfKeepUntil": {"N": str(keep_until)},
        "wfTasks": {"N": str(len(ids))},
        "wfEdges": {"N": str(sum(len(v) for v in ins.values()))},
        "wfMemberPages": {"N": str(len(members))},
        "wfRootPages": {"N": str(len(root_pages))},
        "shard": {"N": str(keys.shard_for(record_key(spec.workflow_id), settings.queue_shards))},
        "deleteAt": aux_delete_at,
    }
    return WorkflowPlan(spec.workflow_id, spec.queue, created_ms, deadline, keep_until, record, items, pages, ids, roots,
                        int(record["wfEdges"]["N"]))


def item_pages(items: list[Item], limit: int = ROOT_PAGE_BYTES) -> list[list[Item]]:
    """``items`` in pages of about ``limit`` bytes at most (an item alone on its page may be larger: a page holds them
    as DynamoDB values, a list of maps, so it is no larger than the items themselves)."""
    pages: list[list[Item]] = []
    size = limit
    for item in items:
        length = len(json.dumps(item, separators=(",", ":")))  # at least its size as DynamoDB counts it
        if size + length > limit:
            pages.append([])
            size = 0
        pages[-1].append(item)
        size += length
    return pages
