"""Event delivery the way AWS does it: Lambda's asynchronous-invocation queue, SNS subscriptions,
DynamoDB stream event source mappings, EventBridge schedules, and DynamoDB TTL deletions."""

from __future__ import annotations

import base64
import datetime as dt
import heapq
import itertools
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from local import patterns
from local.sandbox import FunctionPool, Invocation
from local.template import ACCOUNT, REGION, FunctionSpec

log = logging.getLogger("local.engine")

Invoked = Callable[[str, str, Any, Invocation], None]  # (function, source, event, invocation)


def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.datetime.now(dt.UTC).microsecond // 1000:03d}Z"


# --------------------------------------------------------------------------- asynchronous invocations


@dataclass(order=True)
class _AsyncEvent:
    due: float
    seq: int
    payload: Any = field(compare=False)
    source: str = field(compare=False)
    received: float = field(compare=False)
    attempts: int = field(default=0, compare=False)  # invocations that ran and failed
    throttles: int = field(default=0, compare=False)
    # One request id for every attempt of the event, as Lambda keeps it across its retries.
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()), compare=False)


class AsyncInvoker:
    """Lambda's internal queue for one function's asynchronous invocations (SNS, EventBridge).

    A throttled event (the function is at its reserved concurrency) waits and is retried with backoff
    until it is older than MaximumEventAgeInSeconds (scaled), then dropped: counted as ``dropped_age``, and
    sent to the on-failure destination only if one is configured. A failed invocation is retried
    MaximumRetryAttempts times (Lambda waits ~1 and ~2 minutes: scaled by the time scale) unless the event
    is older than the max age by then (dropped as above), then sent to the on-failure destination, if any.
    """

    def __init__(self, pool: FunctionPool, spec: FunctionSpec, time_scale: float,
                 send_failure: Callable[[str, dict[str, Any]], None], on_invoked: Invoked | None = None) -> None:
        self.pool = pool
        self.spec = spec
        self.scale = time_scale
        self.send_failure = send_failure
        self.on_invoked = on_invoked
        self._heap: list[_AsyncEvent] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._running = 0
        self._stop = False
        self.stats = {"received": 0, "invoked": 0, "throttled": 0, "retried": 0, "dropped_age": 0,
                      "failed": 0, "succeeded": 0}
        self._thread = threading.Thread(target=self._loop, name=f"async-{spec.logical_id}", daemon=True)
        self._thread.start()

    @property
    def max_age(self) -> float:
        return self.spec.max_event_age_seconds * self.scale

    def submit(self, payload: Any, source: str) -> None:
        now = time.monotonic()
        with self._cond:
            self.stats["received"] += 1
            heapq.heappush(self._heap, _AsyncEvent(now, next(self._seq), payload, source, now))
            self._cond.notify()

    def pending(self) -> int:
        with self._cond:
            return len(self._heap) + self._running

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._stop and (not self._heap or self._heap[0].due > time.monotonic()):
                    self._cond.wait(None if not self._heap else max(0.0, self._heap[0].due - time.monotonic()))
                if self._stop:
                    return
                event = heapq.heappop(self._heap)
                self._running += 1
            threading.Thread(target=self._attempt, args=(event,), daemon=True).start()
            # Give the attempt a moment to take its slot, so a burst is not all started at once.
            time.sleep(0.005)

    def _requeue(self, event: _AsyncEvent, delay: float) -> None:
        with self._cond:
            event.due = time.monotonic() + delay
            event.seq = next(self._seq)
            heapq.heappush(self._heap, event)
            self._running -= 1
            self._cond.notify()

    def _done(self) -> None:
        with self._cond:
            self._running -= 1

    def _attempt(self, event: _AsyncEvent) -> None:
        age = time.monotonic() - event.received
        if age > self.max_age:
            self.stats["dropped_age"] += 1
            self._failure(event, "EventAgeExceeded", None)
            self._done()
            return
        inv = self.pool.try_invoke(event.payload, request_id=event.request_id)
        if inv.throttled:
            self.stats["throttled"] += 1
            event.throttles += 1
            # Lambda backs off from ~1 s up to 5 minutes between throttled retries; scaled, with a floor.
            delay = max(0.2, min(2 ** min(event.throttles - 1, 10), 300) * self.scale)
            self._requeue(event, min(delay, max(0.2, self.max_age - age)))
            return
        self.stats["invoked"] += 1
        if self.on_invoked:
            self.on_invoked(self.spec.logical_id, event.source, event.payload, inv)
        if inv.ok:
            self.stats["succeeded"] += 1
            self._done()
            return
        event.attempts += 1
        if event.attempts <= self.spec.max_retry_attempts:
            self.stats["retried"] += 1
            self._requeue(event, max(0.2, 60.0 * event.attempts * self.scale))
            return
        self.stats["failed"] += 1
        self._failure(event, "RetriesExhausted", inv)
        self._done()

    def _failure(self, event: _AsyncEvent, condition: str, inv: Invocation | None) -> None:
        if not self.spec.on_failure:
            return
        record = {
            "version": "1.0",
            "timestamp": _now_iso(),
            "requestContext": {
                "requestId": inv.request_id if inv else str(uuid.uuid4()),
                "functionArn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.spec.name}:$LATEST",
                "condition": condition,
                "approximateInvokeCount": event.attempts,
            },
            "requestPayload": event.payload,
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST",
                                "functionError": "Unhandled" if inv else None},
            "responsePayload": inv.error if inv else None,
        }
        self.send_failure(self.spec.on_failure, record)


