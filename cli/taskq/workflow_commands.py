"""`taskq workflow create / show / cancel`: workflows, tasks that wait for other tasks (docs/workflows.md), through the
producer client (taskqueue/client/workflows.py), as the board's workflow page does."""

from __future__ import annotations

import argparse
from typing import Any

from taskq import output
from taskq.connection import CliError, Command, Printer, Target, add_options
from taskq.task_commands import _read_json_arg
from taskqueue.client import TaskQueueClient
from taskqueue.core.workflow_rules import Policy, key_of
from taskqueue.store import WorkflowTaskView
from taskqueue.workflows.views import WorkflowView

# How `show` marks a dependency whose failure does not stop the task (its policy).
POLICY_MARKS = {Policy.FAIL: "", Policy.IGNORE_FAILURE: "?", Policy.IGNORE_CANCELLED: "~", Policy.ON_FAILURE: ""}


def waits_for_text(view: WorkflowTaskView, limit: int = 6) -> str:
    """What a task waits for, by key: "b, c?" ("?": ignore-failure, "~": ignore-cancelled); "every task" for the
    workflow's on-failure task."""
    if view.on_failure:
        return f"every task ({len(view.depends_on)})"
    names = [key_of(e.dependency) + POLICY_MARKS[e.policy] for e in view.depends_on]
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "") or "-"


def task_row(view: WorkflowTaskView) -> list[str]:
    task = view.task
    note = task.last_error or ""
    return [key_of(task.task_id), task.status.value, waits_for_text(view), f"{task.attempts}/{task.max_attempts}",
            output.iso(task.updated_ms) or "-", note[:80]]


def view_dict(view: WorkflowView) -> dict[str, Any]:
    record = view.record
    return {
        "workflowId": record.workflow_id, "queue": record.queue, "state": view.state, "created": output.iso(record.created_ms),
        "deadline": output.iso(record.deadline * 1000), "tasks": record.tasks, "edges": record.edges, "counts": view.counts,
        "taskList": [
            output.task_dict(v.task) | {"key": key_of(v.task.task_id), "onFailure": v.on_failure,
                                         "dependsOn": [{"taskId": e.dependency, "key": key_of(e.dependency),
                                                        "policy": e.policy.value} for e in v.depends_on]}
            for v in view.tasks
        ],
    }


def cmd_create(t: Target, args: argparse.Namespace, say: Printer) -> int:
    body = _read_json_arg(args.input, "INPUT")
    if not isinstance(body, dict):
        raise CliError("the input must be a JSON object: a CreateTasks request with \"workflow\", or the workflow itself")
    if "workflow" not in body:  # the workflow object alone
        body = {"workflow": body}
    if args.queue is not None:
        body["queue"] = args.queue
    summary = TaskQueueClient(t.services()).create(body)
    if args.json:
        say(output.dumps(summary.as_dict()))
        return 0
    say(f"workflow {summary.workflow_id!r} on queue {summary.queue!r}: {summary.state}, {len(summary.task_ids)} task(s)"
        + (f", {summary.created} written now" if summary.created else " (it existed: nothing new was written)"))
    say(f"{summary.ready} task(s) ready now (the table's stream starts the worker for them); the others wait for "
        f"their dependencies (deadline {output.iso(summary.ttl * 1000)})")
    return 0


def cmd_show(t: Target, args: argparse.Namespace, say: Printer) -> int:
    view = TaskQueueClient(t.services()).workflow(args.workflow_id, limit=args.limit)
    if args.json:
        say(output.dumps(view_dict(view)))
        return 0
    record = view.record
    say(f"workflow {record.workflow_id!r} on queue {record.queue!r}: {view.state}; {record.tasks} task(s), "
        f"{record.edges} dependencies; created {output.iso(record.created_ms)}, deadline {output.iso(record.deadline * 1000)}")
    say("  " + ", ".join(f"{state} {count}" for state, count in sorted(view.counts.items())))
    say(output.table(["KEY", "STATE", "WAITS FOR", "ATTEMPTS", "UPDATED", "LAST ERROR"], [task_row(v) for v in view.tasks]))
    if record.tasks > len(view.tasks):
        say(f"... {record.tasks - len(view.tasks)} more (--limit)")
    say('\n"?": runs even if that dependency fails (ignore-failure); "~": runs if it was cancelled or shed '
        "(ignore-cancelled); otherwise its failure ends the task unrun")
    return 0


def cmd_cancel(t: Target, args: argparse.Namespace, say: Printer) -> int:
    cancelled = TaskQueueClient(t.services()).cancel_workflow(args.workflow_id)
    if args.json:
        say(output.dumps({"workflowId": args.workflow_id, "cancelled": cancelled}))
        return 0
    say(f"cancelled workflow {args.workflow_id!r}: {len(cancelled)} waiting or pending task(s) cancelled; a running "
        "task runs on, and nothing that waited for it will run")
    return 0


def add_parsers(command: Command) -> None:
    p = command("workflow", lambda t, a, say: a.action(t, a, say),
                "Workflows, tasks that wait for other tasks (docs/workflows.md): create, show, cancel.")
    actions = p.add_subparsers(dest="workflow_action", metavar="ACTION", required=True)

    def action(name: str, handler: Any, help_text: str) -> argparse.ArgumentParser:
        sp = actions.add_parser(name, help=help_text, description=help_text)
        add_options(sp, suppress=True)
        sp.set_defaults(action=handler)
        return sp

    sp = action("create", cmd_create, "Create a workflow, all or nothing (sending it again creates nothing new).")
    sp.add_argument("input", metavar="INPUT", help='the workflow as JSON, inline or @path: {"id", "tasks", ...}, or a '
                    'CreateTasks request with "workflow" (e.g. @events/create_tasks-workflow.json)')
    sp.add_argument("--queue", help="its queue (default: the request's, else work)")
    sp = action("show", cmd_show, "A workflow's tasks: each one's state, what it waits for, its last error.")
    sp.add_argument("workflow_id", metavar="ID")
    sp.add_argument("--limit", type=output.positive_int, default=200, help="tasks shown (default 200)")
    sp = action("cancel", cmd_cancel, "Cancel every task of a workflow that waits or is pending.")
    sp.add_argument("workflow_id", metavar="ID")
