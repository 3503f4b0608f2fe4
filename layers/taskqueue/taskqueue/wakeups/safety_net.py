"""The safety net, run on Trigger's schedule: no lost stream batch, wake-up or crashed worker strands a task for long.

For every configured queue: recover expired leases (a crashed worker's tasks go back to PENDING, which the table's
stream hands to the queue's worker, or to FAILURE when their attempts are used up), repair the delayed head
(``taskqueue.core.delayed_head``), then wake the queue's worker if it has claimable tasks (a stream batch dropped
after its retries, a worker that died before it claimed, a schedule that never fired). Looking for claimable tasks
sheds the expired entries it meets (counted as TasksShed). A queue with nothing claimable and a future delayed head
gets its scheduled wake-up checked (``DelayedWakeups.ensure(verify=True)``: a lost schedule is set again). A queue
that fails does not stop the others; the run raises at the end so the failure shows (Lambda's retry runs it again).
"""

from __future__ import annotations

from typing import Protocol

from aws_lambda_powertools import Logger

from taskqueue.core import metrics as handler_metrics
from taskqueue.core.errors import TaskQueueError
from taskqueue.core.settings import Settings
from taskqueue.observe import queue_metrics
from taskqueue.store import TaskStore
from taskqueue.wakeups.delayed_wakeup import DelayedWakeups
from taskqueue.wakeups.notify import Notifier

logger = Logger(child=True)

REASON = "safety-net"
# What a recovered lease's new status is counted as.
_RECOVERY_METRICS = (("PENDING", "LeasesRecovered"), ("FAILURE", "TasksFailed"))


class SafetyNetServices(Protocol):
    """What the safety net uses of a handler's services (``taskqueue.services.Services`` has them)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def store(self) -> TaskStore: ...
    @property
    def notifier(self) -> Notifier: ...


def run_safety_net(svc: SafetyNetServices, scheduled: DelayedWakeups | None = None) -> list[str]:
    """Recover and wake every queue; the queues woken, in configuration order. ``scheduled``: the queues'
    wake-ups at their delayed heads, checked for the queues with nothing claimable."""
    woken: list[str] = []
    errors: list[str] = []
    for queue in svc.settings.queue_orders:
        try:
            if _check(svc, queue, scheduled):
                woken.append(queue)
            queue_metrics.publish(svc.store, queue)  # the queue metrics, each run (never raises)
        except TaskQueueError as exc:
            errors.append(f"{queue}: {exc}")
        finally:
            # Expired entries the check met were shed (PENDING -> SHED): count them here, once.
            shed = svc.store.drain_shed().get(queue, 0)
            if shed:
                handler_metrics.count("TasksShed", queue, shed)
    if errors:
        raise TaskQueueError("safety net could not check every queue: " + "; ".join(errors))
    return woken


def _check(svc: SafetyNetServices, queue: str, scheduled: DelayedWakeups | None) -> bool:
    """One queue: recover, repair, wake if claimable work waits; whether it was woken."""
    recovered = svc.store.recover_expired_leases(queue, legacy=True)
    for status, metric in _RECOVERY_METRICS:
        if recovered[status]:
            handler_metrics.count(metric, queue, recovered[status])
            logger.warning("expired leases recovered", extra={"queue": queue, "new_status": status, "count": recovered[status]})
    # Workers read the delayed partitions only when the queue's record says an entry may be due: lower the record's
    # head to any entry a writer did not announce (it died in between; taskqueue.core.delayed_head).
    head = svc.store.repair_delayed_head(queue)
    svc.store.finish_owed_fan_outs(queue)  # workflows: the fan-outs a dead writer left owed (store/workflow_fan_out.py)
    claimable = svc.store.has_claimable(queue)
    for status, count in svc.store.drain_recovered(queue).items():  # dead workers' tasks the look met
        handler_metrics.count(dict(_RECOVERY_METRICS)[status], queue, count)
    if claimable and not svc.store.is_paused(queue):
        svc.notifier.publish_wakeup(queue, REASON)
        handler_metrics.count("Wakeups", queue)
        logger.info("worker woken", extra={"queue": queue, "reason": REASON})
        return True
    if not claimable and scheduled is not None and head is not None:
        scheduled.ensure(queue, head, None, verify=True)  # never raises: a refusal is logged and counted
    return False
