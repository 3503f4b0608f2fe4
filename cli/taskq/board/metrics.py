"""The board's charts: per-minute series of the metrics the functions already emit, over the last hour.

The functions write their metrics as CloudWatch EMF (``taskqueue.core.metrics``): namespace TaskQueues,
dimensions ``service`` and ``queue``. On AWS the board reads them back with CloudWatch GetMetricData
(``CloudWatchMetrics``); the local stack has no CloudWatch, but it writes every function's output, EMF lines
included, to its function log, so ``EmfLogMetrics`` reads the same blobs from there. One shape either way
(``QueueSeries``): what a chart shows does not depend on where it came from, and both survive a board restart.

SUCCESS and SHED are not indexed, so the queues page shows them as these rates (succeeded / shed in the last
hour), never by a table scan.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

NAMESPACE = "TaskQueues"
SERVICE = "taskqueue"
MINUTE_MS = 60_000
WINDOW_MINUTES = 60
# Counted per minute: (metric, what the chart calls it). A queue shows the ones its functions emit.
COUNTS: tuple[tuple[str, str], ...] = (
    ("TasksCreated", "created"),
    ("TasksClaimed", "claimed"),
    ("TasksSucceeded", "succeeded"),
    ("TasksFailed", "failed"),
    ("TasksShed", "shed"),
    ("CallsMatched", "matched"),
)
# Per-task times (ms), as p50 / p95 per minute: the worker's age at claim, the Matcher's wait at match.
TIMINGS: tuple[str, ...] = ("AgeAtClaim", "WaitTimeAtMatch")
# How far back the local function log is read: enough for an hour of a busy stack, bounded for a big log.
_LOG_TAIL_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class QueueSeries:
    """One queue's metrics per minute from ``start_ms`` (a minute boundary) for ``minutes`` minutes.

    ``counts``: metric -> one sum per minute; ``timings``: metric -> (p50, p95) per minute, None where the minute
    had no value; ``source``: where they were read (for the page to say)."""

    queue: str
    start_ms: int
    minutes: int
    counts: Mapping[str, list[float]] = field(default_factory=dict)
    timings: Mapping[str, list[tuple[float, float] | None]] = field(default_factory=dict)
    source: str = ""
    problem: str | None = None  # why the series are empty (metrics unreadable), for the page to say

    def total(self, metric: str) -> float | None:
        """The metric's sum over the window; None when it was not read at all."""
        values = self.counts.get(metric)
        return None if values is None else sum(values)

    def has_values(self, metric: str) -> bool:
        return any(self.counts.get(metric, ())) or any(v is not None for v in self.timings.get(metric, ()))


class MetricsSource(Protocol):
    description: str

    def series(self, queues: Sequence[str], now_ms: int) -> dict[str, QueueSeries]:
        """Every queue's series over the WINDOW_MINUTES minutes that end with the minute of ``now_ms``."""
        ...


