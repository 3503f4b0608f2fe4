"""The dashboard and alarms of template.yaml read metrics the handlers really emit: the handlers run (against
moto, through their lambda_handler, so Powertools flushes EMF to stdout) through a day in which every counted
thing happens once at least; every series a dashboard widget or an alarm reads — namespace, metric name and its
exact dimension set, as CloudWatch matches them — must appear in that EMF output, and the series an alarm
watches must count something (an alarm on a series that stays at zero never fires)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from taskqueue.core.errors import PermanentTaskError
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.matching.rules import MatchSettings
from taskqueue.services import MatcherServices
from tests.agent_support import AGENT_TABLE, agent_table  # noqa: F401 (fixture)
from tests.support import EmittedMetric, LambdaContextStub, emitted, load_event, load_function, template

TPL = template()
RES = TPL["Resources"]
ENV = TPL["Globals"]["Function"]["Environment"]["Variables"]

create_tasks = load_function("create_tasks")
process_tasks = load_function("process_tasks")
matcher = load_function("matcher")
agent_events = load_function("agent_events")
trigger = load_function("trigger")

Series = tuple[str, str, tuple[tuple[str, str], ...]]  # namespace, metric, sorted (dimension, value) pairs


def dashboard_series() -> set[Series]:
    """Every custom-namespace series a dashboard widget plots (CloudWatch's "." repeats the cell above, "..."
    the rest of the row above)."""
    body, _ = RES["QueueDashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    # A variable inside a JSON string becomes a placeholder; one standing for a number (a threshold), a number.
    widgets = json.loads(re.sub(r'(")?\$\{[A-Za-z:]+\}', lambda m: '"placeholder' if m.group(1) else "0", body))["widgets"]
    found: set[Series] = set()
    for widget in widgets:
        previous: list[Any] = []
        for row in widget["properties"].get("metrics", []):
            cells = [c for c in row if not isinstance(c, dict)]
            if not cells:  # an expression (the noisiest groups' SEARCH): it names no one series
                continue
            if cells and cells[0] == "...":
                cells = previous[: len(previous) - len(cells) + 1] + cells[1:]
            cells = [previous[i] if c == "." else c for i, c in enumerate(cells)]
            previous = cells
            namespace, metric, *pairs = cells
            if not namespace.startswith("AWS/"):
                found.add((namespace, metric, tuple(sorted(zip(pairs[::2], pairs[1::2], strict=True)))))
    return found


def alarm_series() -> set[Series]:
    found: set[Series] = set()
    for resource in RES.values():
        if resource["Type"] != "AWS::CloudWatch::Alarm":
            continue
        props = resource["Properties"]
        stats = [props] if "MetricName" in props else [m["MetricStat"]["Metric"] for m in props.get("Metrics", []) if "MetricStat" in m]
        for stat in stats:
            if not stat["Namespace"].startswith("AWS/"):
                dims = tuple(sorted((d["Name"], d["Value"]) for d in stat.get("Dimensions", [])))
                found.add((stat["Namespace"], stat["MetricName"], dims))
    return found


def series_of(metric: EmittedMetric) -> set[Series]:
    """The series CloudWatch files one EMF value under: one per dimension set of its blob."""
    return {(metric.namespace, metric.name, tuple(sorted((d, metric.dims[d]) for d in group)))
            for group in metric.dimension_sets}


def invoke(module: Any, event: Any, svc: Any, monkeypatch: pytest.MonkeyPatch, **context: Any) -> Any:
    monkeypatch.setattr(module, "services", lambda: svc)
    return module.lambda_handler(event, LambdaContextStub(**context))


class FailsFirst:
    """A legacy system that refuses the first task it is given for good and runs the others."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, task: Any) -> dict[str, Any]:
        self.seen.append(task.task_id)
        if len(self.seen) == 1:
            raise PermanentTaskError("refused for good")
        return {"ok": task.task_id}


def wake_event(queue: str) -> dict[str, Any]:
    event = json.loads(json.dumps(load_event("process_tasks-sns-wake.json")))
    record = event["Records"][0]["Sns"]
    record["MessageAttributes"]["queue"]["Value"] = queue
    record["Message"] = json.dumps({**json.loads(record["Message"]), "queue": queue})
    return event


