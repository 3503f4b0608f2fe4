"""The board's actions: POSTs only, each carrying the session's CSRF token (checked by CSRFProtect before any of
these runs), each calling exactly what the matching ``taskq`` command calls — the store's operation (whose write the
table's stream hands to the queue's worker) — with the same refusals. With ``--read-only`` every one
answers 403 and changes nothing.

| board action | taskq command | store operation |
|---|---|---|
| retry (a FAILURE or CANCELLED task) | ``redrive ID`` | ``redrive`` |
| cancel / reprioritize / touch | ``cancel`` / ``reprioritize`` / ``touch`` | the same |
| pause / resume | ``pause`` / ``resume`` | ``pause`` / ``resume`` |
| purge a state (the queue's name typed to confirm) | ``purge --state`` (y/N) | ``check_purgeable``, ``purge`` |
| retry all (a queue's FAILURE/CANCELLED tasks) | ``retry-all --queue`` | ``redrive_all`` |
| retry all of a filtered list | (``redrive`` of each) | ``redrive_many`` |
| a group's limits (concurrency, rate; or back to the defaults) | ``group set`` | ``set_group_settings`` |
| pause a group for N seconds / resume it | ``group pause --for`` / ``group resume`` | ``set_group_settings``; resume: ``note_resumed`` |

After an action the browser is sent back where it came from (POST, redirect, GET) with one line saying what
happened.
"""

from __future__ import annotations

from flask import Blueprint, abort, current_app, flash, redirect, request
from flask.typing import ResponseReturnValue

from taskq.board import reads
from taskq.board.services import Board
from taskq.board.views import task_id_of, task_url
from taskqueue.client.groups import pause_until_ms, rate_of
from taskqueue.core.errors import InvalidTaskInput, TaskQueueError
from taskqueue.core.states import TaskStatus
from taskqueue.store.operator import check_purgeable

blueprint = Blueprint("actions", __name__, url_prefix="/actions")

# Tasks one "retry all" touches at most, as `taskq retry-all --limit` defaults.
RETRY_ALL_LIMIT = 1000


def board() -> Board:
    return current_app.extensions["board"]


@blueprint.before_request
def refuse_when_read_only() -> None:
    if board().read_only:
        abort(403, "This board runs with --read-only: it shows the queues and changes nothing.")


def back(default: str = "/") -> ResponseReturnValue:
    """Redirect to the form's ``next`` when it is a path on this board, else to ``default``."""
    board().counts.forget()  # the next page counts again what the action may have changed
    for seen in board().groups_seen.values():
        seen.forget()
    target = request.form.get("next", "")
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        target = default
    return redirect(target, code=303)


def done(message: str, default: str = "/") -> ResponseReturnValue:
    flash(message, "ok")
    return back(default)


def refused(exc: TaskQueueError, default: str = "/") -> ResponseReturnValue:
    flash(str(exc), "error")
    return back(default)


def _queue() -> str:
    queue = request.form.get("queue", "")
    board().target.settings.order_of(queue)  # refused with the configured queues named
    return queue


# ---- one task ----------------------------------------------------------------------------------------------------


@blueprint.post("/tasks/<task_id>/retry")
@blueprint.post("/task/retry", endpoint="retry_by_query")
def retry(task_id: str | None = None) -> ResponseReturnValue:
    task_id = task_id_of(task_id)
    page = task_url(task_id)
    try:
        task = board().store.redrive(task_id)
    except TaskQueueError as exc:
        return refused(exc, page)
    return done(f"retried {task.task_id}: now PENDING, attempts reset", page)


@blueprint.post("/tasks/<task_id>/cancel")
@blueprint.post("/task/cancel", endpoint="cancel_by_query")
def cancel(task_id: str | None = None) -> ResponseReturnValue:
    task_id = task_id_of(task_id)
    page = task_url(task_id)
    try:
        task = board().store.cancel(task_id)
    except TaskQueueError as exc:
        return refused(exc, page)
    return done(f"cancelled {task.task_id}: now {task.status}", page)


@blueprint.post("/tasks/<task_id>/reprioritize")
@blueprint.post("/task/reprioritize", endpoint="reprioritize_by_query")
def reprioritize(task_id: str | None = None) -> ResponseReturnValue:
    task_id = task_id_of(task_id)
    page = task_url(task_id)
    raw = request.form.get("priority", "").strip()
    try:
        if not raw.isdigit():
            raise InvalidTaskInput(f"priority must be a whole number from 0 to 999, got {raw!r}")
        task = board().store.reprioritize(task_id, int(raw))
    except TaskQueueError as exc:
        return refused(exc, page)
    return done(f"reprioritized {task.task_id}: now priority {task.priority}", page)


@blueprint.post("/tasks/<task_id>/touch")
@blueprint.post("/task/touch", endpoint="touch_by_query")
def touch(task_id: str | None = None) -> ResponseReturnValue:
    task_id = task_id_of(task_id)
    page = task_url(task_id)
    try:
        task = board().store.touch(task_id)
    except TaskQueueError as exc:
        return refused(exc, page)
    return done(f"touched {task.task_id}: it takes the place of a new task", page)


# ---- a queue -----------------------------------------------------------------------------------------------------


@blueprint.post("/pause")
def pause() -> ResponseReturnValue:
    try:
        queue = _queue()
        board().store.pause(queue)
    except TaskQueueError as exc:
        return refused(exc)
    return done(f"paused queue {queue!r}: workers claim nothing from it; its tasks keep their places and TTLs")


