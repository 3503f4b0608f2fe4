"""What an idle stack costs a month: no task at all, the template's defaults (or given parameters), storage aside.

    .venv/bin/python bench/idle_cost.py                  # the table, on-demand and BillingMode=PROVISIONED
    .venv/bin/python bench/idle_cost.py --json           # one JSON line as well (what bench/run.py reads)
    .venv/bin/python bench/idle_cost.py -p SafetyNetScheduleRate="rate(5 minutes)" -p DashboardEnabled=true

Over 400 lines: the model reads the template itself (its parameters, conditions and the few intrinsics a price
depends on), measures an idle run and prices the month, so that one file reruns the whole figure.

Two parts, kept apart:

- **running**: what an idle stack does by itself, per month (730 h): every enabled schedule's invocations (the
  safety net's at ``SafetyNetScheduleRate``; CreateTasks' only when ``CreateTasksScheduleState`` is ENABLED, off by
  default), each billed as a Lambda request plus GB-seconds at the function's MemorySize and architecture; the
  DynamoDB read and write units of each safety-net run; the CloudWatch Logs ingestion of what each run logs; an
  X-Ray trace per run when the function's Tracing is Active (every run is sampled at one run a minute: the default
  sampling rule keeps the first request of each second). With ``BillingMode=PROVISIONED`` the DynamoDB units are
  inside the provisioned capacity instead, and the least capacity of every table and index (auto scaling's
  minimum, what an idle table scales in to) is billed every hour.
- **fixed fees**: what exists and is billed whether or not anything runs: CloudWatch alarms (per alarm metric:
  a metric-math alarm is billed for each metric it reads), dashboards, KMS customer managed keys, custom metrics
  (each metric name + dimension set an idle stack emits), and, with PROVISIONED, the CloudWatch alarms that target
  tracking auto scaling creates for each scaling policy (``AUTO_SCALING_ALARMS_PER_POLICY``; auto scaling itself
  is free, its alarms are not).

Measured, not assumed (``measure``): the Trigger function's safety-net path (its real handler, ``lambda_handler``
with a scheduled event) runs ``--runs`` times on an idle queue table in moto (in-process, ``moto.mock_aws``), with
bench/cost_meter.py on its DynamoDB client (the project's billing-rule meter; moto is one of the engines its docs
name). From those runs: the median **wall time** of an invocation, a stand-in for Lambda's billed duration (on
this machine and moto, not on Lambda: the real duration differs, DynamoDB's latency in AWS is a few ms a request,
and a cold start adds its init time once per execution environment); the read and write units and requests per
run; the bytes the run logs (the handler's own lines at the template's LogLevel, plus Lambda's START / END /
REPORT lines, reconstructed in their documented form, plus CloudWatch Logs' 26 bytes per event); and the EMF
metrics it emits (the first run is a cold start, so its ColdStart metric is seen).

Prices: bench/dollars.py (``PRICES``, ``PROVISIONED_PRICES``, ``MONTHLY_FEES``), us-east-1 list prices, not re-checked
(no network). Free tiers are left out (see ``FREE_TIERS_NOT_APPLIED``): a small account pays less.

Reads template.yaml itself (PyYAML with CloudFormation's short tags), so it does not depend on local/.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import re
import statistics
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for _path in (str(ROOT), str(ROOT / "layers" / "taskqueue")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import yaml  # noqa: E402

from bench.dollars import MONTHLY_FEES, PRICES, PRICES_AS_OF, PROVISIONED_PRICES, REGION, USAGE_PRICES  # noqa: E402

HOURS_PER_MONTH = 730.0
SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600
# The target for an idle stack on the template's defaults.
TARGET_DOLLARS_PER_MONTH = 0.50
# Target tracking auto scaling of a DynamoDB table or index creates four CloudWatch alarms per scaling policy
# (AlarmHigh, AlarmLow, ProvisionedCapacityHigh, ProvisionedCapacityLow, as the console lists them); they are billed
# as standard alarms. Not checked against a real account here.
AUTO_SCALING_ALARMS_PER_POLICY = 4
# CloudWatch Logs counts 26 bytes per event on top of the message (PutLogEvents' size rule); counted as ingested.
LOG_EVENT_OVERHEAD_BYTES = 26
FREE_TIERS_NOT_APPLIED = (
    "Lambda 1M requests + 400,000 GB-s a month", "X-Ray 100,000 traces a month", "CloudWatch 10 alarm metrics, "
    "10 custom metrics, 3 dashboards (up to 50 metrics each) and 5 GB of log ingestion a month",
    "DynamoDB 25 WCU + 25 RCU of provisioned capacity per region", "SQS and SNS first million requests",
)


# ==== the template =======================================================================================


class _CfnLoader(yaml.SafeLoader):
    """PyYAML's safe loader with CloudFormation's short tags (!Ref x -> {"Ref": x}, !GetAtt a.b -> {"Fn::GetAtt":
    [a, b]}, !Sub / !If / ... -> {"Fn::Sub": ...})."""


def _cfn_tag(loader: Any, suffix: str, node: Any) -> Any:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "GetAtt" and isinstance(value, str):
        return {"Fn::GetAtt": value.split(".", 1)}
    if suffix == "Condition":
        return {"Condition": value}
    return {f"Fn::{suffix}": value}


_CfnLoader.add_multi_constructor("!", _cfn_tag)


def load_template(path: Path = ROOT / "template.yaml") -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=_CfnLoader)  # noqa: S506 - a SafeLoader subclass


class Resolver:
    """Parameters (defaults, then overrides), Conditions, and the intrinsic functions the cost model meets."""

    def __init__(self, template: Mapping[str, Any], overrides: Mapping[str, str] | None = None) -> None:
        self.template = template
        params = template.get("Parameters") or {}
        unknown = set(overrides or {}) - set(params)
        if unknown:
            raise ValueError(f"not parameters of the template: {sorted(unknown)}")
        self.params = {name: str(p.get("Default", "")) for name, p in params.items()}
        self.params.update({k: str(v) for k, v in (overrides or {}).items()})
        self._conditions: dict[str, bool] = {}

    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            self._conditions[name] = bool(self.value(self.template["Conditions"][name]))
        return self._conditions[name]

    def enabled(self, entry: Mapping[str, Any]) -> bool:
        cond = entry.get("Condition")
        return cond is None or self.condition(cond)

    def value(self, node: Any) -> Any:  # noqa: PLR0911 - one return per intrinsic
        if isinstance(node, list):
            return [self.value(x) for x in node]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            (key, arg), = node.items()
            if key == "Ref":
                if arg in self.params:
                    return self.params[arg]
                return None if arg == "AWS::NoValue" else f"<{arg}>"
            if key == "Condition":
                return self.condition(arg)
            if key == "Fn::If":
                name, yes, no = arg
                return self.value(yes if self.condition(name) else no)
            if key == "Fn::Equals":
                a, b = (self.value(x) for x in arg)
                return str(a) == str(b)
            if key == "Fn::Not":
                return not self.value(arg[0])
            if key == "Fn::And":
                return all(self.value(x) for x in arg)
            if key == "Fn::Or":
                return any(self.value(x) for x in arg)
            if key == "Fn::Join":
                sep, items = arg
                items = self.value(items)
                return sep.join(str(x) for x in (items if isinstance(items, list) else [items]))
            if key == "Fn::Split":
                sep, text = arg
                return str(self.value(text)).split(sep)
            if key == "Fn::Select":
                index, items = arg
                return self.value(items)[int(self.value(index))]
            if key.startswith("Fn::"):
                return f"<{key}>"  # GetAtt, Sub, ...: a name or an ARN, never a number the model needs
        return {k: self.value(v) for k, v in node.items()}

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        return {name: res for name, res in self.template["Resources"].items()
                if res.get("Type") == kind and self.enabled(res)}


def rate_seconds(expression: str) -> float:
    """The period of an EventBridge ``rate(N unit)`` expression, in seconds."""
    match = re.fullmatch(r"\s*rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)\s*", expression)
    if not match:
        raise ValueError(f"only rate(...) schedules are modelled, not {expression!r}")
    unit = match.group(2).rstrip("s")
    return int(match.group(1)) * {"minute": 60, "hour": 3600, "day": 86400}[unit]


@dataclass(frozen=True)
class Schedule:
    function: str
    event: str
    period_seconds: float
    memory_mb: int
    architecture: str
    traced: bool

    @property
    def invocations_per_month(self) -> float:
        return SECONDS_PER_MONTH / self.period_seconds


@dataclass(frozen=True)
class Capacity:
    """Provisioned throughput of a table or an index (its least, under auto scaling)."""

    name: str
    read_units: float
    write_units: float


@dataclass
class Inventory:
    """What the template, with these parameters, deploys that costs something idle."""

    billing_mode: str
    schedules: list[Schedule]
    alarms: dict[str, int]  # alarm -> billed alarm metrics
    dashboards: list[str]
    kms_keys: list[str]
    topics: list[str]
    queues: list[str]
    capacities: list[Capacity] = field(default_factory=list)
    scaling_policies: list[str] = field(default_factory=list)


def _alarm_metrics(props: Mapping[str, Any]) -> int:
    """Alarm metrics CloudWatch bills: 1 for a single-metric alarm, one per metric a metric-math alarm reads."""
    metrics = props.get("Metrics")
    if not metrics:
        return 1
    return sum(1 for m in metrics if "MetricStat" in m) or 1


def inventory(resolver: Resolver) -> Inventory:
    tpl = resolver.template
    glob = (tpl.get("Globals") or {}).get("Function") or {}
    schedules: list[Schedule] = []
    for name, fn in resolver.resources("AWS::Serverless::Function").items():
        props = fn.get("Properties") or {}
        memory = int(resolver.value(props.get("MemorySize", glob.get("MemorySize", 128))))
        arch = (resolver.value(props.get("Architectures", glob.get("Architectures", ["x86_64"]))) or ["x86_64"])[0]
        traced = resolver.value(props.get("Tracing", glob.get("Tracing", "PassThrough"))) == "Active"
        for event_name, event in (props.get("Events") or {}).items():
            if event.get("Type") != "Schedule":
                continue
            ep = event.get("Properties") or {}
            state = resolver.value(ep.get("State", "ENABLED"))
            enabled = resolver.value(ep.get("Enabled", True))
            if state == "DISABLED" or enabled in (False, "false", "False"):
                continue
            schedules.append(Schedule(name, event_name, rate_seconds(str(resolver.value(ep["Schedule"]))), memory, arch, traced))
    alarms = {name: _alarm_metrics(res.get("Properties") or {})
              for name, res in resolver.resources("AWS::CloudWatch::Alarm").items()}
    billing = "PAY_PER_REQUEST"
    capacities: list[Capacity] = []
    for name, res in resolver.resources("AWS::DynamoDB::Table").items():
        props = res["Properties"]
        billing = resolver.value(props.get("BillingMode", "PROVISIONED"))
        if billing != "PROVISIONED":
            continue
        holders = [(name, props.get("ProvisionedThroughput"))]
        holders += [(f"{name}/{g['IndexName']}", g.get("ProvisionedThroughput")) for g in props.get("GlobalSecondaryIndexes") or []]
        for holder, throughput in holders:
            t = resolver.value(throughput) or {}
            capacities.append(Capacity(holder, float(t.get("ReadCapacityUnits", 0)), float(t.get("WriteCapacityUnits", 0))))
    # Auto scaling keeps at least each target's MinCapacity: an idle table scales in to it, not below.
    for res in resolver.resources("AWS::ApplicationAutoScaling::ScalableTarget").values():
        props = resolver.value(res["Properties"])
        resource = str(props["ResourceId"]).split("/")
        holder = next((c for c in capacities if c.name.split("/")[0] in props["ResourceId"]
                       and (len(resource) < 4 or c.name.endswith("/" + resource[-1]))
                       and (len(resource) >= 4 or "/" not in c.name)), None)
        if holder is None:
            continue
        least = float(props["MinCapacity"])
        i = capacities.index(holder)
        if props["ScalableDimension"].endswith("ReadCapacityUnits"):
            capacities[i] = Capacity(holder.name, least, holder.write_units)
        else:
            capacities[i] = Capacity(holder.name, holder.read_units, least)
    policies = [name for name, res in resolver.resources("AWS::ApplicationAutoScaling::ScalingPolicy").items()
                if resolver.value(res["Properties"].get("PolicyType")) == "TargetTrackingScaling"]
    return Inventory(
        billing_mode=billing,
        schedules=schedules,
        alarms=alarms,
        dashboards=list(resolver.resources("AWS::CloudWatch::Dashboard")),
        kms_keys=list(resolver.resources("AWS::KMS::Key")),
        topics=list(resolver.resources("AWS::SNS::Topic")),
        queues=list(resolver.resources("AWS::SQS::Queue")),
        capacities=capacities,
        scaling_policies=policies,
    )


# ==== measuring one safety-net run ===================================================================


@dataclass(frozen=True)
class Measured:
    """One idle safety-net run of Trigger, measured (medians over ``runs``)."""

    runs: int
    engine: str
    wall_ms: float  # median wall time of lambda_handler: the stand-in for the billed duration
    wall_ms_min: float
    wall_ms_max: float
    read_units: float  # per run
    write_units: float
    requests: float
    log_bytes: float  # per invocation, Lambda's lines included, with CloudWatch Logs' per-event overhead
    log_events: float
    custom_metrics: tuple[str, ...]  # "Namespace/MetricName{dim,dim}" an idle stack emits (over all runs)
    publishes: int  # SNS publishes over all runs (an idle queue must need none)


def _environment(resolver: Resolver, function: str) -> dict[str, str]:
    glob = ((resolver.template.get("Globals") or {}).get("Function") or {}).get("Environment", {}).get("Variables", {})
    own = (resolver.template["Resources"][function]["Properties"].get("Environment") or {}).get("Variables", {})
    env = {k: str(resolver.value(v)) for k, v in {**glob, **own}.items()}
    env["QUEUE_TABLE_NAME"] = "idle-cost-queue-table"
    env["TRIGGER_TOPIC_ARN"] = "arn:aws:sns:us-east-1:123456789012:idle-cost-trigger"
    env["WORKER_WAKE_UP_TOPIC_ARN"] = "arn:aws:sns:us-east-1:123456789012:idle-cost-wake-up"
    return env


class _CountingOut(io.TextIOBase):
    """Stands in for stdout while the handler runs: keeps its lines (the handler's logs and EMF blobs)."""

    def __init__(self) -> None:
        self.text: list[str] = []

    def write(self, s: str) -> int:
        self.text.append(s)
        return len(s)

    def take(self) -> list[str]:
        lines = "".join(self.text).splitlines()
        self.text = []
        return [line for line in lines if line.strip()]


class _CountingNotifier:
    def __init__(self) -> None:
        self.published = 0

    def __getattr__(self, name: str) -> Any:
        def publish(*_args: Any, **_kwargs: Any) -> str:
            self.published += 1
            return "stub"
        return publish


def platform_lines(request_id: str, duration_ms: float, memory_mb: int, traced: bool) -> list[str]:
    """Lambda's own log lines of one invocation (text log format), in their documented form."""
    billed = max(1, math.ceil(duration_ms))
    report = (f"REPORT RequestId: {request_id}\tDuration: {duration_ms:.2f} ms\tBilled Duration: {billed} ms\t"
              f"Memory Size: {memory_mb} MB\tMax Memory Used: {min(memory_mb, 95)} MB\t")
    if traced:
        report += "\nXRAY TraceId: 1-6750a1b2-3c4d5e6f7a8b9c0d1e2f3a4b\tSegmentId: 1a2b3c4d5e6f7a8b\tSampled: true\t"
    return [f"START RequestId: {request_id} Version: $LATEST", f"END RequestId: {request_id}", report]


@contextlib.contextmanager
def _patched_env(env: Mapping[str, str]) -> Iterator[None]:
    import os

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def measure(runs: int = 25, resolver: Resolver | None = None) -> Measured:
    """Run Trigger's safety-net path ``runs`` times on an idle queue table (moto, in-process), metered."""
    import importlib.util
    import uuid

    resolver = resolver or Resolver(load_template())
    env = _environment(resolver, "TriggerFunction")
    fake = {
        "AWS_ACCESS_KEY_ID": "idle", "AWS_SECRET_ACCESS_KEY": "idle", "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled", "POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_METRICS_DISABLED": "false",
        "POWERTOOLS_DEV": "false",
    }
    out = _CountingOut()
    with _patched_env({**env, **fake}), contextlib.redirect_stdout(out):
        import boto3
        from moto import mock_aws

        from bench.cost_meter import CostMeter
        from taskqueue.core.settings import Settings
        from taskqueue.services import Services
        from taskqueue.store import TaskStore

        spec = importlib.util.spec_from_file_location("idle_cost_trigger_app", ROOT / "functions" / "trigger" / "app.py")
        assert spec and spec.loader
        app = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = app
        with mock_aws():
            spec.loader.exec_module(app)  # its Logger binds to the redirected stdout
            table = resolver.template["Resources"]["QueueTable"]["Properties"]
            reader = boto3.client("dynamodb", region_name="us-east-1")
            client = boto3.client("dynamodb", region_name="us-east-1")
            indexes = [{k: v for k, v in g.items() if k != "ProvisionedThroughput"} for g in table["GlobalSecondaryIndexes"]]
            reader.create_table(TableName=env["QUEUE_TABLE_NAME"], AttributeDefinitions=table["AttributeDefinitions"],
                                KeySchema=table["KeySchema"], GlobalSecondaryIndexes=indexes, BillingMode="PAY_PER_REQUEST")
            meter = CostMeter(reader)
            meter.attach(client)
            settings = Settings.from_env(env)
            notifier = _CountingNotifier()
            from taskqueue.core.clock import SystemClock

            clock = SystemClock()
            svc = Services(settings, TaskStore(client, settings, clock), notifier, clock)  # type: ignore[arg-type]
            app.services = lambda: svc
            event = json.loads((ROOT / "events" / "trigger-safety-net.json").read_text())
            memory = next(s.memory_mb for s in inventory(resolver).schedules if s.function == "TriggerFunction")
            traced = next(s.traced for s in inventory(resolver).schedules if s.function == "TriggerFunction")
            from aws_lambda_powertools.metrics.provider import cold_start

            cold_start.is_cold_start = True  # the first run is an execution environment's first
            walls: list[float] = []
            log_bytes: list[int] = []
            log_events: list[int] = []
            metrics: set[str] = set()
            meter.reset()
            out.take()
            for n in range(runs):
                request_id = str(uuid.UUID(int=n + 1))
                context = _Context(request_id, memory)
                started = time.perf_counter()
                with _quiet_warnings():
                    app.lambda_handler(event, context)
                wall = (time.perf_counter() - started) * 1000
                walls.append(wall)
                lines = out.take()
                for line in lines:
                    metrics.update(_emf_metrics(line))
                every = lines + platform_lines(request_id, wall, memory, traced)
                log_events.append(len(every))
                log_bytes.append(sum(len(x.encode()) + 1 + LOG_EVENT_OVERHEAD_BYTES for x in every))
            totals = meter.reset()
    return Measured(
        runs=runs, engine="moto (in-process, moto.mock_aws)", wall_ms=statistics.median(walls), wall_ms_min=min(walls),
        wall_ms_max=max(walls), read_units=totals.read_units / runs, write_units=totals.write_units / runs,
        requests=totals.request_count / runs, log_bytes=statistics.median(log_bytes),
        log_events=statistics.median(log_events), custom_metrics=tuple(sorted(metrics)), publishes=notifier.published,
    )


@contextlib.contextmanager
def _quiet_warnings() -> Iterator[None]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "No application metrics to publish": once per environment, on stderr
        yield


class _Context:
    def __init__(self, request_id: str, memory: int) -> None:
        self.function_name = "TriggerFunction"
        self.function_version = "$LATEST"
        self.invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:TriggerFunction"
        self.memory_limit_in_mb = memory
        self.aws_request_id = request_id
        self.log_group_name = "/aws/lambda/TriggerFunction"
        self.log_stream_name = "stream"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def _emf_metrics(line: str) -> set[str]:
    try:
        blob = json.loads(line)
    except ValueError:
        return set()
    if not isinstance(blob, dict) or "_aws" not in blob:
        return set()
    found = set()
    for directive in blob["_aws"].get("CloudWatchMetrics", []):
        for metric in directive.get("Metrics", []):
            for dims in directive.get("Dimensions", []) or [[]]:
                found.add(f"{directive['Namespace']}/{metric['Name']}{{{','.join(sorted(dims))}}}")
    return found


# ==== pricing a month =================================================================================


@dataclass(frozen=True)
class Line:
    part: str  # "running" or "fixed"
    item: str
    quantity: float
    unit: str
    dollars: float


@dataclass
class Month:
    billing_mode: str
    lines: list[Line]

    def total(self, part: str | None = None) -> float:
        return sum(x.dollars for x in self.lines if part is None or x.part == part)

    def as_dict(self) -> dict[str, Any]:
        return {"billing_mode": self.billing_mode, "running": self.total("running"), "fixed": self.total("fixed"),
                "total": self.total(), "lines": [asdict(x) for x in self.lines]}


def price_month(inv: Inventory, m: Measured) -> Month:
    """An idle month of ``inv``, each run of the safety net as ``m`` measured it."""
    lines: list[Line] = []
    gb_s = PRICES["lambda_gb_second_arm64"]
    for s in inv.schedules:
        n = s.invocations_per_month
        if s.architecture != "arm64":
            raise ValueError(f"{s.function}: only arm64 GB-s are priced (bench/dollars.py)")
        billed_s = max(1, math.ceil(m.wall_ms)) / 1000.0
        what = f"{s.function} {s.event} (every {s.period_seconds:g} s)"
        lines.append(Line("running", f"{what}: Lambda requests", n, "invocations", n * PRICES["lambda_request"]))
        lines.append(Line("running", f"{what}: Lambda compute, {s.memory_mb} MB x {billed_s * 1000:.0f} ms measured",
                          n * billed_s * s.memory_mb / 1024, "GB-s", n * billed_s * s.memory_mb / 1024 * gb_s))
        if s.function == "TriggerFunction":  # the safety net reads (and, idle, writes) the queue table
            if inv.billing_mode == "PAY_PER_REQUEST":
                lines.append(Line("running", f"{what}: DynamoDB reads", n * m.read_units, "read units",
                                  n * m.read_units * PRICES["dynamodb_read_request_unit"]))
                lines.append(Line("running", f"{what}: DynamoDB writes", n * m.write_units, "write units",
                                  n * m.write_units * PRICES["dynamodb_write_request_unit"]))
            gb = n * m.log_bytes / 1e9
            lines.append(Line("running", f"{what}: CloudWatch Logs ingestion ({m.log_bytes:.0f} B a run)", gb, "GB",
                              gb * USAGE_PRICES["cloudwatch_logs_ingestion_gb"]))
        else:
            raise ValueError(f"{s.function} {s.event}: an enabled schedule that is not the safety net makes tasks; "
                             "the stack is then not idle (model it with bench/dollars.py per task)")
        if s.traced:
            lines.append(Line("running", f"{what}: X-Ray traces (Tracing Active)", n, "traces", n * USAGE_PRICES["xray_trace_recorded"]))
    for c in inv.capacities:
        lines.append(Line("running", f"provisioned {c.name}: {c.read_units:g} RCU", c.read_units * HOURS_PER_MONTH,
                          "RCU-hours", c.read_units * HOURS_PER_MONTH * PROVISIONED_PRICES["dynamodb_rcu_hour"]))
        lines.append(Line("running", f"provisioned {c.name}: {c.write_units:g} WCU", c.write_units * HOURS_PER_MONTH,
                          "WCU-hours", c.write_units * HOURS_PER_MONTH * PROVISIONED_PRICES["dynamodb_wcu_hour"]))
    alarm_metrics = sum(inv.alarms.values())
    lines.append(Line("fixed", f"CloudWatch alarms: {len(inv.alarms)} ({', '.join(inv.alarms)})", alarm_metrics,
                      "alarm metrics", alarm_metrics * MONTHLY_FEES["cloudwatch_alarm_metric"]))
    if inv.scaling_policies:
        n = len(inv.scaling_policies) * AUTO_SCALING_ALARMS_PER_POLICY
        lines.append(Line("fixed", f"auto scaling's alarms: {len(inv.scaling_policies)} target-tracking policies x "
                          f"{AUTO_SCALING_ALARMS_PER_POLICY}", n, "alarm metrics", n * MONTHLY_FEES["cloudwatch_alarm_metric"]))
    lines.append(Line("fixed", f"CloudWatch dashboards ({', '.join(inv.dashboards) or 'none'})", len(inv.dashboards),
                      "dashboards", len(inv.dashboards) * MONTHLY_FEES["cloudwatch_dashboard"]))
    lines.append(Line("fixed", f"KMS customer managed keys ({', '.join(inv.kms_keys) or 'none'}; requests ~0 idle)",
                      len(inv.kms_keys), "keys", len(inv.kms_keys) * MONTHLY_FEES["kms_key"]))
    # A custom metric is billed for the hours it receives data; emitted at every cold start, so upper bound: all hours.
    lines.append(Line("fixed", "custom metrics an idle stack emits (" + (", ".join(m.custom_metrics) or "none")
                      + "; at most, billed only for hours with data)", len(m.custom_metrics), "metrics",
                      len(m.custom_metrics) * MONTHLY_FEES["cloudwatch_custom_metric"]))
    lines.append(Line("fixed", f"SNS topics ({len(inv.topics)}), SQS queues ({len(inv.queues)}): no request when idle",
                      len(inv.topics) + len(inv.queues), "resources", 0.0))
    return Month(inv.billing_mode, lines)


def idle_months(measured: Measured, overrides: Mapping[str, str] | None = None,
                template: Mapping[str, Any] | None = None) -> dict[str, Month]:
    """The month on ``overrides`` (template defaults otherwise), with BillingMode=PAY_PER_REQUEST and PROVISIONED
    (a BillingMode among the overrides is replaced by each)."""
    template = template or load_template()
    base = dict(overrides or {})
    on_demand = price_month(inventory(Resolver(template, {**base, "BillingMode": "PAY_PER_REQUEST"})), measured)
    provisioned = price_month(inventory(Resolver(template, {**base, "BillingMode": "PROVISIONED"})), measured)
    return {"on-demand": on_demand, "provisioned": provisioned}


def markdown(result: Mapping[str, Any]) -> str:
    """The breakdown, for bench/results.md and the docs."""
    m = result["measured"]
    out = [f"Safety-net run measured {m['runs']} times on {m['engine']} with bench/cost_meter.py: median wall time "
           f"{m['wall_ms']:.1f} ms ({m['wall_ms_min']:.1f}–{m['wall_ms_max']:.1f}; the stand-in for Lambda's billed "
           f"duration, which differs on Lambda), {m['read_units']:.2f} read units, {m['write_units']:.2f} write units and "
           f"{m['requests']:.1f} requests a run, {m['log_bytes']:.0f} bytes of logs in {m['log_events']:.0f} events a run "
           f"(Lambda's START/END/REPORT included), {m['publishes']} SNS publishes in all. Prices: {REGION}, "
           f"{PRICES_AS_OF}; free tiers not applied. Months of 730 h.", ""]
    for label, month in result["months"].items():
        out.append(f"| {label} ({month['billing_mode']}) | quantity | $ per month |\n|---|---:|---:|")
        for part in ("running", "fixed"):
            for x in (y for y in month["lines"] if y["part"] == part):
                out.append(f"| {part}: {x['item']} | {x['quantity']:,.4g} {x['unit']} | {x['dollars']:.4f} |")
            out.append(f"| **{part}, total** | | **{month[part]:.2f}** |")
        out.append(f"| **all** | | **{month['total']:.2f}** |\n")
    return "\n".join(out)


def run(runs: int = 25, overrides: Mapping[str, str] | None = None) -> dict[str, Any]:
    template = load_template()
    measured = measure(runs, Resolver(template, overrides))
    months = idle_months(measured, overrides, template)
    return {"engine": measured.engine, "part": "idle-cost", "overrides": dict(overrides or {}),
            "target": TARGET_DOLLARS_PER_MONTH, "measured": asdict(measured),
            "months": {k: v.as_dict() for k, v in months.items()}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=25, help="safety-net runs measured (median wall time)")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE", help="a parameter override")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line too")
    args = parser.parse_args(argv)
    overrides = dict(p.split("=", 1) for p in args.param)
    result = run(args.runs, overrides)
    print(markdown(result))
    od, pr = result["months"]["on-demand"], result["months"]["provisioned"]
    print(f"Idle stack, $ per month: on-demand running {od['running']:.2f} / fixed fees {od['fixed']:.2f}; "
          f"provisioned running {pr['running']:.2f} / fixed fees {pr['fixed']:.2f} (target: at most "
          f"{TARGET_DOLLARS_PER_MONTH:.2f})")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
