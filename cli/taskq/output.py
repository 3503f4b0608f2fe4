"""Rendering for the CLI: tasks and stats as JSON-ready dicts, and plain-text tables."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime
from typing import Any

from taskqueue.core.model import Task
from taskqueue.store import QueueStats, is_claimable


def iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def age(ms: int | None) -> str:
    """A duration for people: 45s, 3m12s, 5h02m, 2d03h."""
    if ms is None:
        return "-"
    seconds = max(0, ms // 1000)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def task_dict(task: Task) -> dict[str, Any]:
    return {
        "taskId": task.task_id,
        "queue": task.queue,
        "group": task.group,
        "status": task.status.value,
        "priority": task.priority,
        "attempts": task.attempts,
        "maxAttempts": task.max_attempts,
        "created": iso(task.created_ms),
        "updated": iso(task.updated_ms),
        "enqueued": iso(task.enqueued_ms),
        "ttl": task.ttl,
        "expires": iso(task.ttl * 1000),
        "notBefore": iso(task.not_before_ms),
        "leaseOwner": task.lease_owner,
        "leaseExpires": iso(task.lease_expires_ms),
        "lastError": task.last_error,
        "runSeconds": task.run_seconds,
        "progress": task.progress,
        "progressMessage": task.progress_message,
        "progressUpdated": iso(task.progress_updated_ms),
        # When DynamoDB TTL may remove a finished task: dead letters (FAILURE, CANCELLED) after
        # DeadLetterRetentionSeconds, the rest after RetentionSeconds. A waiting task's is its ttl (shown as expires).
        "keptUntil": iso(task.delete_at * 1000) if task.delete_at is not None and task.status.value != "PENDING" else None,
        "payload": task.payload,
        "result": task.result,
        # The producer's trace (docs/tracing.md): search X-Ray for the trace id, a tracing backend for traceparent.
        "traceparent": task.trace.traceparent if task.trace else None,
        "xrayTraceId": task.trace.xray_root if task.trace else None,
    }


def note(task: Task, now_ms: int) -> str:
    """What a listing should flag about a task: why a PENDING one is not claimable, a TAKEN one's lease."""
    if task.status.value == "PENDING" and not is_claimable(task.ttl, task.not_before_ms, now_ms):
        if task.ttl <= now_ms // 1000:
            return "expired (shed)"
        return f"delayed {age((task.not_before_ms or now_ms) - now_ms)}"
    if task.status.value == "TAKEN" and task.lease_expires_ms is not None:
        left = task.lease_expires_ms - now_ms
        return f"lease {age(left)} left" if left > 0 else "lease expired"
    if task.last_error:
        return _clip(task.last_error, 50)
    return ""


def task_rows(tasks: Iterable[Task], now_ms: int) -> tuple[list[str], list[list[str]]]:
    tasks = list(tasks)
    grouped = any(t.group is not None for t in tasks)  # a GROUP column only when a task has a group (fair share)
    header = ["TASK ID", "QUEUE", *(["GROUP"] if grouped else []), "STATE", "PRI", "TRIES", "AGE", "EXPIRES IN", "NOTE"]
    rows = [
        [
            t.task_id,
            t.queue,
            *([t.group or "-"] if grouped else []),
            t.status.value,
            str(t.priority),
            f"{t.attempts}/{t.max_attempts}",
            age(now_ms - t.created_ms),
            age(t.ttl * 1000 - now_ms) if t.ttl * 1000 > now_ms else "passed",
            note(t, now_ms),
        ]
        for t in tasks
    ]
    return header, rows


def task_detail(task: Task) -> str:
    data = task_dict(task)
    width = max(len(k) for k in data)
    lines = []
    for key, value in data.items():
        if value is None:
            continue
        text = json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)
        lines.append(f"{key:<{width}}  {text}")
    return "\n".join(lines)


def stats_dict(stats: QueueStats) -> dict[str, Any]:
    return {
        "queue": stats.queue,
        "counts": stats.counts,
        "claimable": stats.claimable,
        "delayed": stats.delayed,
        "expired": stats.expired,
        "oldestWaitingMs": stats.oldest_waiting_ms,
        "newestWaitingMs": stats.newest_waiting_ms,
        "groups": stats.groups,
    }


def stats_rows(
    all_stats: Sequence[QueueStats], shed: dict[str, float | None] | None, paused: AbstractSet[str] = frozenset()
) -> tuple[list[str], list[list[str]]]:
    """The stats table; a PAUSED column only when a queue is paused."""
    with_success = any("SUCCESS" in s.counts for s in all_stats)
    header = ["QUEUE", "PENDING", "CLAIMABLE", "DELAYED", "EXPIRED", "TAKEN", "FAILURE", "CANCELLED"]
    header += ["SUCCESS"] if with_success else []
    header += ["OLDEST WAIT", "NEWEST WAIT"] + (["SHED"] if shed is not None else [])
    header += ["PAUSED"] if paused else []
    grouped = any(s.groups for s in all_stats)  # named groups on the ring (fair share): their tasks are counted above
    header += ["GROUPS"] if grouped else []
    rows = []
    for s in all_stats:
        row = [s.queue, str(s.counts["PENDING"]), str(s.claimable), str(s.delayed), str(s.expired)]
        row += [str(s.counts[k]) for k in ("TAKEN", "FAILURE", "CANCELLED")]
        row += [str(s.counts.get("SUCCESS", "-"))] if with_success else []
        row += [age(s.oldest_waiting_ms), age(s.newest_waiting_ms)]
        if shed is not None:
            value = shed.get(s.queue)
            row.append("n/a" if value is None else str(int(value)))
        if paused:
            row.append("yes" if s.queue in paused else "no")
        if grouped:
            row.append(str(s.groups))
        rows.append(row)
    return header, rows


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip() for line in [header, *rows]]
    return "\n".join(lines)


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=False, default=str)


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def positive_int(text: str) -> int:
    """argparse type: a whole number of 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 or more")
    return value
