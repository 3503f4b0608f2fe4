"""The local engine: an emulator, the template's resources, the functions' sandboxes, and the wiring."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, Self

import boto3
from botocore.config import Config

from local.delivery.async_invoker import AsyncInvoker
from local.delivery.change_feed import ChangeFeed
from local.delivery.destinations import Destinations
from local.delivery.one_time_schedules import OneTimeSchedules
from local.delivery.sandbox import FunctionPool, Invocation
from local.delivery.schedules import Schedule
from local.delivery.sns_subscriptions import SnsDelivery, SnsSubscription
from local.delivery.stream_mapping import StreamMapping
from local.delivery.stream_reader import StreamReader
from local.delivery.ttl import TtlRegistry, TtlSweeper
from local.emulator.server import Emulator, exempt_from_faults
from local.engine.observer import Observer
from local.faults.faults import NEVER, Faults, FaultsError
from local.template.template import REGION, FunctionSpec, Template

log = logging.getLogger("local.engine")


class Seeder(Protocol):
    """Fills a newly created table or queue with saved state (``local/engine/persist.py``); returns how much it put."""

    def seed_table(self, ddb: Any, logical: str, table: str) -> int: ...

    def seed_queue(self, sqs: Any, logical: str, url: str) -> int: ...
REPO = Path(__file__).resolve().parents[2]
UNRESERVED_CONCURRENCY = 10  # local cap for functions without ReservedConcurrentExecutions


class Engine:
    def __init__(self, template: str | Path = REPO / "template.yaml", overrides: dict[str, Any] | None = None, *,
                 endpoint_url: str | None = None, time_scale: float = 1.0, ttl_lateness: float = 2.0,
                 ttl_interval: float = 1.0, log_file: str | Path | None = None, schedules: bool = True,
                 stack: str = "taskqueue-local", faults: Faults | None = None, emulator: Emulator | None = None,
                 seeder: Seeder | None = None, scale_clocks: bool = False, one_time_schedules: bool = True,
                 change_feed: bool = True) -> None:
        """``emulator``: a configured, not yet started Emulator to run instead of the default one (the local stack
        gives a fixed port and its Lambda API). ``seeder``: puts saved items and messages into each table and queue
        right after it is created, before its stream is read (``local/engine/persist.py``). ``scale_clocks``: the functions'
        own clocks run 1/time_scale as fast too (``local/delivery/sandbox.py``), so durations the handlers read (Timeout, a
        runner's run, leases) pass as fast as the platform's; the TTL sweeper keeps that time. ``one_time_schedules``: fire
        the EventBridge Scheduler ``at()`` schedules the functions create (``local/delivery/one_time_schedules.py``).
        ``change_feed``: the pollers wait for the emulator's changes instead of asking at their cadence when idle
        (``local/delivery/change_feed.py``; False: they ask, as a poller of an endpoint without the feed does)."""
        self.template_path = Path(template)
        self.overrides = dict(overrides or {})
        self.endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL")
        self.time_scale = time_scale
        # (scale, epoch) of the functions' clocks; the epoch is now, shared by every sandbox.
        self.clock = (time_scale, time.time()) if scale_clocks and time_scale != 1.0 else None
        # Faults (local/faults/faults.py): the emulator's share, and the TTL lateness ("never": no sweeper runs).
        self.faults = faults or Faults()
        if self.faults.needs_server and self.endpoint_url:
            raise FaultsError("faults other than ttl_lateness act inside the embedded emulator: "
                             "they cannot be used with --endpoint-url / AWS_ENDPOINT_URL")
        self.ttl_lateness = self.faults.ttl_lateness_seconds(ttl_lateness)
        self.ttl_interval = ttl_interval
        self.log_file = Path(log_file) if log_file else None
        self.run_schedules = schedules
        self.stack = stack
        self.emulator: Emulator | None = emulator
        self.seeder = seeder
        self.observer = Observer()
        self.functions: dict[str, FunctionSpec] = {}
        self.skipped: dict[str, str] = {}
        self.pools: dict[str, FunctionPool] = {}
        self.invokers: dict[str, AsyncInvoker] = {}
        self.mappings: list[StreamMapping] = []
        self.readers: dict[str, StreamReader] = {}
        self.schedules: list[Schedule] = []
        self.run_one_time = one_time_schedules
        self.one_time: OneTimeSchedules | None = None
        self.sweepers: list[TtlSweeper] = []
        self.sns: SnsDelivery | None = None
        self.use_change_feed = change_feed
        self.changes: ChangeFeed | None = None
        self.ttl = TtlRegistry()
        self.invocations: list[dict[str, Any]] = []
        self.listeners: list[Callable[[str, str, Any, Invocation], None]] = []
        self._inv_lock = threading.Lock()
        self._log_lock = threading.Lock()
        self._log_handle: Any = None
        self.started_at = 0.0

    # ------------------------------------------------------------------ start / stop

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, service: str) -> Any:
        """A client of the engine's own (stream reader, TTL sweeper, SNS delivery, checks): never faulted."""
        return exempt_from_faults(boto3.client(
            service, endpoint_url=self.endpoint_url, region_name=REGION, aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=20)))

    def start(self) -> Engine:
        if self.emulator is not None:
            if self.faults.needs_server:
                self.emulator.initial_faults = self.faults
            self.endpoint_url = self.emulator.start()
        elif not self.endpoint_url:
            self.emulator = Emulator(faults=self.faults if self.faults.needs_server else None)
            self.endpoint_url = self.emulator.start()
        if self.log_file:
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            self._log_handle = self.log_file.open("a", buffering=1)
        self.ddb, self.streams, self.sns_client, self.sqs = (self.client(s) for s in ("dynamodb", "dynamodbstreams", "sns", "sqs"))
        self.changes = ChangeFeed(self.endpoint_url).start() if self.use_change_feed and self.endpoint_url else None
        self.destinations = Destinations(self.sqs, self.sns_client)
        self.template = Template(self.template_path, self.overrides, stack=self.stack)
        self._create_resources()
        self._create_functions()
        self._wire()
        self.started_at = time.time()
        self.observer.started = self.started_at
        for reader in self.readers.values():
            reader.start()
        if self.sns:
            self.sns.start()
        if self.faults.ttl_lateness != NEVER:
            for sweeper in self.sweepers:
                sweeper.start()
        if self.run_schedules:
            self.start_schedules()
        if self.run_one_time:
            self.one_time = OneTimeSchedules(self.client("scheduler"), self._submit_to, self.now, self.time_scale,
                                             self.changes)
            self.one_time.start()
        return self

    def start_schedules(self) -> None:
        for schedule in self.schedules:
            if not schedule.started:
                schedule.start()

    def stop_schedules(self) -> None:
        for schedule in self.schedules:
            schedule.stop()

    def stop(self) -> None:
        self.stop_schedules()
        if self.one_time:
            self.one_time.stop()
        for part in [*self.sweepers, *self.readers.values(), *self.mappings, *self.invokers.values()]:
            part.stop()
        if self.sns:
            self.sns.stop()
        if self.changes:
            self.changes.stop()
        for pool in self.pools.values():
            pool.close()
        if self.emulator:
            self.emulator.stop()
        if self._log_handle:
            self._log_handle.close()
            self._log_handle = None

    # ------------------------------------------------------------------ resources

    def _create_resources(self) -> None:
        t = self.template
        for logical, props in t.of_type("AWS::DynamoDB::Table").items():
            name = t.resolver.refs[logical]
            request: dict[str, Any] = {
                "TableName": name, "AttributeDefinitions": props["AttributeDefinitions"], "KeySchema": props["KeySchema"],
                "BillingMode": props.get("BillingMode", "PROVISIONED"),
            }
            if request["BillingMode"] == "PROVISIONED":
                request["ProvisionedThroughput"] = props.get("ProvisionedThroughput") or {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}
            for key in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
                if props.get(key):
                    request[key] = [_index(i, request["BillingMode"]) for i in props[key]]
            stream = props.get("StreamSpecification")
            if stream:
                request["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
            description = self.ddb.create_table(**request)["TableDescription"]
            if stream:
                t.resolver.attrs[f"{logical}.StreamArn"] = description["LatestStreamArn"]
            ttl = props.get("TimeToLiveSpecification") or {}
            if ttl.get("Enabled") in (True, "true"):
                self.ddb.update_time_to_live(TableName=name, TimeToLiveSpecification={
                    "Enabled": True, "AttributeName": ttl["AttributeName"]})
                keys = [k["AttributeName"] for k in props["KeySchema"]]
                # TTL "never" (faults): the sweeper is not started (and would delete nothing before 1970 + 10^9 s).
                lateness = self.ttl_lateness if self.ttl_lateness != float("inf") else 1e9
                self.sweepers.append(TtlSweeper(self.ddb, name, keys, ttl["AttributeName"], self.ttl,
                                                lateness, self.ttl_interval, self.now))
            # Seeded items are the stack's state from before, not new writes: their stream records are skipped.
            seeded = self.seeder.seed_table(self.ddb, logical, name) if self.seeder else 0
            if stream:
                reader = StreamReader(self.streams, description["LatestStreamArn"], name, self.ttl,
                                      "LATEST" if seeded else "TRIM_HORIZON", changes=self.changes)
                reader.consumers.append(self.observer.consume)
                self.readers[description["LatestStreamArn"]] = reader
        for logical in t.of_type("AWS::SNS::Topic"):
            arn = self.sns_client.create_topic(Name=t.resolver.attrs[f"{logical}.TopicName"])["TopicArn"]
            t.resolver.refs[logical] = arn
        for logical in t.of_type("AWS::Scheduler::ScheduleGroup"):  # where the queues' one-time wake-ups live
            self.client("scheduler").create_schedule_group(Name=t.resolver.refs[logical])
        for logical, props in t.of_type("AWS::SQS::Queue").items():
            attributes = {k: str(v) for k, v in props.items()
                          if k in ("MessageRetentionPeriod", "VisibilityTimeout", "DelaySeconds", "MaximumMessageSize",
                                   "ReceiveMessageWaitTimeSeconds")}
            url = self.sqs.create_queue(QueueName=t.resolver.attrs[f"{logical}.QueueName"], Attributes=attributes)["QueueUrl"]
            t.resolver.refs[logical] = url
            t.resolver.attrs[f"{logical}.QueueUrl"] = url
            if self.seeder:
                self.seeder.seed_queue(self.sqs, logical, url)

    def _create_functions(self) -> None:
        for logical, spec in self.template.functions().items():
            module = spec.handler.rpartition(".")[0].replace(".", "/")
            if not (spec.code_dir / f"{module}.py").exists():
                self.skipped[logical] = f"{spec.code_dir}/{module}.py is missing"
                log.warning("skipping %s: %s", logical, self.skipped[logical])
                continue
            self.functions[logical] = spec
            limit = spec.reserved_concurrency if spec.reserved_concurrency is not None else UNRESERVED_CONCURRENCY
            self.pools[logical] = FunctionPool(spec, self.endpoint_url or "", limit, self._log_line, self.clock)
            self.invokers[logical] = AsyncInvoker(self.pools[logical], spec, self.time_scale, self._send_failure,
                                                  self._invoked)

    def _wire(self) -> None:
        subscriptions: list[SnsSubscription] = []
        for logical, spec in self.functions.items():
            for event_name, event in spec.events.items():
                kind, props = event.get("Type"), event.get("Properties") or {}
                if kind == "SNS":
                    subscriptions.append(self._subscribe(logical, event_name, props))
                elif kind == "DynamoDB":
                    mapping = StreamMapping(logical, self.pools[logical], props, self.time_scale, self._send_failure,
                                            self._invoked)
                    reader = self.readers.get(props["Stream"])
                    if reader is None:
                        raise ValueError(f"{logical}.{event_name}: stream {props['Stream']} is not a table stream of this template")
                    reader.consumers.append(mapping.consume)
                    self.mappings.append(mapping)
                elif kind in ("Schedule", "ScheduleV2"):
                    self.schedules.append(Schedule(f"{logical}-{event_name}", logical, props, self.time_scale,
                                                   self.invokers[logical]))
                else:
                    log.warning("%s.%s: event type %s is not emulated locally", logical, event_name, kind)
        self.sns = SnsDelivery(self.sqs, self.invokers, changes=self.changes)
        self.sns.subscriptions = subscriptions

    def _subscribe(self, function: str, event_name: str, props: dict[str, Any]) -> SnsSubscription:
        queue_name = f"{self.stack}-sns-{function}-{event_name}"[:80]
        url = self.sqs.create_queue(QueueName=queue_name)["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        # Unfiltered in the emulator: the filter policy is applied by the engine's matcher alone (local/template/filter_patterns.py),
        # which reads every operator SNS has (moto's own filtering misses some, e.g. equals-ignore-case).
        sub_arn = self.sns_client.subscribe(TopicArn=props["Topic"], Protocol="sqs", Endpoint=arn,
                                            Attributes={"RawMessageDelivery": "false"},
                                            ReturnSubscriptionArn=True)["SubscriptionArn"]
        return SnsSubscription(function, props["Topic"], url, sub_arn, props.get("FilterPolicy"),
                               props.get("FilterPolicyScope", "MessageAttributes"))

    # ------------------------------------------------------------------ callbacks

    def _send_failure(self, destination: str, record: dict[str, Any]) -> None:
        self.destinations.send(destination, record)

    @property
    def failures_sent(self) -> int:
        """Records sent to on-failure destinations so far."""
        destinations = getattr(self, "destinations", None)
        return destinations.sent if destinations else 0

    def _invoked(self, function: str, source: str, event: Any, inv: Invocation) -> None:
        entry = {"t": time.time() - self.started_at, "function": function, "source": source, "ok": inv.ok,
                 "duration": round(inv.duration, 3), "timed_out": inv.timed_out, "cold_start": inv.cold_start,
                 "result": inv.result if isinstance(inv.result, dict) else None,
                 "error": (inv.error or {}).get("errorType") if not inv.ok else None}
        with self._inv_lock:
            self.invocations.append(entry)
        for listener in self.listeners:
            listener(function, source, event, inv)

    def _log_line(self, function: str, line: str) -> None:
        if self._log_handle:
            with self._log_lock:
                self._log_handle.write(f"{function} {line}\n")

    # ------------------------------------------------------------------ use

    def now(self) -> float:
        """The functions' time (epoch seconds): the real time, or their scaled clock's (``scale_clocks``)."""
        if self.clock is None:
            return time.time()
        scale, epoch = self.clock
        return epoch + (time.time() - epoch) / scale

    def resolve_function(self, name: str) -> str:
        """A logical id, a code directory name (functions/<dir>) or a physical name -> the logical id."""
        for logical, spec in self.functions.items():
            if name in (logical, spec.dir_name, spec.name, f"functions/{spec.dir_name}", f"functions/{spec.dir_name}/"):
                return logical
        if name in self.skipped:
            raise KeyError(f"{name} is skipped: {self.skipped[name]}")
        raise KeyError(f"no function {name!r}; known: {', '.join(self.functions)}")

    def prewarm(self, function: str, count: int) -> int:
        """Start ``count`` execution environments of a function before the traffic (a scenario's steady state):
        how many are idle and ready."""
        return self.pools[self.resolve_function(function)].prewarm(count)

    def invoke(self, function: str, event: Any) -> Invocation:
        """A synchronous (RequestResponse) invocation, as Lambda serves one: run now if the function has a free
        slot, else refused at once (``inv.throttled``, error ``TooManyRequestsException``, HTTP 429; counted as
        a throttle; nothing ran). It never waits for a slot: retrying is the caller's business, as with the SDK.
        The slots are ``ReservedConcurrentExecutions``, or the local cap for unreserved functions, which stands
        in for the account's concurrency."""
        logical = self.resolve_function(function)
        inv = self.pools[logical].try_invoke(event)
        if not inv.throttled:
            self._invoked(logical, "direct", event, inv)
        return inv

    def _submit_to(self, function_arn: str, event: Any) -> bool:
        """An asynchronous invocation of the function an ARN names (a schedule's target); ``False``: none of ours."""
        name = function_arn.split(":function:", 1)[-1].split(":", 1)[0]
        try:
            logical = self.resolve_function(name)
        except KeyError:
            return False
        self.invokers[logical].submit(event, "scheduler")
        return True

    def invoke_async(self, function: str, event: Any) -> None:
        self.invokers[self.resolve_function(function)].submit(event, "direct")

    def busy(self) -> bool:
        """Is anything still on its way (buffered stream records, queued or running invocations)?"""
        return (any(m.pending() for m in self.mappings) or any(i.pending() for i in self.invokers.values())
                or any(p.busy for p in self.pools.values()))

    def stats(self) -> dict[str, Any]:
        functions = {}
        for logical, pool in self.pools.items():
            functions[logical] = {**pool.stats, "async": dict(self.invokers[logical].stats)}
        return {
            "functions": functions,
            "skipped": self.skipped,
            "stream_mappings": [{"function": m.function, **m.stats} for m in self.mappings],
            "sns": dict(self.sns.stats) if self.sns else {},
            "schedules": {s.name: {"period_seconds": s.period, "enabled": s.enabled, "fired": s.fired} for s in self.schedules},
            "one_time_schedules_fired": len(self.one_time.fired) if self.one_time else 0,
            "ttl_deleted": sum(s.deleted for s in self.sweepers),
            "failures_sent_to_destinations": self.failures_sent,
        }

    def fault_report(self) -> dict[str, Any]:
        """The faults in force and what they did: the emulator's counters, TTL deletions, Lambda 429s."""
        report: dict[str, Any] = {"setting": self.faults.to_dict(), "description": self.faults.describe()}
        if self.emulator is not None and self.emulator.proc is not None:
            report["emulator"] = self.emulator.fault_report()
        report["ttl"] = {"lateness_seconds": None if self.faults.ttl_lateness == NEVER else self.ttl_lateness,
                         "deleted": sum(s.deleted for s in self.sweepers)}
        report["lambda_throttles"] = {name: pool.stats["throttles"] for name, pool in self.pools.items()}
        return report

    def wait_for(self, condition: Callable[[], bool], timeout: float, interval: float = 0.2) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return True
            time.sleep(interval)
        return condition()


def _index(index: dict[str, Any], billing: str) -> dict[str, Any]:
    out = {k: v for k, v in index.items() if k in ("IndexName", "KeySchema", "Projection")}
    if billing == "PROVISIONED" and "ProvisionedThroughput" in index:
        out["ProvisionedThroughput"] = index["ProvisionedThroughput"]
    return out