def window_start(now_ms: int, minutes: int = WINDOW_MINUTES) -> int:
    return (now_ms // MINUTE_MS - minutes + 1) * MINUTE_MS


# ---- the local stack: EMF lines of its function log ------------------------------------------------------------


@dataclass(frozen=True)
class EmfValue:
    """One value of one metric in an EMF blob."""

    at_ms: int
    name: str
    queue: str | None
    value: float


def emf_values(lines: Iterable[str]) -> Iterator[EmfValue]:
    """The TaskQueues metric values in log lines ("<function> <json>" as the local stack writes them, or bare JSON);
    lines that are not EMF blobs are skipped."""
    for line in lines:
        start = line.find("{")
        if start < 0 or '"_aws"' not in line:
            continue
        try:
            blob = json.loads(line[start:])
        except ValueError:
            continue
        meta = blob.get("_aws") if isinstance(blob, dict) else None
        if not isinstance(meta, dict):
            continue
        at_ms = meta.get("Timestamp")
        if not isinstance(at_ms, int):
            continue
        for definition in meta.get("CloudWatchMetrics") or ():
            if definition.get("Namespace") != NAMESPACE:
                continue
            queue = blob.get("queue")
            for metric in definition.get("Metrics") or ():
                name = metric.get("Name")
                raw = blob.get(name)
                values = raw if isinstance(raw, list) else [raw]
                for value in values:
                    if isinstance(value, int | float) and not isinstance(value, bool):
                        yield EmfValue(at_ms, name, queue if isinstance(queue, str) else None, float(value))


def bucket(values: Iterable[EmfValue], queues: Sequence[str], now_ms: int, source: str) -> dict[str, QueueSeries]:
    """Per-minute sums and percentiles of ``values`` for each of ``queues`` over the window ending at ``now_ms``."""
    start = window_start(now_ms)
    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0] * WINDOW_MINUTES)
    samples: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    counted = {name for name, _ in COUNTS}
    wanted = set(queues)
    for v in values:
        minute = (v.at_ms - start) // MINUTE_MS
        if v.queue not in wanted or not 0 <= minute < WINDOW_MINUTES:
            continue
        if v.name in counted:
            sums[v.queue, v.name][minute] += v.value
        elif v.name in TIMINGS:
            samples[v.queue, v.name, minute].append(v.value)
    result = {}
    for queue in queues:
        counts = {name: sums.get((queue, name), [0.0] * WINDOW_MINUTES) for name, _ in COUNTS}
        timings = {
            name: [percentiles(samples.get((queue, name, m), [])) for m in range(WINDOW_MINUTES)] for name in TIMINGS
        }
        result[queue] = QueueSeries(queue, start, WINDOW_MINUTES, counts, timings, source)
    return result


