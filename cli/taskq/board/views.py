"""The board's pages (GET only: nothing here changes anything). Each reads through ``reads.py`` and renders."""

from __future__ import annotations

from flask import Blueprint, current_app, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from taskq.board import charts, reads
from taskq.board.services import Board
from taskqueue.core.errors import InvalidTaskInput
from taskqueue.core.fairness import DEFAULT_GROUP, validate_group
from taskqueue.core.states import TaskStatus

pages = Blueprint("pages", __name__)

PAGE_SIZES = (20, 50, 100)
# A workflow's page reads this many of its tasks (one BatchGetItem per 100), at most WORKFLOW_TASKS_MAX with ?limit=.
WORKFLOW_TASKS, WORKFLOW_TASKS_MAX = 300, 2000


def task_url(task_id: str, action: str | None = None) -> str:
    """The URL of a task's page (``action`` None) or of an action on it, for any id the CreateTasks schema allows
    (1-200 printable characters but '#'). The id is percent-encoded in the path (``/tasks/<id>``) unless the path
    cannot carry it: an id with '/' (no route of one segment matches it, and a browser merges or resolves its
    segments) or an id that is "." or ".." (a browser resolves those away, encoded or not). Those go in the query
    string (``/task?id=<id>``), which a browser passes as it is."""
    if "/" not in task_id and task_id not in (".", ".."):
        return url_for(f"actions.{action}" if action else "pages.task", task_id=task_id)
    return url_for(f"actions.{action}_by_query" if action else "pages.task_by_query", id=task_id)


def task_id_of(task_id: str | None) -> str:
    """The id from the path, or from ``?id=`` (see ``task_url``)."""
    if task_id is None:
        task_id = request.args.get("id", "")
        if not task_id:
            raise InvalidTaskInput("no task id: pass ?id=<task id>")
    return task_id


def board() -> Board:
    return current_app.extensions["board"]


def _now_ms() -> int:
    return board().target.clock.now_ms()


def _queues_context() -> dict[str, object]:
    now = _now_ms()
    rows = reads.queue_rows(board(), now)
    charts_by_queue = {
        row.queue: [
            charts.counts_chart(row.series),
            charts.timing_chart(row.series, "AgeAtClaim", "age at claim"),
            charts.timing_chart(row.series, "WaitTimeAtMatch", "wait at match"),
        ]
        for row in rows
    }
    return {"rows": rows, "charts": charts_by_queue, "now_ms": now, "states": [s.value for s in TaskStatus],
            "queue_metrics": reads.queue_metrics(board())}


@pages.get("/")
def queues() -> ResponseReturnValue:
    return render_template("queues.html", **_queues_context())


@pages.get("/fragments/queues")
def queues_fragment() -> ResponseReturnValue:
    return render_template("_queues.html", **_queues_context())


def task_filter() -> reads.TaskFilter:
    """The task list's filter from the query string; bad values are refused with the reason."""
    queue = request.args.get("queue") or None
    if queue is not None:
        board().target.settings.order_of(queue)  # an unknown queue is refused with the configured ones named
    state = (request.args.get("state") or "").upper() or None
    if state is not None and state not in TaskStatus.__members__:
        raise InvalidTaskInput(f"unknown state {state!r}; states: {', '.join(s.value for s in TaskStatus)}")
    raw_priority = (request.args.get("priority") or "").strip()
    priority = None
    if raw_priority:
        if not raw_priority.isdigit():
            raise InvalidTaskInput(f"priority must be a whole number from 0 to 999, got {raw_priority!r}")
        priority = int(raw_priority)
    group = (request.args.get("group") or "").strip() or None
    if group is not None and group != DEFAULT_GROUP:
        validate_group(group)
    return reads.TaskFilter(queue, state, priority, (request.args.get("error") or "").strip(), group)


@pages.get("/tasks")
def tasks() -> ResponseReturnValue:
    wanted = task_filter()
    limit = request.args.get("limit", type=int) or PAGE_SIZES[0]
    if limit not in PAGE_SIZES:
        limit = PAGE_SIZES[0]
    token = request.args.get("page_token") or None
    listing = reads.list_tasks(board(), wanted, limit, token)
    return render_template(
        "tasks.html", listing=listing, wanted=wanted, limit=limit, page_sizes=PAGE_SIZES, now_ms=_now_ms(),
        states=[s.value for s in TaskStatus], retryable=wanted.state in ("FAILURE", "CANCELLED"),
        filter_budget=reads.FILTER_BUDGET, not_indexed=wanted.state in reads.NOT_INDEXED,
    )


@pages.get("/search")
def search() -> ResponseReturnValue:
    text = (request.args.get("q") or "").strip()
    found = reads.search(board(), text) if text else []
    if len(found) == 1 and found[0].task_id == text:
        return redirect(task_url(text))
    return render_template("search.html", text=text, found=found, now_ms=_now_ms())


@pages.get("/tasks/<task_id>")
@pages.get("/task", endpoint="task_by_query")
def task(task_id: str | None = None) -> ResponseReturnValue:
    item = board().store.get(task_id_of(task_id))
    now = _now_ms()
    return render_template("task.html", task=item, timeline=reads.timeline(item, now), now_ms=now)


def _matching_context() -> dict[str, object]:
    now = _now_ms()
    view = reads.matching_view(board(), now)
    series = None
    if view is not None and view.queue in board().target.settings.queue_orders:
        series = board().metrics.series([view.queue], now)[view.queue]
    match_charts = [] if series is None else [
        charts.counts_chart(series), charts.timing_chart(series, "WaitTimeAtMatch", "wait at match"),
    ]
    return {"view": view, "charts": match_charts, "now_ms": now}


@pages.get("/matching")
def matching() -> ResponseReturnValue:
    return render_template("matching.html", **_matching_context())


@pages.get("/fragments/matching")
def matching_fragment() -> ResponseReturnValue:
    return render_template("_matching.html", **_matching_context())


def _groups_context() -> dict[str, object]:
    from taskq.group_commands import limit_texts, waiting_text

    return {"queue_groups": reads.queue_groups(board()), "now_ms": _now_ms(), "limit_texts": limit_texts,
            "waiting_text": waiting_text, "default_group": DEFAULT_GROUP}


@pages.get("/groups")
def groups() -> ResponseReturnValue:
    return render_template("groups.html", **_groups_context())


@pages.get("/fragments/groups")
def groups_fragment() -> ResponseReturnValue:
    return render_template("_groups.html", **_groups_context())


@pages.get("/workflow")
def workflow() -> ResponseReturnValue:
    """A workflow (``?id=``): its state, its tasks as a picture and a table, what each waits for."""
    from taskq.board.workflow_graph import picture
    from taskq.workflow_commands import waits_for_text
    from taskqueue.workflows.views import show

    workflow_id = (request.args.get("id") or "").strip()
    if not workflow_id:
        return render_template("workflow.html", view=None, workflow_id="", now_ms=_now_ms())
    limit = request.args.get("limit", type=int) or WORKFLOW_TASKS
    view = show(board().store, workflow_id, min(limit, WORKFLOW_TASKS_MAX))
    return render_template("workflow.html", view=view, workflow_id=workflow_id, picture=picture(view.tasks),
                           waits_for=waits_for_text, now_ms=_now_ms())


@pages.get("/failed-events")
def failed_events() -> ResponseReturnValue:
    if board().read_only:  # counts only: receiving a message would change it
        return render_template("failed_events.html", messages=[], counts=reads.failed_events_counts(board()))
    return render_template("failed_events.html", messages=reads.failed_events(board()), counts=None)
