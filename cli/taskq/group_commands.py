"""`taskq groups` and `taskq group show / set / pause / resume`: fair share's groups (docs/fairness.md) as an operator
sees and steers them. The reads are the store's ``group_views`` (bounded: taskqueue/store/group_views.py); the
changes call the producer client's group methods (taskqueue/client/groups.py), as the board's group actions do."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from taskq import output
from taskq.connection import CliError, Command, Printer, Target, add_options
from taskqueue.client import TaskQueueClient
from taskqueue.core.fairness import GroupLimits
from taskqueue.store import GroupsView, GroupView


def limit_texts(view: GroupView) -> tuple[str, str, str]:
    """(concurrency, rate, paused until) as a table shows them; "(own)" marks the group's own settings, the others
    are the queue's defaults (GROUP_CONCURRENCY, GROUP_RATE_LIMIT); "-": no such limit."""
    limits: GroupLimits = view.limits

    def own(name: str, text: str) -> str:
        return f"{text} (own)" if name in view.own and text != "-" else text

    concurrency = own("concurrency", "-" if limits.concurrency is None else str(limits.concurrency))
    rate = own("rate", "-" if limits.rate is None else f"{limits.rate}/{limits.period_seconds:g}s")
    return concurrency, rate, output.iso(limits.paused_until_ms) or "-"


def waiting_text(view: GroupView) -> str:
    return str(view.waiting) if view.waiting_complete else f">={view.waiting}"


def group_dict(view: GroupView, now_ms: int) -> dict[str, Any]:
    return {
        "queue": view.queue,
        "group": view.group,
        "waiting": view.waiting,
        "waitingComplete": view.waiting_complete,
        "delayed": view.delayed,
        "running": view.running,
        "oldestWaitingMs": view.oldest_waiting_ms,
        "concurrency": view.limits.concurrency,
        "rate": None if view.limits.rate is None else {"claims": view.limits.rate, "periodSeconds": view.limits.period_seconds},
        "pausedUntil": output.iso(view.limits.paused_until_ms),
        "paused": view.paused(now_ms),
        "own": sorted(view.own),
    }


def group_rows(views: list[GroupView]) -> tuple[list[str], list[list[str]]]:
    header = ["GROUP", "WAITING", "DELAYED", "RUNNING", "OLDEST WAIT", "CONCURRENCY", "RATE", "PAUSED UNTIL"]
    rows = [[v.group, waiting_text(v), str(v.delayed), str(v.running), output.age(v.oldest_waiting_ms), *limit_texts(v)]
            for v in views]
    return header, rows


def bounds_note(view: GroupsView) -> str | None:
    """What a view that met a bound misses, in words (None: it is complete)."""
    notes = []
    if not view.ring_complete:
        notes.append("the ring held more groups than one read takes")
    if view.groups_seen > len(view.groups):
        notes.append(f"{view.groups_seen} groups seen, the {len(view.groups)} shown were counted")
    if not view.running_complete:
        notes.append("more TAKEN tasks than were read")
    if any(not g.waiting_complete for g in view.groups):
        notes.append('">=": a partition held more than the count reads')
    return "; ".join(notes) or None


def cmd_groups(t: Target, args: argparse.Namespace, say: Printer) -> int:
    queues = list(dict.fromkeys(args.queue or sorted(t.settings.queue_orders)))
    views = [t.store.group_views(queue) for queue in queues]
    if args.json:
        say(output.dumps({"groups": [
            {"queue": v.queue, "complete": v.complete, "groupsSeen": v.groups_seen,
             "groups": [group_dict(g, v.now_ms) for g in v.groups[: args.limit]]} for v in views]}))
        return 0
    for n, view in enumerate(views):
        if n:
            say("")
        say(f"queue {view.queue!r}: {len(view.groups)} group(s), noisiest first (waiting + running)")
        say(output.table(*group_rows(view.groups[: args.limit])))
        if len(view.groups) > args.limit:
            say(f"... {len(view.groups) - args.limit} more (--limit)")
        note = bounds_note(view)
        if note:
            say(f"not complete: {note}")
    say('\n"(own)": the group\'s own setting; the others are the queue\'s defaults (GROUP_CONCURRENCY, '
        "GROUP_RATE_LIMIT); `taskq group set|pause|resume GROUP` changes them")
    return 0