# --------------------------------------------------------------------------- SNS


@dataclass
class SnsSubscription:
    function: str
    topic_arn: str
    queue_url: str
    subscription_arn: str
    filter_policy: Any
    scope: str


class SnsDelivery:
    """Delivers SNS notifications to subscribed functions. Each subscription is an SQS queue subscribed
    in the emulator (with the template's filter policy); one thread polls them, checks the policy again
    with the local matcher, and submits one Lambda SNS event per message to the function's async queue."""

    def __init__(self, sqs: Any, invokers: dict[str, AsyncInvoker], poll_seconds: float = 0.1) -> None:
        self.sqs = sqs
        self.invokers = invokers
        self.subscriptions: list[SnsSubscription] = []
        self.poll_seconds = poll_seconds
        self.stats = {"delivered": 0, "filtered": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sns-delivery", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            busy = False
            for sub in self.subscriptions:
                try:
                    messages = self.sqs.receive_message(QueueUrl=sub.queue_url, MaxNumberOfMessages=10,
                                                        WaitTimeSeconds=0).get("Messages", [])
                except Exception as exc:  # the emulator is going away
                    if self._stop.is_set():
                        return
                    log.warning("SNS poll failed: %s", exc)
                    continue
                for message in messages:
                    busy = True
                    self._deliver(sub, json.loads(message["Body"]))
                if messages:
                    self.sqs.delete_message_batch(QueueUrl=sub.queue_url, Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)])
            if not busy:
                self._stop.wait(self.poll_seconds)

    def _deliver(self, sub: SnsSubscription, envelope: dict[str, Any]) -> None:
        attributes = envelope.get("MessageAttributes") or {}
        if not patterns.sns_policy_matches(sub.filter_policy, attributes, envelope.get("Message", ""), sub.scope):
            self.stats["filtered"] += 1
            return
        self.stats["delivered"] += 1
        event = {"Records": [{
            "EventSource": "aws:sns",
            "EventVersion": "1.0",
            "EventSubscriptionArn": sub.subscription_arn,
            "Sns": {
                "Type": envelope.get("Type", "Notification"),
                "MessageId": envelope.get("MessageId"),
                "TopicArn": envelope.get("TopicArn", sub.topic_arn),
                "Subject": envelope.get("Subject"),
                "Message": envelope.get("Message"),
                "Timestamp": envelope.get("Timestamp"),
                "SignatureVersion": envelope.get("SignatureVersion", "1"),
                "Signature": envelope.get("Signature", "EXAMPLE"),
                "SigningCertUrl": envelope.get("SigningCertURL", "EXAMPLE"),
                "UnsubscribeUrl": envelope.get("UnsubscribeURL", "EXAMPLE"),
                "MessageAttributes": {k: {"Type": v.get("Type"), "Value": v.get("Value")} for k, v in attributes.items()},
            },
        }]}
        self.invokers[sub.function].submit(event, "sns")