@blueprint.post("/resume")
def resume() -> ResponseReturnValue:
    try:
        queue = _queue()
        board().store.resume(queue)
    except TaskQueueError as exc:
        return refused(exc)
    return done(f"resumed queue {queue!r}: its worker starts and claims from it again")


@blueprint.post("/purge")
def purge() -> ResponseReturnValue:
    try:
        queue = _queue()
        state = check_purgeable(request.form.get("state", ""))  # TAKEN is refused before anything is asked
        if request.form.get("confirm", "").strip() != queue:
            raise InvalidTaskInput(f"purge not confirmed: type the queue's name ({queue}) to delete its {state} "
                                   "tasks; nothing was deleted")
        result = board().store.purge(queue, state)
    except TaskQueueError as exc:
        return refused(exc)
    text = f"purged {result.deleted} {state} task(s) of queue {queue!r}"
    if result.skipped:
        text += f"; skipped {result.skipped} that changed state meanwhile (claimed, redriven or cancelled)"
    return done(text)


@blueprint.post("/retry-all")
def retry_all() -> ResponseReturnValue:
    """Every FAILURE (or CANCELLED) task of a queue, or of the filtered list the form came from."""
    try:
        queue = _queue()
        status = TaskStatus(request.form.get("state", "FAILURE").upper())
        if status not in (TaskStatus.FAILURE, TaskStatus.CANCELLED):
            raise InvalidTaskInput(f"retry-all takes FAILURE or CANCELLED tasks, not {status}")
        wanted = _filter(queue, status)
        if wanted.filtering:
            redriven, skipped = board().store.redrive_many(reads.filtered_ids(board(), wanted))
        else:
            result = board().store.redrive_all(queue, status, RETRY_ALL_LIMIT)
            redriven, skipped = result.redriven, result.refused
    except (TaskQueueError, ValueError) as exc:
        return refused(exc if isinstance(exc, TaskQueueError) else InvalidTaskInput(str(exc)))
    text = f"retried {len(redriven)} {status} task(s) of queue {queue!r}: now PENDING, attempts reset"
    if skipped:
        text += f"; skipped {len(skipped)} that changed meanwhile (first: {skipped[0][1]})"
    return done(text)


def _filter(queue: str, status: TaskStatus) -> reads.TaskFilter:
    raw = request.form.get("priority", "").strip()
    if raw and not raw.isdigit():
        raise InvalidTaskInput(f"priority must be a whole number from 0 to 999, got {raw!r}")
    return reads.TaskFilter(queue, status.value, int(raw) if raw else None, request.form.get("error", "").strip(),
                            request.form.get("group", "").strip() or None)


# ---- a group (fair share) ----------------------------------------------------------------------------------------


def _group() -> str:
    return request.form.get("group", "").strip()


@blueprint.post("/group/limits")
def group_limits() -> ResponseReturnValue:
    """A group's own concurrency and rate (an empty field: unchanged; "default": back to the queue's default)."""
    page = "/groups"
    try:
        queue, group = _queue(), _group()
        raw_concurrency = request.form.get("concurrency", "").strip()
        raw_rate = request.form.get("rate", "").strip()
        clear = [name for name, raw in (("concurrency", raw_concurrency), ("rate", raw_rate)) if raw == "default"]
        if raw_concurrency not in ("", "default") and not raw_concurrency.isdigit():
            raise InvalidTaskInput(f"concurrency must be a whole number (or 'default'), got {raw_concurrency!r}")
        concurrency = int(raw_concurrency) if raw_concurrency.isdigit() else None
        rate = rate_of(raw_rate) if raw_rate not in ("", "default") else None
        if concurrency is None and rate is None and not clear:
            raise InvalidTaskInput("nothing to set: give a concurrency, a rate (N/P), or 'default'")
        limits = board().store.set_group_settings(queue, group, concurrency=concurrency, rate=rate, clear=clear)
    except TaskQueueError as exc:
        return refused(exc, page)
    rate_text = "none" if limits.rate is None else f"{limits.rate}/{limits.period_seconds:g}s"
    return done(f"group {group!r} of queue {queue!r}: concurrency {limits.concurrency or 'none'}, rate {rate_text}; "
                "running workers apply it within a few seconds", page)


@blueprint.post("/group/pause")
def group_pause() -> ResponseReturnValue:
    page = "/groups"
    try:
        queue, group = _queue(), _group()
        raw = request.form.get("seconds", "").strip()
        try:
            seconds = float(raw)
        except ValueError:
            raise InvalidTaskInput(f"pause for how many seconds? got {raw!r}") from None
        until = pause_until_ms(board().target.clock.now_ms(), seconds=seconds)
        board().store.set_group_settings(queue, group, paused_until_ms=until)
    except TaskQueueError as exc:
        return refused(exc, page)
    return done(f"paused group {group!r} of queue {queue!r} for {seconds:g} s: its tasks wait, the other groups go on",
                page)


@blueprint.post("/group/resume")
def group_resume() -> ResponseReturnValue:
    page = "/groups"
    try:
        queue, group = _queue(), _group()
        board().store.set_group_settings(queue, group, clear=["pause"])
        board().store.note_resumed(queue)  # the queue's worker starts
    except TaskQueueError as exc:
        return refused(exc, page)
    return done(f"resumed group {group!r} of queue {queue!r}", page)
