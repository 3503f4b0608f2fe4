"""Progress of a running task: a runner reports a number and a short message, which ``taskq show``, the producer
client (``taskqueue.client``) and the table's stream see.

    from taskqueue.progress import report_progress
    report_progress(40, "page 2 of 5 sent")

A report is written to the task's item (``progress``, ``progressMessage``, ``progressUpdated``) by the worker that
holds its lease, at most once every PROGRESS_INTERVAL_SECONDS per task: a runner may report every tiny step and
pays a write only now and then. A report inside the interval is kept only until the next one; the attempt's
outcome (SUCCESS, FAILURE, a retry) follows anyway. Each attempt starts without progress (the claim removes it).
A progress write is a MODIFY on the stream, which Trigger's stream filter (INSERTs of PENDING tasks) never passes
on: reporting wakes nothing.
"""

from __future__ import annotations

from taskqueue.core.progress_reports import PROGRESS_INTERVAL_SECONDS, checked_progress
from taskqueue.work.lease import current_lease

__all__ = ["PROGRESS_INTERVAL_SECONDS", "report_progress"]


def report_progress(progress: float, message: str | None = None) -> bool:
    """For task runners: report how far the task in progress is. ``True`` if this report was written, ``False``
    if it was within the interval of the last write, the lease is no longer this worker's, the write was refused
    for now, or no task is being run (so a runner can be called outside a worker, in its own tests)."""
    value, text = checked_progress(progress, message)
    lease = current_lease()
    return False if lease is None else lease.report_progress(value, text)
