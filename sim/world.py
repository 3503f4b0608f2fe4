"""The world: the stack as template.yaml deploys it, on the kernel and the fakes, running the handlers' own code.

What it holds: the queue table (``QueueTable``, with its stream), the SNS topic ``WorkerWakeUpTopic`` (delivered to
ProcessTasks at least once: sometimes twice), EventBridge Scheduler (a one-time wake-up fires Trigger's delayed-head
path), Trigger's minute schedule (the safety net), and ProcessTasks' ``TaskStream`` mapping (``sim.lanes``). Every
function invocation is a kernel invocation killed at its Timeout, running ``functions/<name>/app.py``'s ``handle`` with
``Services`` built as ``Services.from_env`` builds them, on the fakes, with the invocation's own clock (a skew drawn
by the plan). The fault hook (``sim.faults``) is the world's: each request may be throttled past the SDK's retries,
slow, read a lagging index, or be the boundary at which its invocation is killed (before it applies, or after, its
answer lost).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from local.template.template import load_yaml
from sim.dynamodb import FakeDynamoDB
from sim.faults import Fault, Request
from sim.kernel import Invocation, Kernel
from sim.scheduler import FakeScheduler, input_of
from sim.sns import FakeSNS, Published, sns_event
from taskqueue.core.record import INDEX_LAG_ALLOWANCE_SECONDS
from taskqueue.core.settings import Settings
from taskqueue.services import Services
from taskqueue.store import TaskStore
from taskqueue.wakeups.delayed_wakeup import DelayedWakeups, ScheduleConfig
from taskqueue.wakeups.notify import Notifier

ROOT = Path(__file__).resolve().parent.parent
QUEUE_TABLE = "sim-QueueTable"
WAKE_TOPIC = "arn:aws:sns:us-east-1:123456789012:sim-WorkerWakeUpTopic"
TRIGGER_ARN = "arn:aws:lambda:us-east-1:123456789012:function:sim-Trigger"
SCHEDULE = ScheduleConfig("sim-WakeScheduleGroup", "arn:aws:iam::123456789012:role/sim-WakeScheduleRole", TRIGGER_ARN)
SNS_DELIVERY_S = (0.02, 0.2)  # SNS to Lambda: how long a message takes to start its subscriber
START_S = (0.01, 0.3)  # an invocation's start (a warm or cold environment)


@functools.cache
def template() -> dict[str, Any]:
    return load_yaml((ROOT / "template.yaml").read_text())


def parameter(name: str) -> Any:
    return template()["Parameters"][name]["Default"]


def function_properties(logical_id: str) -> dict[str, Any]:
    return template()["Resources"][logical_id]["Properties"]


def timeout_of(logical_id: str) -> float:
    timeout = function_properties(logical_id).get("Timeout", template()["Globals"]["Function"]["Timeout"])
    return float(parameter(timeout["Ref"]) if isinstance(timeout, dict) else timeout)


@functools.cache
def handler_module(directory: str) -> ModuleType:
    """functions/<directory>/app.py, loaded once (its module-level services are never used: ``handle`` is called with
    the world's)."""
    name = f"sim_{directory}_app"
    spec = importlib.util.spec_from_file_location(name, ROOT / "functions" / directory / "app.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)  # the runner loaded at import finds no environment: said once, not shown
    try:
        spec.loader.exec_module(module)
    finally:
        logging.disable(previous)
    return module


class _Topic(FakeSNS):
    """The wake-up topic: each message it takes is handed on (``delivered``) as soon as the publish applies."""

    delivered: Callable[[], None] = staticmethod(lambda: None)

    def serve(self, operation: str, params: Any, run: Callable[[Fault | None], Any]) -> Any:
        def applied(fault: Fault | None) -> Any:
            answer = run(fault)
            assert self.kernel is not None
            self.kernel.call_later(0, self.delivered)
            return answer

        return super().serve(operation, params, applied)


@dataclass
class Plan:
    """What one schedule draws (``sim.explore.draw_plan``): its load, its settings and its faults' rates."""

    seed: int
    producers: int = 2
    requests: int = 4  # CreateTasks requests per producer
    minutes: float = 6.0  # virtual minutes the producers and pausers act in; the world runs on to quiescence
    running_limit: int = 3
    group_concurrency: int | None = None
    lanes: int = 1  # TaskStream's ParallelizationFactor
    kill_rate: float = 0.0  # per request of a function's invocation
    throttle_rate: float = 0.0
    slow_rate: float = 0.0
    lag_rate: float = 0.0
    skew_s: float = 0.0  # each invocation's clock is off by up to this much, either way
    late_rate: float = 0.0  # a stream batch or SNS message delivered late (up to LATE_S)
    twice_rate: float = 0.0  # delivered twice
    drop_rate: float = 0.0  # a stream batch dropped to the on-failure queue after its retries
    pauses: int = 0  # pause-resume pairs of the queue or a group
    fail_rate: float = 0.0  # the runner raises for this share of runs
    workflows: int = 0  # workflows created through CreateTasks (sim.workflow_actors); none in the plain explorer

    @property
    def faulty(self) -> bool:
        return any((self.kill_rate, self.throttle_rate, self.slow_rate, self.lag_rate, self.skew_s, self.late_rate,
                    self.twice_rate, self.drop_rate))


LATE_S = 20.0
MAX_KILLS = 3  # crashes per schedule: each may hold the queue up for a Timeout and a round of the safety net
SLOW_S = 60.0
INDEX_LAG_S = INDEX_LAG_ALLOWANCE_SECONDS  # how late an index read may be: what the product allows for
FUNCTION_SKEW_S = 0.05


@dataclass
class Stats:
    invocations: dict[str, int] = field(default_factory=dict)
    kills: int = 0
    timeouts: int = 0
    throttles: int = 0
    slow: int = 0
    lagged: int = 0
    late: int = 0
    twice: int = 0
    dropped: int = 0
    metrics: dict[str, int] = field(default_factory=dict)
    # Each fault that happened: (virtual time, how long it may hold a waiting task up: its cost, in seconds).
    costs: list[tuple[float, float]] = field(default_factory=list)


class World:
    """The deployed stack on one kernel (module docstring). ``log(line)`` receives the trace a replay prints."""

    def __init__(self, plan: Plan, kernel: Kernel, log: Callable[[str], None] | None = None) -> None:
        self.plan = plan
        self.kernel = kernel
        self.rng = kernel.rng
        self.log_line = log
        self.stats = Stats()
        self.db = FakeDynamoDB.from_template({"QueueTable": QUEUE_TABLE}, kernel)
        self.db.keep_index_history(INDEX_LAG_S * 2)
        self.sns = _Topic(kernel, topics=[WAKE_TOPIC])
        self.sns.delivered = self._sns_tick
        self.scheduler = FakeScheduler(kernel)
        for service in (self.db, self.sns, self.scheduler):
            service.faults = self._fault
        self.settings = Settings(
            queue_table_name=QUEUE_TABLE, worker_wake_up_topic_arn=WAKE_TOPIC, worker_queues=("work",),
            worker_timeout_seconds=timeout_of("ProcessTasksFunction"),
            lease_seconds=int(parameter("LeaseSeconds")), time_budget_seconds=float(parameter("TimeBudgetSeconds")),
            runner_capacity=int(parameter("RunnerCapacity")), running_limit=plan.running_limit,
            group_concurrency=plan.group_concurrency, default_run_seconds=int(parameter("DefaultRunSeconds")),
        )
        self.process_tasks = handler_module("process_tasks")
        self.trigger = handler_module("trigger")
        self.create_tasks = handler_module("create_tasks")
        self.live: set[Invocation] = set()
        self.doomed: dict[Invocation, str] = {}  # killed at its next request (a kill after a request's answer)
        self.on_invoke: list[Callable[[str, Invocation], None]] = []
        self.runner: Any = None  # the actors' TaskRunner (sim.actors.Runner)
        self.safety_net_s = 60.0

    def log(self, text: str) -> None:
        if self.log_line is not None:
            self.log_line(f"{self.kernel.now:10.3f} {text}")

    # ---- services and invocations -------------------------------------------------------------------------

    def services(self, function: str) -> Services:
        """What ``Services.from_env`` builds, on the fakes, with a clock skewed as this invocation's host is: a
        producer's up to the plan's skew (at most PRODUCER_CLOCK_SKEW_SECONDS, the skew the product allows a
        writer), the stack's own functions' up to FUNCTION_SKEW_S (Lambda's hosts keep synchronized time)."""
        skew = self.plan.skew_s if function == "CreateTasks" else min(self.plan.skew_s, FUNCTION_SKEW_S)
        clock = self.kernel.clock_for(int(self.rng.uniform(-skew, skew) * 1000) if skew else 0)
        store = TaskStore(self.db, self.settings, clock)
        notifier = Notifier(self.sns, self.settings, sleep=clock.sleep)
        return Services(self.settings, store, notifier, clock, wakeups=DelayedWakeups(store, self.scheduler, SCHEDULE,
                                                                                        clock))

    def invoke(self, function: str, body: Callable[[Services, float, str], Any], timeout: float,
               delay: float | None = None, done: Callable[[BaseException | None], None] | None = None) -> None:
        """Start an invocation of ``function`` after ``delay`` (default: a start's latency), killed at ``timeout``;
        ``done(error)`` when it ends (``None``: it returned)."""
        def start() -> None:
            number = self.stats.invocations.get(function, 0) + 1
            self.stats.invocations[function] = number
            name = f"{function}-{number}"
            holder: list[Invocation] = []

            def main() -> Any:
                svc = self.services(function)
                return body(svc, timeout - 0.05, name)

            invocation = self.kernel.invoke(main, name)
            holder.append(invocation)
            self.live.add(invocation)
            invocation.future.add_done_callback(lambda f, i=invocation: self._ended(i, f, done))
            self.kernel.call_later(timeout, lambda i=invocation: self._time_out(i))
            for hook in self.on_invoke:
                hook(function, invocation)
            self.log(f"start {name}")

        self.kernel.call_later(self.rng.uniform(*START_S) if delay is None else delay, start)

    def _time_out(self, invocation: Invocation) -> None:
        if invocation in self.live:
            self.stats.timeouts += 1
            self.kernel.kill(invocation, "Task timed out")

    def _ended(self, invocation: Invocation, future: Any, done: Callable[[BaseException | None], None] | None) -> None:
        self.live.discard(invocation)
        self.doomed.pop(invocation, None)
        error = future.exception()
        if self.log_line is not None:
            self.log(f"end {invocation.name}" + (f": {type(error).__name__}: {str(error)[:160]}" if error else
                                                _summary(future.result())))
        if done is not None:
            done(error)

    # ---- the functions ---------------------------------------------------------------------------------------

    def process_tasks_event(self, event: dict[str, Any], done: Callable[[BaseException | None], None] | None = None,
                            delay: float | None = None) -> None:
        app = self.process_tasks
        self.invoke("ProcessTasks", lambda svc, remaining, name: app.handle(event, remaining, name, svc, self.runner),
                    timeout_of("ProcessTasksFunction"), delay, done)

    def safety_net(self) -> None:
        app = self.trigger
        self.invoke("Trigger", lambda svc, _r, _n: app.handle_safety_net(svc), timeout_of("TriggerFunction"))

    def delayed_head(self, event: dict[str, Any]) -> None:
        app = self.trigger
        self.invoke("Trigger", lambda svc, _r, _n: app.handle_delayed_head(event, svc), timeout_of("TriggerFunction"))

    def create(self, request: dict[str, Any]) -> None:
        app = self.create_tasks
        self.invoke("CreateTasks", lambda svc, _r, name: app.handle(request, svc, name), timeout_of("CreateTasksFunction"))

    # ---- deliveries --------------------------------------------------------------------------------------------

    def start(self, safety_net_s: float = 60.0) -> None:
        """The schedules: Trigger's every ``safety_net_s``, Scheduler's and SNS's deliveries."""
        self.safety_net_s = safety_net_s
        self.kernel.call_later(self.rng.uniform(0, safety_net_s), self._tick)
        self.kernel.call_later(1.0, self._scheduler_tick)

    def _tick(self) -> None:
        self.safety_net()
        self.kernel.call_later(self.safety_net_s, self._tick)

    def _scheduler_tick(self) -> None:
        for schedule in self.scheduler.due():
            self.log(f"schedule {schedule.name} fires")
            self.delayed_head(input_of(schedule))
        self.kernel.call_later(1.0, self._scheduler_tick)

    def _sns_tick(self) -> None:
        for message in self.sns.take():
            self._deliver(message)

    def _deliver(self, message: Published) -> None:
        """At least once: sometimes late, sometimes twice."""
        copies = 2 if self.rng.random() < self.plan.twice_rate else 1
        self.stats.twice += copies - 1
        for _ in range(copies):
            delay = self.rng.uniform(*SNS_DELIVERY_S)
            if self.rng.random() < self.plan.late_rate:
                self.stats.late += 1
                late = self.rng.uniform(0, LATE_S)
                self.cost(late + 1)
                delay += late
            self.process_tasks_event(sns_event([message]), delay=delay)

    # ---- faults ---------------------------------------------------------------------------------------------

    def cost(self, seconds: float) -> None:
        self.stats.costs.append((self.kernel.now, seconds))

    def _fault(self, request: Request) -> Fault | None:
        task = self.kernel.current
        if task is None or task.invocation not in self.live:
            return None
        invocation, plan, rng = task.invocation, self.plan, self.rng
        if invocation in self.doomed:
            self.kernel.kill(invocation, self.doomed.pop(invocation))
            return None
        if plan.kill_rate and self.stats.kills < MAX_KILLS and rng.random() < plan.kill_rate:
            self.stats.kills += 1
            # Its running-limit and group slots stay leased until its end (a Timeout after its start at most), then
            # the safety net's next round wakes the queue; its own task comes back once its lease passes (due then).
            self.cost(timeout_of("ProcessTasksFunction") + 1 + self.safety_net_s + 5)
            where = f"crashed at {request.service}.{request.operation}"
            mode = rng.random()
            if mode < 1 / 3:
                self.kernel.kill(invocation, where + " (before it applied)")
                return None
            if mode < 2 / 3:  # applied, its answer lost: killed while the answer is on its way
                before, after = rng.uniform(0.0005, 0.003), rng.uniform(0.0005, 0.003)
                self.kernel.call_at(self.kernel.now + before + after / 2,
                                    lambda: self.kernel.kill(invocation, where + " (applied, its answer lost)"))
                return Fault(before_s=before, after_s=after)
            self.doomed[invocation] = where + " (after its answer, at the next request)"
        if plan.throttle_rate and rng.random() < plan.throttle_rate:
            self.stats.throttles += 1
            self.cost(self.safety_net_s + 5)  # at worst it fails a round of the safety net: the next one
            code = {"dynamodb": "ProvisionedThroughputExceededException", "sns": "Throttled"}.get(
                request.service, "ThrottlingException")
            return Fault(error=code, before_s=rng.uniform(0.05, 2.0))
        if plan.slow_rate and rng.random() < plan.slow_rate:
            self.stats.slow += 1
            before, after = rng.uniform(0, SLOW_S / 2), rng.uniform(0, SLOW_S / 2)
            # Its own delay; and a producer's write of a delayed head that lands after the head fell due leaves the
            # head to the safety net's next round (the worker that saw the task stopped without scheduling it).
            self.cost(before + after + self.safety_net_s + 5)
            return Fault(before_s=before, after_s=after)
        if plan.lag_rate and request.operation == "Query" and "IndexName" in request.params and rng.random() < plan.lag_rate:
            self.stats.lagged += 1
            lag = rng.uniform(0, INDEX_LAG_S)
            self.cost(lag + 1)
            return Fault(index_lag_s=lag)
        return None


def _summary(result: Any) -> str:
    """A worker report's gist for the trace."""
    fields = ("claimed", "succeeded", "failed", "released", "lost", "limited", "recovered", "stopped_by", "work_remains")
    if hasattr(result, "stopped_by"):
        return ": " + " ".join(f"{name}={getattr(result, name)}" for name in fields if getattr(result, name, None))
    return f": {str(result)[:120]}" if result else ""