# --------------------------------------------------------------------------- DynamoDB streams


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    return value


def key_of(keys: dict[str, Any]) -> str:
    return json.dumps(_jsonable(keys), sort_keys=True)


class TtlRegistry:
    """Keys the TTL sweeper deleted, so their REMOVE stream records get the TTL service identity."""

    def __init__(self) -> None:
        self._keys: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def add(self, table: str, key: str) -> None:
        with self._lock:
            self._keys[(table, key)] = self._keys.get((table, key), 0) + 1

    def discard(self, table: str, key: str) -> bool:
        with self._lock:
            n = self._keys.get((table, key), 0)
            if not n:
                return False
            if n == 1:
                del self._keys[(table, key)]
            else:
                self._keys[(table, key)] = n - 1
            return True


def lambda_record(raw: dict[str, Any], stream_arn: str, ttl_delete: bool) -> dict[str, Any]:
    """A GetRecords record (boto3-parsed) in the shape Lambda delivers."""
    ddb = dict(_jsonable({k: v for k, v in raw["dynamodb"].items() if k != "ApproximateCreationDateTime"}))
    created = raw["dynamodb"].get("ApproximateCreationDateTime")
    if isinstance(created, dt.datetime):
        created = created.timestamp()
    ddb["ApproximateCreationDateTime"] = float(int(created)) if created is not None else float(int(time.time()))
    record = {
        "eventID": raw.get("eventID"),
        "eventName": raw.get("eventName"),
        "eventVersion": raw.get("eventVersion", "1.1"),
        "eventSource": "aws:dynamodb",
        "awsRegion": raw.get("awsRegion", REGION),
        "dynamodb": ddb,
        "eventSourceARN": stream_arn,
    }
    if ttl_delete:
        record["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    elif raw.get("userIdentity"):
        record["userIdentity"] = raw["userIdentity"]
    return record


class StreamReader:
    """Polls every shard of one table stream (GetRecords about 4 times a second, as Lambda's poller) and
    fans the records, in Lambda's shape, out to the mappings and observers."""

    def __init__(self, streams: Any, stream_arn: str, table: str, ttl: TtlRegistry, start: str = "LATEST",
                 poll_seconds: float = 0.25) -> None:
        self.client = streams
        self.arn = stream_arn
        self.table = table
        self.ttl = ttl
        self.poll_seconds = poll_seconds
        self.consumers: list[Callable[[list[dict[str, Any]]], None]] = []
        self.records_read = 0
        self._iterators: dict[str, str | None] = {}
        self._stop = threading.Event()
        for shard in streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]:
            self._iterators[shard["ShardId"]] = streams.get_shard_iterator(
                StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType=start)["ShardIterator"]
        self._thread = threading.Thread(target=self._loop, name="stream-reader", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            got = 0
            for shard, iterator in list(self._iterators.items()):
                if iterator is None:
                    continue
                try:
                    response = self.client.get_records(ShardIterator=iterator, Limit=1000)
                except Exception as exc:
                    if self._stop.is_set():
                        return
                    log.warning("GetRecords failed: %s", exc)
                    continue
                self._iterators[shard] = response.get("NextShardIterator")
                raw = response.get("Records", [])
                if not raw:
                    continue
                got += len(raw)
                records = []
                for r in raw:
                    ttl_delete = r.get("eventName") == "REMOVE" and self.ttl.discard(self.table, key_of(r["dynamodb"].get("Keys", {})))
                    records.append(lambda_record(r, self.arn, ttl_delete))
                self.records_read += len(records)
                for consume in self.consumers:
                    consume(records)
            if got < 100:
                self._stop.wait(self.poll_seconds)


class StreamMapping:
    """One DynamoDB event source mapping: FilterCriteria, BatchSize, MaximumBatchingWindowInSeconds,
    ReportBatchItemFailures, BisectBatchOnFunctionError, MaximumRetryAttempts, OnFailure destination.
    Batches go to the function one at a time (one shard, ParallelizationFactor 1), synchronously."""

    def __init__(self, function: str, pool: FunctionPool, props: dict[str, Any], time_scale: float,
                 send_failure: Callable[[str, dict[str, Any]], None], on_invoked: Invoked | None = None) -> None:
        self.function = function
        self.pool = pool
        self.stream_arn = props["Stream"]
        self.batch_size = int(props.get("BatchSize", 100))
        self.window = float(props.get("MaximumBatchingWindowInSeconds", 0)) * time_scale
        self.filters = [f["Pattern"] for f in ((props.get("FilterCriteria") or {}).get("Filters") or [])]
        for f in self.filters:
            patterns.parse(f)  # fail at start on a pattern the matcher cannot read
        self.report_failures = "ReportBatchItemFailures" in (props.get("FunctionResponseTypes") or [])
        self.bisect = bool(props.get("BisectBatchOnFunctionError", False))
        self.max_retries = int(props.get("MaximumRetryAttempts", -1))
        self.on_failure = ((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        self.enabled = props.get("Enabled", True) not in (False, "false", "False")
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
        self._thread = threading.Thread(target=self._loop, name=f"esm-{function}", daemon=True)
        self._thread.start()

    def consume(self, records: list[dict[str, Any]]) -> None:
        if not self.enabled:
            return
        kept = [r for r in records if patterns.matches_any(self.filters, r)]
        with self._cond:
            self.stats["records_in"] += len(records)
            self.stats["filtered_out"] += len(records) - len(kept)
            if kept:
                if not self._buffer:
                    self._first_at = time.monotonic()
                self._buffer.extend(kept)
                self._cond.notify()

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
                self._in_flight = len(batch)
            try:
                self._deliver(batch)
            finally:
                with self._cond:
                    self._in_flight = 0

    def _deliver(self, batch: list[dict[str, Any]]) -> None:
        work = [(batch, 0)]
        while work and not self._stop:
            records, retries = work.pop(0)
            inv = self.pool.try_invoke({"Records": records})
            if inv.throttled:
                self.stats["throttled"] += 1
                time.sleep(0.2)
                work.insert(0, (records, retries))
                continue
            self.stats["batches"] += 1
            if self.on_invoked:
                self.on_invoked(self.function, "dynamodb", {"Records": records}, inv)
            failed_from = self._failed_from(records, inv)
            if failed_from is None:
                self.stats["records_delivered"] += len(records)
                continue
            if inv.ok:
                self.stats["partial_failures"] += 1
                self.stats["records_delivered"] += failed_from
                records = records[failed_from:]
            if self.max_retries >= 0 and retries >= self.max_retries:
                self._to_destination(records, inv)
                continue
            self.stats["retries"] += 1
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
        self.stats["to_destination"] += 1
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
            "timestamp": _now_iso(),
            "DDBStreamBatchInfo": {
                "shardId": "local", "startSequenceNumber": first["dynamodb"].get("SequenceNumber"),
                "endSequenceNumber": last["dynamodb"].get("SequenceNumber"),
                "approximateArrivalOfFirstRecord": first["dynamodb"].get("ApproximateCreationDateTime"),
                "approximateArrivalOfLastRecord": last["dynamodb"].get("ApproximateCreationDateTime"),
                "batchSize": len(records), "streamArn": self.stream_arn,
            },
        })


# --------------------------------------------------------------------------- schedules

_RATE = re.compile(r"^rate\(\s*(\d+)\s+(second|seconds|minute|minutes|hour|hours|day|days)\s*\)$")
_UNIT = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}


