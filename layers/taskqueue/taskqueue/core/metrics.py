"""The handlers' CloudWatch metrics (EMF through Powertools), written one way for every function.

Two shapes: ``count`` flushes one metric at once with its own ``queue`` dimension (Trigger, whose invocation
touches several queues); ``add_report`` adds a worker run's counts and per-task times to the invocation's
``Metrics``, flushed by ``log_metrics`` when the handler returns (ProcessTasks, the Matcher: one queue each).
The namespace is POWERTOOLS_METRICS_NAMESPACE, as for every Powertools ``Metrics``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit, single_metric

# Per-task times added per invocation, at most: an EMF blob holds up to 100 values of one metric.
MAX_TIMINGS = 100


def count(name: str, queue: str | None, value: int = 1) -> None:
    """Flush one Count metric now, dimension ``queue`` ("unknown" when the record named none)."""
    with single_metric(name=name, unit=MetricUnit.Count, value=value) as metric:
        metric.add_dimension(name="queue", value=queue or "unknown")


def add_report(
    metrics: Metrics,
    queue: str,
    counts: Iterable[tuple[str, int]],
    timing: str,
    timings_ms: Sequence[int | float],
) -> None:
    """A worker run's metrics: each (name, value) of ``counts`` as a Count, and up to MAX_TIMINGS values of
    ``timing`` in milliseconds, all with dimension ``queue``."""
    metrics.add_dimension(name="queue", value=queue)
    for name, value in counts:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    for value in timings_ms[:MAX_TIMINGS]:
        metrics.add_metric(name=timing, unit=MetricUnit.Milliseconds, value=value)