def a_day_of_handlers(services, agent_table, store, clock, monkeypatch, capsys) -> str:  # noqa: F811
    """Run every handler through the events each dashboard metric counts; return their stdout (EMF)."""
    msvc = MatcherServices.of(services, MatchSettings(agent_table_name=AGENT_TABLE), agent_table)
    capsys.readouterr()
    invoke(agent_events, {"action": "agentAvailable", "agent": {"agentId": "ana", "attributes": {"language": ["fr"], "gender": ["f"]}}},
           msvc, monkeypatch)
    calls = {"queue": "calls", "payload": {"caller": "c", "preferences": {"language": "fr"}}}

    def create(request: dict[str, Any]) -> list[str]:
        clock.advance(1)  # each request a second after the last: the order of the queues is known
        return invoke(create_tasks, request, services, monkeypatch, request_id=f"create-{clock.now_ms()}")["taskIds"]

    # Calls are served oldest first, work newest first: the expiring ones are at the head of their queue, to be shed.
    create({**calls, "ttlSeconds": 60})
    crashed = create({**calls, "maxAttempts": 1}) + create({**calls, "maxAttempts": 3})
    create({**calls, "count": 2})
    # A call that can never match is refused at creation now; one written before that check (straight to the table)
    # is dead-lettered by the Matcher.
    clock.advance(1)
    never = parse_create_request({"queue": "calls", "payload": {"caller": "c", "preferences": {"skill": "x"}}},
                                 services.settings)
    store.put_tasks(new_tasks(never, clock.now_ms(), services.settings))
    crashed += create({"queue": "work", "maxAttempts": 1}) + create({"queue": "work", "maxAttempts": 3})
    create({"queue": "work", "count": 2})
    create({"queue": "work", "ttlSeconds": 60})
    create({"queue": "work", "count": 4, "group": "acme"})  # a queue with groups: noisy and quiet groups' metrics
    create({"queue": "work", "group": "globex"})
    # A worker and a matcher crash holding leases: on recovery one goes back to PENDING, one (its attempts used up)
    # to FAILURE.
    for task_id in crashed:
        queue = store.get(task_id).queue
        candidate = next(c for c in store.candidates(queue, 20) if c.task_id == task_id)
        assert store.claim(candidate, "crashed-worker") is not None
    clock.advance(services.settings.lease_seconds + 1)
    assert invoke(trigger, load_event("trigger-safety-net.json"), services, monkeypatch, function_name="Trigger")["woken"]
    legacy = FailsFirst()
    monkeypatch.setattr(process_tasks, "runner", lambda: legacy)
    invoke(process_tasks, wake_event("work"), services, monkeypatch)
    invoke(process_tasks, load_event("process_tasks-stream-ttl-remove.json"), services, monkeypatch)  # a shed counted
    # Ana has waited longer than AgentTimeoutSeconds: the contact center says she is still there.
    invoke(agent_events, {"action": "agentHeartbeat", "agentId": "ana"}, msvc, monkeypatch)
    invoke(matcher, load_event("matcher-sns-wake.json"), msvc, monkeypatch)
    # A stack deployed without a TaskRunner (NoTaskRunnerAlarm): the wake-up claims nothing and counts it.
    monkeypatch.setattr(process_tasks, "runner", lambda: None)
    invoke(process_tasks, wake_event("work"), services, monkeypatch)
    return capsys.readouterr().out


@pytest.fixture
def day(services, agent_table, store, clock, monkeypatch, capsys) -> str:  # noqa: F811
    return a_day_of_handlers(services, agent_table, store, clock, monkeypatch, capsys)


def test_the_series_read_by_the_dashboard_and_alarms_are_named_in_the_template():
    # The parse above finds what it must, so an empty set cannot make the tests below pass for nothing.
    assert len(dashboard_series()) >= 15 and len(alarm_series()) >= 5


# Plotted but emitted by no handler: none. (The calls widget plotted TasksClaimed, which the Matcher never emits;
# this test found it, and the line was taken off the dashboard.)
KNOWN_EMPTY_ON_DASHBOARD: set = set()


def test_every_series_on_the_dashboard_is_emitted_by_a_handler(day):
    emitted_series = set().union(*(series_of(m) for m in emitted(day)))
    missing = dashboard_series() - emitted_series
    assert missing == KNOWN_EMPTY_ON_DASHBOARD, (
        f"on the dashboard but emitted by no handler (name, namespace or dimensions differ): {sorted(missing)}")


def test_every_series_an_alarm_watches_is_emitted_and_counts_what_it_alarms_on(day):
    totals: dict[Series, float] = {}
    for metric in emitted(day):
        for series in series_of(metric):
            totals[series] = totals.get(series, 0) + metric.value
    for series in sorted(alarm_series()):
        assert series in totals, f"an alarm watches {series}, which no handler emits"
        assert totals[series] > 0, f"an alarm watches {series}, which stayed at 0 through events it counts"


def test_handlers_emit_under_the_namespace_and_service_the_template_configures(day):
    metrics = emitted(day)
    assert metrics
    assert {m.namespace for m in metrics} == {ENV["POWERTOOLS_METRICS_NAMESPACE"]}
    assert {m.dims.get("service") for m in metrics} == {ENV["POWERTOOLS_SERVICE_NAME"]}