def rate_seconds(expression: str) -> float:
    """rate(5 minutes) -> 300. (cron() expressions are not supported locally.)"""
    match = _RATE.match(expression.strip())
    if not match:
        raise ValueError(f"schedule {expression!r}: only rate(N unit) is supported by the local engine")
    return int(match.group(1)) * _UNIT[match.group(2).rstrip("s")]


class Schedule:
    """An EventBridge rule with a rate: every period (scaled) an asynchronous invocation, with the rule's
    Input if it has one, else a scheduled event."""

    def __init__(self, name: str, function: str, props: dict[str, Any], time_scale: float, invoker: AsyncInvoker) -> None:
        self.name = name
        self.function = function
        self.period = rate_seconds(str(props["Schedule"])) * time_scale
        state = props.get("State")
        enabled = props.get("Enabled", True)
        self.enabled = (str(state).upper() != "DISABLED") if state is not None else enabled not in (False, "false")
        self.input = props.get("Input")
        self.invoker = invoker
        self.fired = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"schedule-{name}", daemon=True)

    def start(self) -> None:
        if self.enabled:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def event(self) -> Any:
        if self.input is not None:
            return json.loads(self.input) if isinstance(self.input, str) else self.input
        return {
            "version": "0", "id": str(uuid.uuid4()), "detail-type": "Scheduled Event", "source": "aws.events",
            "account": ACCOUNT, "time": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "region": REGION,
            "resources": [f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{self.name}"], "detail": {},
        }

    def _loop(self) -> None:
        next_at = time.monotonic() + self.period
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            self.fired += 1
            self.invoker.submit(self.event(), "schedule")
            next_at += self.period


# --------------------------------------------------------------------------- TTL


class TtlSweeper:
    """DynamoDB TTL, late: items whose TTL attribute (epoch seconds) is more than ``lateness`` seconds in
    the past are deleted (conditionally, so an item updated meanwhile is left alone); the keys are
    registered first so the stream's REMOVE records carry the TTL service identity."""

    def __init__(self, ddb: Any, table: str, key_names: list[str], attribute: str, registry: TtlRegistry,
                 lateness: float = 2.0, interval: float = 1.0) -> None:
        self.ddb = ddb
        self.table = table
        self.keys = key_names
        self.attribute = attribute
        self.registry = registry
        self.lateness = lateness
        self.interval = interval
        self.deleted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"ttl-{table}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def sweep(self) -> int:
        cutoff = str(int(time.time() - self.lateness))
        names = {"#ttl": self.attribute, **{f"#k{i}": k for i, k in enumerate(self.keys)}}
        kwargs: dict[str, Any] = {
            "TableName": self.table, "FilterExpression": "#ttl < :cutoff",
            "ProjectionExpression": ", ".join(["#ttl", *(f"#k{i}" for i in range(len(self.keys)))]),
            "ExpressionAttributeNames": names, "ExpressionAttributeValues": {":cutoff": {"N": cutoff}},
        }
        deleted = 0
        while True:
            page = self.ddb.scan(**kwargs)
            for item in page.get("Items", []):
                if self._stop.is_set():
                    return deleted
                key = {k: item[k] for k in self.keys}
                marker = key_of(key)
                self.registry.add(self.table, marker)
                try:
                    self.ddb.delete_item(TableName=self.table, Key=key, ConditionExpression="#ttl < :cutoff",
                                         ExpressionAttributeNames={"#ttl": self.attribute},
                                         ExpressionAttributeValues={":cutoff": {"N": cutoff}})
                    deleted += 1
                except self.ddb.exceptions.ConditionalCheckFailedException:
                    self.registry.discard(self.table, marker)
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        self.deleted += deleted
        return deleted

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sweep()
            except Exception as exc:
                if self._stop.is_set():
                    return
                log.warning("TTL sweep failed: %s", exc)
