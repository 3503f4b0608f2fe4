"""`taskq pause / resume / purge / retry-all`: operating on a whole queue."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from taskq import output
from taskq.connection import CliError, Command, Printer, Target
from taskqueue.core.states import TaskStatus
from taskqueue.store.operator import check_purgeable


def cmd_pause(t: Target, args: argparse.Namespace, say: Printer) -> int:
    queues = list(dict.fromkeys(args.queues))
    for queue in queues:
        t.store.pause(queue)
    if args.json:
        say(output.dumps({"paused": queues}))
        return 0
    for queue in queues:
        say(f"paused queue {queue!r}: workers claim nothing from it; its tasks keep their places and TTLs "
            f"(one that passes its TTL while paused is shed). `taskq resume {queue}` starts it again")
    return 0


def cmd_resume(t: Target, args: argparse.Namespace, say: Printer) -> int:
    queues = list(dict.fromkeys(args.queues))
    for queue in queues:
        t.store.resume(queue)
    if args.json:
        say(output.dumps({"resumed": queues}))
        return 0
    for queue in queues:
        say(f"resumed queue {queue!r}: its worker starts and claims from it again")
    return 0


def ask_on_terminal(question: str) -> bool:
    """Ask a yes/no question on the terminal (the question on stderr, so --json output stays clean)."""
    if not sys.stdin.isatty():
        raise CliError("purge deletes tasks and asks first, but there is no terminal to ask on: pass --yes to confirm")
    sys.stderr.write(question)
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


# Replaced in tests; taskq asks through it before deleting anything.
confirm: Callable[[str], bool] = ask_on_terminal


def cmd_purge(t: Target, args: argparse.Namespace, say: Printer) -> int:
    state = check_purgeable(args.state)  # TAKEN is refused before anything is counted or asked
    found = t.store.count(args.queue_name, state)
    if found == 0:
        return _purged(args, say, 0, 0, f"queue {args.queue_name!r} has no {state} tasks: nothing to purge")
    planned = found if args.limit is None else min(found, args.limit)
    scan = " (SUCCESS and SHED are found by a table scan)" if state in (TaskStatus.SUCCESS, TaskStatus.SHED) else ""
    if not args.yes and not confirm(
        f"delete {planned} {state} task(s) of queue {args.queue_name!r}{scan}? This cannot be undone. [y/N] "
    ):
        raise CliError("purge not confirmed: nothing deleted")
    result = t.store.purge(args.queue_name, state, args.limit)
    text = f"purged {result.deleted} {state} task(s) of queue {args.queue_name!r}"
    if result.skipped:
        text += f"; skipped {result.skipped} that changed state meanwhile (claimed, redriven or cancelled)"
    return _purged(args, say, result.deleted, result.skipped, text)


def _purged(args: argparse.Namespace, say: Printer, deleted: int, skipped: int, text: str) -> int:
    if args.json:
        say(output.dumps({"queue": args.queue_name, "state": args.state, "deleted": deleted, "skipped": skipped}))
    else:
        say(text)
    return 0


def cmd_retry_all(t: Target, args: argparse.Namespace, say: Printer) -> int:
    status = TaskStatus(args.state)
    queues = list(dict.fromkeys(args.queue or sorted(t.settings.queue_orders)))
    results = [t.store.redrive_all(queue, status, args.limit, args.ttl_seconds) for queue in queues]
    refused = [{"queue": r.queue, "taskId": i, "error": e} for r in results for i, e in r.refused]
    if args.json:
        say(output.dumps({
            "state": status.value,
            "retried": {r.queue: len(r.redriven) for r in results},
            "refused": refused,
        }))
        return 1 if refused else 0
    for result in results:
        say(f"retried {len(result.redriven)} {status} task(s) of queue {result.queue!r}: now PENDING, attempts reset")
    for item in refused:
        say(f"skipped {item['taskId']} ({item['queue']}): {item['error']}")
    return 1 if refused else 0


def add_parsers(command: Command) -> None:
    p = command("pause", cmd_pause, "Pause queues: workers and the Matcher claim nothing from them; their tasks keep their places and TTLs.")
    p.add_argument("queues", metavar="QUEUE", nargs="+")

    p = command("resume", cmd_resume, "Resume paused queues: their workers start and claim again.")
    p.add_argument("queues", metavar="QUEUE", nargs="+")

    p = command("purge", cmd_purge, "Delete a queue's tasks in one state, after a confirmation; a task that changes state meanwhile is skipped, never deleted. TAKEN tasks cannot be purged.")
    p.add_argument("queue_name", metavar="QUEUE")
    p.add_argument("--state", type=str.upper, required=True, choices=[s.value for s in TaskStatus],
                   help="the state to purge: PENDING, FAILURE, CANCELLED, SUCCESS or SHED (TAKEN is refused)")
    p.add_argument("--limit", type=output.positive_int, help="delete at most this many (default: every one)")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation (needed without a terminal)")

    p = command("retry-all", cmd_retry_all, "Return every FAILURE (or CANCELLED) task to PENDING, attempts reset, in every queue or --queue; the table's stream starts the workers.")
    p.add_argument("--state", type=str.upper, choices=["FAILURE", "CANCELLED"], default="FAILURE",
                   help="retry FAILURE (default) or CANCELLED tasks")
    p.add_argument("--queue", action="append", help="only this queue (repeatable; default: every configured queue)")
    p.add_argument("--limit", type=output.positive_int, default=1000, help="at most this many per queue (default 1000)")
    p.add_argument("--ttl-seconds", type=output.positive_int, help="new time to live (default DEFAULT_TTL_SECONDS)")