def _show(t: Target, args: argparse.Namespace, say: Printer, what: str | None = None) -> int:
    view = t.store.group_view(args.queue, args.group)
    if args.json:
        say(output.dumps(group_dict(view, t.clock.now_ms()) | ({"done": what} if what else {})))
        return 0
    if what:
        say(what)
    say(output.table(*group_rows([view])))
    return 0


def cmd_group_show(t: Target, args: argparse.Namespace, say: Printer) -> int:
    return _show(t, args, say)


def cmd_group_set(t: Target, args: argparse.Namespace, say: Printer) -> int:
    if args.concurrency is None and args.rate is None and not args.clear:
        raise CliError("nothing to set: give --concurrency, --rate or --clear")
    client = TaskQueueClient(t.services())
    client.set_group_limits(args.group, queue=args.queue, concurrency=args.concurrency, rate=args.rate,
                            clear=args.clear or ())
    return _show(t, args, say, f"set group {args.group!r} of queue {args.queue!r}: running workers apply it within "
                               "a few seconds")


def _until_ms(text: str) -> int:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"--until is an ISO 8601 time (e.g. 2026-11-27T15:00:00Z), got {text!r}") from None
    return int((when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp() * 1000)


def cmd_group_pause(t: Target, args: argparse.Namespace, say: Printer) -> int:
    given = [v for v in (args.seconds, args.until, args.retry_after) if v is not None]
    if len(given) != 1:
        raise CliError("say how long: one of --for SECONDS, --until TIME, --retry-after VALUE")
    client = TaskQueueClient(t.services())
    limits = client.pause_group(args.group, queue=args.queue, seconds=args.seconds,
                                until_ms=_until_ms(args.until) if args.until else None, retry_after=args.retry_after)
    return _show(t, args, say, f"paused group {args.group!r} of queue {args.queue!r} until "
                               f"{output.iso(limits.paused_until_ms)}: its tasks wait (shed only by their TTL), "
                               "the other groups go on; `taskq group resume` ends it sooner")


def cmd_group_resume(t: Target, args: argparse.Namespace, say: Printer) -> int:
    TaskQueueClient(t.services()).resume_group(args.group, queue=args.queue)  # the worker starts (a resume's mark)
    return _show(t, args, say, f"resumed group {args.group!r} of queue {args.queue!r}")


def add_parsers(command: Command) -> None:
    p = command("groups", cmd_groups, "Fair share's groups of each queue, noisiest first: waiting (a bounded count), "
                "running, oldest wait, limits (own or the queue's defaults) and pause.")
    p.add_argument("--queue", action="append", help="only this queue (repeatable; default: every configured queue)")
    p.add_argument("--limit", type=output.positive_int, default=50, help="groups shown per queue (default 50)")

    p = command("group", lambda t, a, say: a.action(t, a, say),
                "Show or steer one group: show, set (limits), pause (until a time), resume.")
    actions = p.add_subparsers(dest="group_action", metavar="ACTION", required=True)

    def action(name: str, handler: Any, help_text: str) -> argparse.ArgumentParser:
        sp = actions.add_parser(name, help=help_text, description=help_text)
        add_options(sp, suppress=True)
        sp.set_defaults(action=handler)
        sp.add_argument("group", metavar="GROUP", help='the group\'s name ("default": the tasks without one, show only)')
        sp.add_argument("--queue", default="work", help="the queue (default work)")
        return sp

    action("show", cmd_group_show, "One group's waiting, running, oldest wait, limits and pause.")
    sp = action("set", cmd_group_set, "Give a group its own limits (the others stay the queue's defaults).")
    sp.add_argument("--concurrency", type=output.positive_int, help="at most this many of its tasks running at once")
    sp.add_argument("--rate", help='at most N claims per P seconds, "N/P" (e.g. 10/1, 600/60)')
    sp.add_argument("--clear", action="append", choices=["concurrency", "rate"],
                    help="drop the group's own setting back to the queue's default (repeatable)")
    sp = action("pause", cmd_group_pause, "Claim none of a group's tasks until a time; the other groups go on.")
    sp.add_argument("--for", dest="seconds", type=float, help="seconds from now")
    sp.add_argument("--until", help="an ISO 8601 time (UTC unless it says)")
    sp.add_argument("--retry-after", help="an HTTP Retry-After value: seconds, or an HTTP date")
    sp = action("resume", cmd_group_resume, "End a group's pause now; the queue's worker starts.")
