"""`taskq watch`: a live view of every queue, refreshed in place.

Each refresh takes a ``Sample`` (the store's stats, whether the queue is paused, and the TAKEN tasks it lists)
and ``refresh`` turns the previous and the current sample into the rows shown: a pure function, so what the
view says is tested without a table or a clock.

- Depth by state: PENDING (claimable / delayed), TAKEN, FAILURE, CANCELLED, and SUCCESS when counted.
- Throughput: tasks finished (SUCCESS + FAILURE) per second between two refreshes. SUCCESS is not indexed, so
  counting it is a filtered COUNT scan of the table per refresh: cheap locally, a full read on a big table
  (``--no-success`` skips it; throughput is then not shown).
- Age at claim: for the claims first seen at this refresh (TAKEN tasks not TAKEN at the previous one), the
  time from creation to claim (the claim writes ``taskUpdated``), as the worker's AgeAtClaim metric measures it.
  Claims that start and finish between two refreshes are not seen: it is a sample, not every claim.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from taskq import output
from taskq.connection import Command, Printer, Target
from taskqueue.core.states import TaskStatus

CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear the screen: the view is redrawn in place on a terminal
_TAKEN_SAMPLE = 100  # TAKEN tasks read per queue and refresh (a StatusIndex query and a BatchGetItem)


@dataclass(frozen=True)
class QueueSample:
    """One queue at one refresh. ``claims``: TAKEN task id -> its age at claim (ms)."""

    queue: str
    counts: Mapping[str, int]
    claimable: int
    delayed: int
    paused: bool
    claims: Mapping[str, int] = field(default_factory=dict)

    @property
    def finished(self) -> int | None:
        """SUCCESS + FAILURE, or None when SUCCESS was not counted."""
        if TaskStatus.SUCCESS.value not in self.counts:
            return None
        return self.counts[TaskStatus.SUCCESS.value] + self.counts.get(TaskStatus.FAILURE.value, 0)


@dataclass(frozen=True)
class Sample:
    at_ms: int
    queues: Sequence[QueueSample]


@dataclass(frozen=True)
class QueueView:
    """One row of the view."""

    queue: str
    counts: Mapping[str, int]
    claimable: int
    delayed: int
    paused: bool
    finished_per_second: float | None  # None on the first refresh, or without a SUCCESS count
    new_claims: int
    age_at_claim_p50_ms: int | None
    age_at_claim_max_ms: int | None


def refresh(previous: Sample | None, current: Sample) -> list[QueueView]:
    """The rows of the view at ``current``, given the sample before it (None at the first refresh)."""
    before = {q.queue: q for q in previous.queues} if previous else {}
    elapsed_s = (current.at_ms - previous.at_ms) / 1000 if previous else 0.0
    views = []
    for q in current.queues:
        old = before.get(q.queue)
        rate = None
        if old is not None and elapsed_s > 0 and q.finished is not None and old.finished is not None:
            # Finished tasks leave only by TTL (after the retention) or by redrive/purge: never count those as negative.
            rate = max(0, q.finished - old.finished) / elapsed_s
        fresh = [age for task_id, age in q.claims.items() if old is None or task_id not in old.claims]
        views.append(QueueView(
            queue=q.queue,
            counts=q.counts,
            claimable=q.claimable,
            delayed=q.delayed,
            paused=q.paused,
            finished_per_second=rate,
            new_claims=len(fresh),
            age_at_claim_p50_ms=int(statistics.median(fresh)) if fresh else None,
            age_at_claim_max_ms=max(fresh) if fresh else None,
        ))
    return views


def render(views: Sequence[QueueView], at_ms: int, where: str, interval: float) -> str:
    """The view as text: a title line, then one row per queue."""
    with_success = any(TaskStatus.SUCCESS.value in v.counts for v in views)
    header = ["QUEUE", "PENDING", "CLAIMABLE", "DELAYED", "TAKEN", "FAILURE", "CANCELLED"]
    header += ["SUCCESS", "DONE/S"] if with_success else []
    header += ["CLAIMS", "AGE AT CLAIM p50/max", "PAUSED"]
    rows = []
    for v in views:
        row = [v.queue, str(v.counts.get("PENDING", 0)), str(v.claimable), str(v.delayed)]
        row += [str(v.counts.get(s, 0)) for s in ("TAKEN", "FAILURE", "CANCELLED")]
        if with_success:
            row += [str(v.counts.get("SUCCESS", "-")),
                    "-" if v.finished_per_second is None else f"{v.finished_per_second:.1f}"]
        age = "-" if v.age_at_claim_p50_ms is None else (
            f"{output.age(v.age_at_claim_p50_ms)}/{output.age(v.age_at_claim_max_ms)}")
        row += [str(v.new_claims), age, "yes" if v.paused else "no"]
        rows.append(row)
    title = f"taskq watch: {where}, every {interval:g}s, {output.iso(at_ms)} (Ctrl-C to stop)"
    return title + "\n\n" + output.table(header, rows)


def view_dict(v: QueueView) -> dict[str, object]:
    return {
        "queue": v.queue,
        "counts": dict(v.counts),
        "claimable": v.claimable,
        "delayed": v.delayed,
        "paused": v.paused,
        "finishedPerSecond": v.finished_per_second,
        "newClaims": v.new_claims,
        "ageAtClaimP50Ms": v.age_at_claim_p50_ms,
        "ageAtClaimMaxMs": v.age_at_claim_max_ms,
    }


def take_sample(t: Target, queues: Sequence[str] | None, with_success: bool) -> Sample:
    now_ms = t.clock.now_ms()
    samples = []
    for stats in t.store.stats(queues, include_success=with_success, now_ms=now_ms):
        taken = t.store.list_tasks(stats.queue, TaskStatus.TAKEN, _TAKEN_SAMPLE).tasks
        samples.append(QueueSample(
            queue=stats.queue,
            counts=stats.counts,
            claimable=stats.claimable,
            delayed=stats.delayed,
            paused=t.store.is_paused(stats.queue),
            claims={task.task_id: max(0, task.updated_ms - task.created_ms) for task in taken},
        ))
    return Sample(at_ms=now_ms, queues=samples)


# Replaced in tests (the refreshes of `--count N` then run without waiting).
sleep: Callable[[float], None] = time.sleep


def watch(
    sample: Callable[[], Sample],
    show: Callable[[Sequence[QueueView], Sample], None],
    interval: float,
    count: int | None,
) -> int:
    """Sample, show, wait ``interval``; ``count`` refreshes (None: until Ctrl-C, which ends cleanly)."""
    previous: Sample | None = None
    done = 0
    try:
        while True:
            current = sample()
            show(refresh(previous, current), current)
            previous, done = current, done + 1
            if count is not None and done >= count:
                return 0
            sleep(interval)
    except KeyboardInterrupt:
        return 0


def cmd_watch(t: Target, args: argparse.Namespace, say: Printer) -> int:
    stack = t.connection.stack
    where = f"{stack.name} ({'local' if stack.local else 'AWS'})" if stack else t.settings.queue_table_name
    in_place = not args.json and sys.stdout.isatty()

    def show(views: Sequence[QueueView], current: Sample) -> None:
        if args.json:
            # One line per refresh (JSON lines), so a reader can follow the stream.
            say(json.dumps({"at": output.iso(current.at_ms), "queues": [view_dict(v) for v in views]}))
            return
        text = render(views, current.at_ms, where, args.interval)
        say(CLEAR + text if in_place else text + "\n")

    return watch(lambda: take_sample(t, args.queue, not args.no_success), show, args.interval, args.count)


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0.1 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} must be from 0.1 to 3600 seconds")
    return value


def add_parser(command: Command) -> None:
    p = command("watch", cmd_watch, "A live view of every queue: depth by state, throughput, age at claim, paused; refreshed in place (Ctrl-C stops).")
    p.add_argument("--queue", action="append", help="only this queue (repeatable; default: every configured queue)")
    p.add_argument("--interval", type=_interval, default=2.0, help="seconds between refreshes (default 2)")
    p.add_argument("--count", type=output.positive_int, help="stop after this many refreshes (default: until Ctrl-C)")
    p.add_argument("--no-success", action="store_true",
                   help="do not count SUCCESS tasks (a table scan per refresh); throughput is then not shown")
