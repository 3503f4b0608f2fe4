"""A DynamoDB event source mapping: FilterCriteria, batching, ReportBatchItemFailures, bisection, retries
and the OnFailure destination, ParallelizationFactor batches at a time per mapping (one shard)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from local.delivery.async_invoker import Invoked
from local.delivery.destinations import now_iso
from local.delivery.sandbox import FunctionPool, Invocation
from local.template import filter_patterns
from local.template.template import ACCOUNT, REGION


class StreamMapping:
    """One DynamoDB event source mapping: FilterCriteria, BatchSize, MaximumBatchingWindowInSeconds,
    ReportBatchItemFailures, BisectBatchOnFunctionError, MaximumRetryAttempts, OnFailure destination.
    Batches go to the function synchronously, up to ParallelizationFactor (default 1) at once from the one shard, each
    batch the next records in order. (Lambda also keeps the records of one item key in order across concurrent
    batches; a mapping here passes each item's INSERT or REMOVE only, one record per key.)"""

    def __init__(self, function: str, pool: FunctionPool, props: dict[str, Any], time_scale: float,
                 send_failure: Callable[[str, dict[str, Any]], None], on_invoked: Invoked | None = None) -> None:
        self.function = function
        self.pool = pool
        self.stream_arn = props["Stream"]
        self.batch_size = int(props.get("BatchSize", 100))
        self.window = float(props.get("MaximumBatchingWindowInSeconds", 0)) * time_scale
        self.filters = [f["Pattern"] for f in ((props.get("FilterCriteria") or {}).get("Filters") or [])]
        for f in self.filters:
            filter_patterns.parse(f)  # fail at start on a pattern the matcher cannot read
        self.report_failures = "ReportBatchItemFailures" in (props.get("FunctionResponseTypes") or [])
        self.bisect = bool(props.get("BisectBatchOnFunctionError", False))
        self.max_retries = int(props.get("MaximumRetryAttempts", -1))
        self.on_failure = ((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        self.enabled = props.get("Enabled", True) not in (False, "false", "False")
        self.parallel = max(1, min(10, int(props.get("ParallelizationFactor", 1))))
        self.send_failure = send_failure
        self.on_invoked = on_invoked
        self.scale = time_scale
        self._buffer: list[dict[str, Any]] = []
        self._first_at: float | None = None
        self._cond = threading.Condition()
        self._stop = False
        self._in_flight = 0
        self.stats = {"records_in": 0, "filtered_out": 0, "batches": 0, "records_delivered": 0, "retries": 0,
                      "throttled": 0, "to_destination": 0, "partial_failures": 0}
        self._threads = [threading.Thread(target=self._loop, name=f"esm-{function}-{n}", daemon=True)
                         for n in range(self.parallel)]
        for thread in self._threads:
            thread.start()

    def consume(self, records: list[dict[str, Any]]) -> None:
        if not self.enabled:
            return
        kept = [r for r in records if filter_patterns.matches_any(self.filters, r)]
        with self._cond:
            self.stats["records_in"] += len(records)
            self.stats["filtered_out"] += len(records) - len(kept)
            if kept:
                if not self._buffer:
                    self._first_at = time.monotonic()
                self._buffer.extend(kept)
                self._cond.notify_all()

    def pending(self) -> int:
        with self._cond:
            return len(self._buffer) + self._in_flight

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._stop:
                    if self._buffer and (len(self._buffer) >= self.batch_size
                                         or time.monotonic() - (self._first_at or 0) >= self.window):
                        break
                    timeout = None if not self._buffer else max(0.0, self.window - (time.monotonic() - (self._first_at or 0)))
                    self._cond.wait(timeout)
                if self._stop:
                    return
                batch, self._buffer = self._buffer[: self.batch_size], self._buffer[self.batch_size:]
                self._first_at = time.monotonic() if self._buffer else None
                self._in_flight += len(batch)
                if self._buffer:
                    self._cond.notify()  # the next batch, for a delivery thread that is free
            try:
                self._deliver(batch)
            finally:
                with self._cond:
                    self._in_flight -= len(batch)

    def _count(self, name: str, n: int = 1) -> None:
        with self._cond:  # batches are delivered from several threads (ParallelizationFactor)
            self.stats[name] += n

    def _deliver(self, batch: list[dict[str, Any]]) -> None:
        work = [(batch, 0)]
        while work and not self._stop:
            records, retries = work.pop(0)
            inv = self.pool.try_invoke({"Records": records})
            if inv.throttled:
                self._count("throttled", 1)
                time.sleep(0.2)
                work.insert(0, (records, retries))
                continue
            self._count("batches", 1)
            if self.on_invoked:
                self.on_invoked(self.function, "dynamodb", {"Records": records}, inv)
            failed_from = self._failed_from(records, inv)
            if failed_from is None:
                self._count("records_delivered", len(records))
                continue
            if inv.ok:
                self._count("partial_failures", 1)
                self._count("records_delivered", failed_from)
                records = records[failed_from:]
            if self.max_retries >= 0 and retries >= self.max_retries:
                self._to_destination(records, inv)
                continue
            self._count("retries", 1)
            time.sleep(min(2.0, 0.2 * 2 ** retries))
            if not inv.ok and self.bisect and len(records) > 1:
                half = len(records) // 2
                work[:0] = [(records[:half], retries + 1), (records[half:], retries + 1)]
            else:
                work.insert(0, (records, retries + 1))

    def _failed_from(self, records: list[dict[str, Any]], inv: Invocation) -> int | None:
        """None: the batch succeeded. Otherwise the index of the first record to retry."""
        if not inv.ok:
            return 0
        if not self.report_failures or not isinstance(inv.result, dict):
            return None
        failures = inv.result.get("batchItemFailures")
        if not failures:
            return None
        seqs = [r["dynamodb"].get("SequenceNumber") for r in records]
        indexes = []
        for failure in failures:
            ident = failure.get("itemIdentifier") if isinstance(failure, dict) else None
            if ident not in seqs:
                return 0  # an unknown or empty identifier fails the whole batch, as in Lambda
            indexes.append(seqs.index(ident))
        return min(indexes)

    def _to_destination(self, records: list[dict[str, Any]], inv: Invocation) -> None:
        self._count("to_destination", 1)
        if not self.on_failure:
            return
        first, last = records[0], records[-1]
        self.send_failure(self.on_failure, {
            "requestContext": {"requestId": inv.request_id, "functionArn":
                               f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.pool.spec.name}",
                               "condition": "RetryAttemptsExhausted", "approximateInvokeCount": self.max_retries + 1},
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST",
                                "functionError": None if inv.ok else "Unhandled"},
            "version": "1.0",
            "timestamp": now_iso(),
            "DDBStreamBatchInfo": {
                "shardId": "local", "startSequenceNumber": first["dynamodb"].get("SequenceNumber"),
                "endSequenceNumber": last["dynamodb"].get("SequenceNumber"),
                "approximateArrivalOfFirstRecord": first["dynamodb"].get("ApproximateCreationDateTime"),
                "approximateArrivalOfLastRecord": last["dynamodb"].get("ApproximateCreationDateTime"),
                "batchSize": len(records), "streamArn": self.stream_arn,
            },
        })