def percentiles(values: Sequence[float]) -> tuple[float, float] | None:
    """(p50, p95) of ``values`` (nearest rank), None for none."""
    if not values:
        return None
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, max(0, -(-95 * len(ordered) // 100) - 1))]
    return float(statistics.median(ordered)), float(p95)


class EmfLogMetrics:
    """The local stack's metrics: EMF blobs in its function log (the file the stack writes every function's output
    to), read from its last ``_LOG_TAIL_BYTES`` at each refresh."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.description = f"the local stack's function log ({log_path.name}), as CloudWatch would receive them"

    def series(self, queues: Sequence[str], now_ms: int) -> dict[str, QueueSeries]:
        try:
            with self.log_path.open("rb") as log:
                log.seek(0, 2)
                size = log.tell()
                log.seek(max(0, size - _LOG_TAIL_BYTES))
                text = log.read().decode("utf-8", errors="replace")
        except FileNotFoundError:
            text = ""
        except OSError as exc:
            return _unreadable(queues, now_ms, self.description, f"cannot read {self.log_path}: {exc.strerror}")
        return bucket(emf_values(text.splitlines()), queues, now_ms, self.description)


# ---- AWS: CloudWatch GetMetricData ------------------------------------------------------------------------------


class CloudWatchMetrics:
    """The deployed stack's metrics: one GetMetricData request per refresh for every queue's series."""

    def __init__(self, cloudwatch: Any) -> None:
        self._cloudwatch = cloudwatch
        self.description = f"CloudWatch ({NAMESPACE}, service={SERVICE})"

    def series(self, queues: Sequence[str], now_ms: int) -> dict[str, QueueSeries]:
        start = window_start(now_ms)
        queries = metric_queries(queues)
        found: dict[str, dict[int, float]] = {}
        request: dict[str, Any] = {
            "MetricDataQueries": queries,
            "StartTime": datetime.fromtimestamp(start / 1000, UTC),
            "EndTime": datetime.fromtimestamp((start + WINDOW_MINUTES * MINUTE_MS) / 1000, UTC),
            "ScanBy": "TimestampAscending",
        }
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            while True:
                response = self._cloudwatch.get_metric_data(**request)
                for result in response.get("MetricDataResults", []):
                    points = found.setdefault(result["Id"], {})
                    for at, value in zip(result.get("Timestamps", []), result.get("Values", [])):
                        points[int(at.timestamp() * 1000)] = float(value)
                if not response.get("NextToken"):
                    break
                request["NextToken"] = response["NextToken"]
        except (ClientError, BotoCoreError) as exc:
            return _unreadable(queues, now_ms, self.description, f"CloudWatch could not be read: {exc}")
        return series_of(found, queues, start, self.description)


# GetMetricData is billed per metric asked for ($0.01 per 1,000): the queues page asks 20 (10 per queue). At every
# 3 s refresh that was 24,000 an hour ($0.24); read every 3 minutes, 400 an hour ($0.004). The series are per
# minute and CloudWatch has the last minute a minute or two late anyway.
CLOUDWATCH_EVERY_S = 180.0


class CachedMetrics:
    """``source``'s series read again at most every ``every_s`` seconds, shared by every tab; the page says their
    age (in ``QueueSeries.source``)."""

    def __init__(self, source: MetricsSource, every_s: float = CLOUDWATCH_EVERY_S,
                 clock: Any = time.monotonic) -> None:
        self._source, self.every_s, self._clock = source, every_s, clock
        self.description = source.description
        self._lock = threading.Lock()
        self._cached: dict[tuple[str, ...], tuple[float, dict[str, QueueSeries]]] = {}

    def series(self, queues: Sequence[str], now_ms: int) -> dict[str, QueueSeries]:
        key = tuple(queues)
        now = self._clock()
        with self._lock:
            found = self._cached.get(key)
        if found is None or now - found[0] >= self.every_s or any(s.problem for s in found[1].values()):
            found = (now, self._source.series(queues, now_ms))
            with self._lock:
                self._cached[key] = found
        age = int(now - found[0])
        note = f"{self.description}, read {age} s ago (every {int(self.every_s)} s)"
        return {q: replace(series, source=note) for q, series in found[1].items()}


def query_id(queue_index: int, metric: str, stat: str) -> str:
    """A GetMetricData query id: lower-case first letter, letters, digits and underscores."""
    return f"q{queue_index}_{metric}_{stat}"


def metric_queries(queues: Sequence[str]) -> list[dict[str, Any]]:
    queries = []
    for n, queue in enumerate(queues):
        dims = [{"Name": "service", "Value": SERVICE}, {"Name": "queue", "Value": queue}]
        wanted = [(name, "Sum") for name, _ in COUNTS] + [(name, p) for name in TIMINGS for p in ("p50", "p95")]
        for metric, stat in wanted:
            queries.append({
                "Id": query_id(n, metric, stat),
                "MetricStat": {
                    "Metric": {"Namespace": NAMESPACE, "MetricName": metric, "Dimensions": dims},
                    "Period": 60,
                    "Stat": stat,
                },
                "ReturnData": True,
            })
    return queries


def series_of(found: Mapping[str, Mapping[int, float]], queues: Sequence[str], start: int, source: str) -> dict[str, QueueSeries]:
    """QueueSeries from GetMetricData points (query id -> minute's epoch ms -> value)."""

    def per_minute(points: Mapping[int, float]) -> list[float | None]:
        row: list[float | None] = [None] * WINDOW_MINUTES
        for at, value in points.items():
            minute = (at - start) // MINUTE_MS
            if 0 <= minute < WINDOW_MINUTES:
                row[minute] = value
        return row

    result = {}
    for n, queue in enumerate(queues):
        counts = {name: [v or 0.0 for v in per_minute(found.get(query_id(n, name, "Sum"), {}))] for name, _ in COUNTS}
        timings: dict[str, list[tuple[float, float] | None]] = {}
        for name in TIMINGS:
            p50 = per_minute(found.get(query_id(n, name, "p50"), {}))
            p95 = per_minute(found.get(query_id(n, name, "p95"), {}))
            timings[name] = [None if a is None or b is None else (a, b) for a, b in zip(p50, p95)]
        result[queue] = QueueSeries(queue, start, WINDOW_MINUTES, counts, timings, source)
    return result


def _unreadable(queues: Sequence[str], now_ms: int, source: str, problem: str) -> dict[str, QueueSeries]:
    start = window_start(now_ms)
    return {q: QueueSeries(q, start, WINDOW_MINUTES, source=source, problem=problem) for q in queues}
