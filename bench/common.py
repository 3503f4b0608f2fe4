"""Shared plumbing of the benchmarks: import paths and environment, clocks, the template's values, statistics.

Importing this module puts the queue core (``layers/taskqueue``) and the repository root on ``sys.path`` and
sets the dummy AWS environment every benchmark needs (no AWS is ever reached: every client is given the
endpoint of an emulator or of DynamoDB Local).
"""

from __future__ import annotations

import heapq
import logging
import math
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for _path in (str(ROOT), str(ROOT / "layers" / "taskqueue")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

for _name, _value in {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "ERROR",
    "POWERTOOLS_SERVICE_NAME": "taskqueue-bench",
    "POWERTOOLS_METRICS_NAMESPACE": "TaskQueuesBench",
    # The handlers' metrics would print one EMF line per metric on stdout.
    "POWERTOOLS_METRICS_DISABLED": "true",
}.items():
    os.environ.setdefault(_name, _value)


def quiet() -> None:
    """The product logs every claim at INFO: keep benchmark output to the benchmark's own lines."""
    for name in ("taskqueue", "matcher-bench", "taskqueue-bench", "botocore", "urllib3"):
        logging.getLogger(name).setLevel(logging.ERROR)


def client_for(endpoint: str, service: str = "dynamodb", pool: int = 10, max_attempts: int = 6) -> Any:
    """A boto3 client of an emulator or of DynamoDB Local (give each thread its own)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        config=Config(retries={"mode": "standard", "max_attempts": max_attempts}, max_pool_connections=pool),
    )


# ---- clocks -----------------------------------------------------------------------------------------


# How long a benchmark waits for its emulator to answer: the emulator's own 30 s is short on a shared 2-core machine
# under load (at a load average of 15 one did not start in time and failed a whole `make bench`).
EMULATOR_START_SECONDS = 180.0


class VirtualClock:
    """Virtual time for a single-threaded replay: time moves only by ``sleep``/``advance``.

    ``at(t, fn)`` schedules a callback (e.g. a task's arrival) at virtual time ``t``; every sleep runs the
    callbacks that fall due before it returns, in time order, with the clock set to their time. So a seed
    worker that sleeps 200 ms between two claims sees the tasks that arrived meanwhile, as it would on AWS.

    ``nested``: a callback's own sleeps run the callbacks due meanwhile too (in the same thread): a replayed invocation
    started by a callback (a stream batch) sees the arrivals, and the other invocations, that fall inside its run.
    Without it a callback's sleeps only move the clock (arrivals are quick; nothing else was a callback).
    """

    def __init__(self, start_ms: int = 1_800_000_000_000, *, nested: bool = False) -> None:
        self._now_ms = float(start_ms)
        self._start_ms = start_ms
        self._events: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self._nested = nested
        self._depth = 0
        self._owner: int | None = None  # the thread running callbacks

    def now_ms(self) -> int:
        return int(self._now_ms)

    def monotonic(self) -> float:
        return (self._now_ms - self._start_ms) / 1000.0

    def seconds(self) -> float:
        """Virtual seconds since the clock started."""
        return self.monotonic()

    def at(self, seconds: float, callback: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._events, (seconds, self._seq, callback))

    def sleep(self, seconds: float) -> None:
        before = self._now_ms
        self.advance_to(self.monotonic() + max(0.0, seconds))
        if seconds > 0 and self._now_ms <= before:
            # Shorter than the float can add (a wait for the last 1e-14 s of a deadline): time still moves on, or a
            # loop waiting for that deadline would spin forever on a clock that never gets there.
            self._now_ms = math.nextafter(before, math.inf)

    def advance(self, seconds: float) -> None:
        self.sleep(seconds)

    def advance_to(self, seconds: float) -> None:
        """Run every callback due up to ``seconds`` (each at its own time), then set the clock there."""
        while self._events and self._events[0][0] <= seconds:
            if self._depth and not (self._nested and self._owner == threading.get_ident()):
                break
            due, _, callback = heapq.heappop(self._events)
            self._now_ms = max(self._now_ms, self._start_ms + due * 1000.0)
            self._depth += 1
            self._owner = threading.get_ident()
            try:
                callback()
            finally:
                self._depth -= 1
                if not self._depth:
                    self._owner = None
        self._now_ms = max(self._now_ms, self._start_ms + seconds * 1000.0)

    def pending_events(self) -> int:
        return len(self._events)


class ScaledClock:
    """Real time run faster: one real second is ``1/scale`` virtual seconds (``scale`` < 1 speeds up).

    ``now_ms`` and ``monotonic`` report virtual time; ``sleep(s)`` sleeps ``s * scale`` real seconds. Shared by
    threads (the product's runner threads, the seed port's per-task threads)."""

    def __init__(self, scale: float, start_ms: int = 1_800_000_000_000) -> None:
        self.scale = scale
        self._real0 = time.monotonic()
        self._start_ms = start_ms

    def restart(self) -> None:
        """Virtual time 0 is now (call it when the measured part begins)."""
        self._real0 = time.monotonic()

    def seconds(self) -> float:
        return (time.monotonic() - self._real0) / self.scale

    def now_ms(self) -> int:
        return int(self._start_ms + self.seconds() * 1000.0)

    def monotonic(self) -> float:
        return self.seconds()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds * self.scale)

    def sleep_until(self, seconds: float) -> None:
        self.sleep(seconds - self.seconds())


# ---- the template's values --------------------------------------------------------------------------


@dataclass(frozen=True)
class TemplateValues:
    """What the benchmarks take from template.yaml (defaults of its parameters, resolved)."""

    safety_net_seconds: float
    time_budget_seconds: float
    page_size: int
    lease_seconds: int
    runner_capacity: int
    runner_seconds: float
    worker_concurrency: int | None  # ProcessTasks' reserved concurrency (None: none, the default)
    worker_timeout_seconds: float
    worker_max_event_age_seconds: int
    worker_memory_mb: int
    trigger_memory_mb: int
    # ProcessTasks' TaskStream event: a worker invocation per batch of the queue table's stream.
    stream_batch_size: int
    stream_window_seconds: float
    stream_parallel: int  # its ParallelizationFactor: batches of one shard in flight at once
    stream_max_record_age_seconds: float | None  # records older are skipped (None: kept until read)


def template_values() -> TemplateValues:
    from local.delivery.schedules import rate_seconds
    from local.template.template import Template

    tpl = Template(ROOT / "template.yaml")
    for logical in tpl.of_type("AWS::DynamoDB::Table"):
        # The engine learns stream ARNs when it creates the tables; a placeholder is enough to read values.
        tpl.resolver.attrs.setdefault(f"{logical}.StreamArn", f"arn:aws:dynamodb:us-east-1:000000000000:table/{logical}/stream/bench")
    p = tpl.parameters
    functions = tpl.functions()
    worker = functions["ProcessTasksFunction"]
    trigger = functions["TriggerFunction"]
    stream = worker.events["TaskStream"]["Properties"]
    max_record_age = int(stream.get("MaximumRecordAgeInSeconds", -1))  # -1: records never skipped for age
    return TemplateValues(
        safety_net_seconds=rate_seconds(str(trigger.events["SafetyNet"]["Properties"]["Schedule"])),
        time_budget_seconds=float(p["TimeBudgetSeconds"]),
        page_size=int(p["PageSize"]),
        lease_seconds=int(p["LeaseSeconds"]),
        runner_capacity=int(p["RunnerCapacity"]),
        runner_seconds=float(p["FakeRunnerDurationSeconds"]),
        worker_concurrency=worker.reserved_concurrency,
        worker_timeout_seconds=worker.timeout,
        worker_max_event_age_seconds=worker.max_event_age_seconds,
        worker_memory_mb=worker.memory,
        trigger_memory_mb=trigger.memory,
        stream_batch_size=int(stream.get("BatchSize", 100)),
        stream_window_seconds=float(stream.get("MaximumBatchingWindowInSeconds", 0)),
        stream_parallel=int(stream.get("ParallelizationFactor", 1)),
        stream_max_record_age_seconds=float(max_record_age) if max_record_age >= 0 else None,
    )


# ---- statistics ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spread:
    """The median of several runs with their minimum and maximum."""

    median: float
    low: float
    high: float
    runs: int

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        data = [float(v) for v in values]
        if not data:
            return cls(float("nan"), float("nan"), float("nan"), 0)
        return cls(statistics.median(data), min(data), max(data), len(data))

    def fmt(self, digits: int = 2) -> str:
        if self.runs == 0:
            return "n/a"
        if self.low == self.high:
            return f"{self.median:.{digits}f}"
        return f"{self.median:.{digits}f} ({self.low:.{digits}f}–{self.high:.{digits}f})"

    def as_dict(self) -> dict[str, float]:
        return {"median": self.median, "min": self.low, "max": self.high, "runs": self.runs}


def ratio(value: float, baseline: float) -> str:
    """``value`` as a multiple of ``baseline`` ("×0.42"); "n/a" when the baseline is 0."""
    if baseline == 0 or baseline != baseline or value != value:
        return "n/a" if value != 0 else "×1.00"
    return f"×{value / baseline:.2f}"


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), nearest-rank; NaN for no values."""
    if not values:
        return float("nan")
    data = sorted(values)
    rank = max(1, min(len(data), int(-(-q * len(data) // 100))))
    return float(data[rank - 1])


class StopWatch:
    def __init__(self) -> None:
        self.started = time.monotonic()

    def seconds(self) -> float:
        return time.monotonic() - self.started


class RequestCount:
    """A client's DynamoDB requests by operation (a botocore event, nothing sent, no lock held across a request). Where
    a run only wants the number of requests, this and not the cost meter: the meter reads each written item before and
    after the write and holds its lock across every request, which slows the system under measurement."""

    def __init__(self, client: Any) -> None:
        self._lock = threading.Lock()
        self.requests: dict[str, int] = {}
        client.meta.events.register("before-call.dynamodb", self._seen, unique_id=f"request-count-{id(self)}")

    def _seen(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.requests[model.name] = self.requests.get(model.name, 0) + 1


class Counter:
    """A thread-safe counter bag."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.values: dict[str, float] = {}

    def add(self, name: str, value: float = 1) -> None:
        with self._lock:
            self.values[name] = self.values.get(name, 0) + value

    def get(self, name: str) -> float:
        return self.values.get(name, 0)
