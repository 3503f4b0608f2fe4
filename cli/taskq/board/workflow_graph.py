"""The picture of a workflow on the board (pure): its tasks as boxes in columns by depth (a task one column right of
its deepest dependency), its dependencies as arrows, each box coloured by its task's state. Rendered as SVG by
templates/workflow.html with presentation attributes only (the board's Content-Security-Policy allows no inline style).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from taskqueue.core.workflow_rules import Policy, key_of
from taskqueue.store import WorkflowTaskView

# Tasks drawn at most: past it the page lists them in its table only (a picture of 10,000 boxes helps nobody).
MAX_DRAWN = 300
BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 150, 30, 60, 14, 10
FILL = {"WAITING": "#f4f1e8", "PENDING": "#dfe8fb", "TAKEN": "#efe3fb", "SUCCESS": "#d8f0df", "FAILURE": "#fbdcd9",
        "CANCELLED": "#e5e8ef", "SHED": "#e5e8ef"}
STROKE = {"WAITING": "#b59f5b", "PENDING": "#2454c5", "TAKEN": "#6a2bb0", "SUCCESS": "#2f7d46", "FAILURE": "#b3261e",
          "CANCELLED": "#7a8294", "SHED": "#7a8294"}


@dataclass(frozen=True)
class Node:
    task_id: str
    key: str
    status: str
    x: int
    y: int
    fill: str
    stroke: str
    label: str  # the key, cut to fit its box


@dataclass(frozen=True)
class Arrow:
    x1: int
    y1: int
    x2: int
    y2: int
    dashed: bool  # a dependency whose failure does not stop the task (ignore-failure, ignore-cancelled, on-failure)


@dataclass(frozen=True)
class Picture:
    nodes: list[Node]
    arrows: list[Arrow]
    width: int
    height: int
    left_out: int  # tasks not drawn (past MAX_DRAWN)


def picture(views: Sequence[WorkflowTaskView], limit: int = MAX_DRAWN) -> Picture:
    """``views`` in the workflow's order (each after its dependencies), drawn up to ``limit``; the on-failure task's
    edges (from every task) are left out of the picture, its box is in the last column."""
    drawn = list(views)[:limit]
    depth: dict[str, int] = {}
    for view in drawn:
        parents = [depth[e.dependency] for e in view.depends_on if e.dependency in depth]
        depth[view.task.task_id] = 1 + max(parents) if parents else 0
    last = max(depth.values(), default=0)
    for view in drawn:
        if view.on_failure:
            depth[view.task.task_id] = last + 1
    rows: dict[int, int] = {}
    nodes: dict[str, Node] = {}
    for view in drawn:
        column = depth[view.task.task_id]
        row = rows.get(column, 0)
        rows[column] = row + 1
        status = view.task.status.value
        key = key_of(view.task.task_id)
        nodes[view.task.task_id] = Node(
            view.task.task_id, key, status, PAD + column * (BOX_W + GAP_X), PAD + row * (BOX_H + GAP_Y),
            FILL.get(status, "#ffffff"), STROKE.get(status, "#7a8294"), key if len(key) <= 18 else key[:17] + "…")
    arrows = [
        Arrow(nodes[e.dependency].x + BOX_W, nodes[e.dependency].y + BOX_H // 2, node.x, node.y + BOX_H // 2,
              e.policy is not Policy.FAIL)
        for view in drawn if not view.on_failure and (node := nodes[view.task.task_id])
        for e in view.depends_on if e.dependency in nodes
    ]
    columns = max(depth.values(), default=0) + 1
    width = 2 * PAD + columns * BOX_W + (columns - 1) * GAP_X
    height = 2 * PAD + max(rows.values(), default=1) * (BOX_H + GAP_Y) - GAP_Y
    return Picture(list(nodes.values()), arrows, width, height, len(views) - len(drawn))
