"""The queue metrics SQS users alarm on, published by the safety net each minute (one call per queue in
``taskqueue.wakeups.safety_net``): the oldest waiting task's age, waiting / running / delayed counts, and for a queue
with groups the quiet groups' figures, the number of noisy groups and the noisiest groups' own (the rules and names:
``taskqueue.core.queue_gauges``; the reads: ``taskqueue.store.gauges``; the costs: docs/operations.md, "Queue metrics").

Written as CloudWatch EMF on the function's log (as every metric of the handlers): namespace TaskQueues, dimensions
``service`` and ``queue`` (and ``group``). Why EMF and each minute: CloudWatch bills a custom metric $0.30 a month in
whatever hours it gets a value, so the period changes nothing there; a blob costs its log bytes ($0.50 per GB, about
500 bytes: $0.01 a month per queue each minute) where PutMetricData would cost $0.01 per 1,000 calls ($0.43 a month per
queue each minute); the reads cost cents a month at their cap; and the safety net runs each minute anyway.

Published only while a queue holds tasks (and for five minutes after, so graphs and alarms see it drain): an idle
queue costs no metric-hour. A new noisy group costs four metrics for the hour: at most ``2 x NOISY_GROUP_METRICS``
distinct groups an hour per queue (in this process; ``core.queue_gauges.groups_to_publish``). Nothing here ever
raises: a failed read is logged and the safety net goes on.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Protocol

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from taskqueue.core.queue_gauges import QueueGauges, Record, groups_to_publish, records, should_publish
from taskqueue.core.settings import Settings

logger = Logger(child=True)

NAMESPACE = "TaskQueues"
SERVICE = "taskqueue"
HOUR_MS = 3_600_000
_UNITS = {"Seconds": MetricUnit.Seconds, "Count": MetricUnit.Count}


class GaugeReads(Protocol):
    @property
    def settings(self) -> Settings: ...
    def queue_gauges(self, queue: str, now_ms: int | None = None) -> QueueGauges: ...


class Published:
    """What this process published lately: when each queue last held tasks, and which groups each queue published
    this hour (both bounded: one entry per queue, the current hour's groups)."""

    def __init__(self) -> None:
        self.last_busy_ms: dict[str, int] = {}
        self.groups: dict[str, tuple[int, set[str]]] = {}
        self.lock = threading.Lock()

    def groups_this_hour(self, queue: str, hour: int) -> set[str]:
        found = self.groups.get(queue)
        if found is None or found[0] != hour:
            found = (hour, set())
            self.groups[queue] = found
        return found[1]


_published = Published()


def publish(store: GaugeReads, queue: str, *, now_ms: int | None = None, published: Published | None = None,
            emit: Callable[[Record], None] | None = None) -> QueueGauges | None:
    """Read ``queue``'s figures and publish them (see the module's docstring); the figures read (None: the read
    failed, and was logged). ``emit`` writes one record (default: an EMF blob on stdout)."""
    seen = _published if published is None else published
    try:
        gauges = store.queue_gauges(queue, now_ms)
    except Exception as exc:  # noqa: BLE001 - metrics never stop the safety net
        logger.warning("could not read the queue's metrics", extra={"queue": queue, "error": f"{type(exc).__name__}: {exc}"})
        return None
    with seen.lock:
        busy = gauges.total.busy
        if not should_publish(busy, seen.last_busy_ms.get(queue), gauges.now_ms):
            return gauges
        if busy:
            seen.last_busy_ms[queue] = gauges.now_ms
        this_hour = seen.groups_this_hour(queue, gauges.now_ms // HOUR_MS)
        chosen = groups_to_publish(gauges.noisy(), this_hour, store.settings.noisy_group_metrics)
        this_hour.update(chosen)
    for record in records(gauges, chosen):
        try:
            (emit or emf)(record)
        except Exception as exc:  # noqa: BLE001
            logger.warning("could not write a queue metric", extra={"queue": queue, "error": f"{type(exc).__name__}: {exc}"})
    return gauges


def emf(record: Record) -> None:
    """One record as one EMF blob (Powertools), under the functions' namespace and service."""
    metrics = EphemeralMetrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or NAMESPACE,
                               service=os.environ.get("POWERTOOLS_SERVICE_NAME") or SERVICE)
    for name, value in record.dimensions:
        metrics.add_dimension(name=name, value=value)
    for name, unit, value in record.values:
        metrics.add_metric(name=name, unit=_UNITS[unit], value=value)
    metrics.flush_metrics()
