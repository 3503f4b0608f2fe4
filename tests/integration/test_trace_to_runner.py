"""One task followed from ``enqueue`` to its runner's own span, on both DynamoDB engines: the producer's trace context
rides on the task item (a stream carries none), the worker's span for the attempt joins that trace, and the runner's
span and the headers it passes on are in it too; one trace id end to end, printed. In X-Ray (aws-xray-sdk's recorder
for the producer, an in-memory emitter for every segment) and in OpenTelemetry (the SDK's in-memory exporter)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pytest
from aws_xray_sdk import global_sdk_config
from aws_xray_sdk.core import xray_recorder
from aws_xray_sdk.core.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from taskqueue import tracing
from taskqueue.client import TaskQueueClient
from taskqueue.client.create import create_tasks
from taskqueue.core.model import parse_create_request
from taskqueue.core.states import TaskStatus
from taskqueue.matching.agents import AgentStore
from taskqueue.matching.matcher import Matcher
from taskqueue.matching.rules import MatchSettings
from taskqueue.services import Services
from taskqueue.store import TaskStore
from taskqueue.wakeups.notify import Notifier
from taskqueue.work.worker import Worker
from tests.agent_support import AGENT_TABLE, agent_table, profile  # noqa: F401 (fixture)
from tests.conftest import make_settings

pytestmark = pytest.mark.dynamodb_engines


class Emitter:
    """The X-Ray daemon, in memory: every segment document sent, the producer's and the worker's."""

    def __init__(self) -> None:
        self.documents: list[dict] = []

    def send_entity(self, entity) -> None:
        self.documents.append(json.loads(entity.serialize()))


@pytest.fixture
def client(dynamodb, topics, clock, monkeypatch) -> TaskQueueClient:
    monkeypatch.delenv("_X_AMZN_TRACE_ID", raising=False)
    settings = make_settings(topics, worker_timeout_seconds=180)
    return TaskQueueClient(Services(settings, TaskStore(dynamodb, settings, clock), Notifier(boto3.client("sns"), settings), clock))


@pytest.fixture
def xray() -> Iterator[Emitter]:
    emitter = Emitter()
    previous_context, previous_emitter = xray_recorder.context, xray_recorder.emitter
    enabled = global_sdk_config.sdk_enabled()
    global_sdk_config.set_sdk_enabled(True)  # a handler's Powertools Tracer turns it off outside Lambda
    xray_recorder.configure(context=Context(), sampling=False, emitter=emitter)
    previous = tracing.configure(xray_emitter=emitter, tracer_provider=None)
    yield emitter
    tracing.configure(**previous)
    xray_recorder.configure(context=previous_context, emitter=previous_emitter)
    global_sdk_config.set_sdk_enabled(enabled)


def run_worker(client: TaskQueueClient, runner) -> None:
    Worker(client.services.store, runner, capacity=1, owner="w1", clock=client.services.clock).run("work", 60, 170)


def test_one_xray_trace_from_the_enqueue_to_the_runners_own_span(client, xray):
    # The producer: an API request traced by aws-xray-sdk, which enqueues inside a subsegment.
    producer = xray_recorder.begin_segment("orders-api")
    enqueue = xray_recorder.begin_subsegment("enqueue")
    task_id = client.enqueue({"order": 42})
    xray_recorder.end_subsegment()
    xray_recorder.end_segment()
    assert client.get(task_id).trace.xray_root == producer.trace_id  # stored on the task, read back strongly

    seen = {}

    def runner(task):
        seen["stored"] = task.trace
        with tracing.span("legacy call"):
            seen["headers"] = tracing.headers()
        return {}

    run_worker(client, runner)
    assert client.get(task_id).status is TaskStatus.SUCCESS

    by_name = {d["name"]: d for d in xray.documents}
    attempt = by_name["process work"]
    (runner_span,) = attempt["subsegments"]
    print(f"\ntrace id {producer.trace_id}: enqueue {enqueue.id} -> attempt {attempt['id']} -> "
          f"runner span {runner_span['id']}")
    assert by_name["orders-api"]["trace_id"] == attempt["trace_id"] == producer.trace_id
    assert attempt["parent_id"] == enqueue.id  # the attempt's parent is the producer's enqueue
    assert attempt["annotations"] == {"task_id": task_id, "queue": "work", "group": "default", "attempt": 1}
    assert runner_span["name"] == "legacy call"
    assert seen["stored"].parent_id == enqueue.id
    assert seen["headers"]["X-Amzn-Trace-Id"] == f"Root={producer.trace_id};Parent={runner_span['id']};Sampled=1"


def test_one_opentelemetry_trace_from_the_enqueue_to_the_runners_own_span(client):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = tracing.configure(xray_emitter=None, tracer_provider=provider)
    try:
        with provider.get_tracer("orders-api").start_as_current_span("POST /orders"):
            task_id = client.enqueue({"order": 43})

        def runner(task):
            with tracing.span("legacy call"):
                return {}

        run_worker(client, runner)
    finally:
        tracing.configure(**previous)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    request, process, call = spans["POST /orders"], spans["process work"], spans["legacy call"]
    trace_ids = {f"{s.context.trace_id:032x}" for s in (request, process, call)}
    print(f"\ntrace id {trace_ids}: {request.name} -> {process.name} -> {call.name}")
    assert len(trace_ids) == 1
    assert process.parent.span_id == request.context.span_id and call.parent.span_id == process.context.span_id
    assert process.attributes["messaging.message.id"] == task_id


def create_calls(store, now_ms, preferences):
    request = parse_create_request({"queue": "calls", "payload": {"caller": "c", "preferences": preferences}},
                                   store.settings)
    return create_tasks(request, store, now_ms).task_ids


def test_a_match_is_a_span_of_its_calls_trace_naming_the_agent(store, clock, agent_table, xray):
    agents = AgentStore(agent_table, MatchSettings(agent_table_name=AGENT_TABLE), store, clock)
    agents.put_available(profile("ana", ["fr"]))
    producer = xray_recorder.begin_segment("contact-center")
    (call,) = create_calls(store, clock.now_ms(), {"language": "fr"})  # CreateTasks' path captures the segment
    xray_recorder.end_segment()
    (untraced,) = create_calls(store, clock.now_ms(), {"language": "en"})  # no agent: waits, no span
    assert Matcher(store, agents, owner="matcher-1", clock=clock).run(5).matched == 1
    (match,) = [d for d in xray.documents if d["name"] == "process calls"]
    print(f"\ntrace id {producer.trace_id}: call {call} -> match {match['id']} (agent ana)")
    assert (match["trace_id"], match["parent_id"]) == (producer.trace_id, producer.id)
    assert match["annotations"] == {"task_id": call, "queue": "calls", "group": "default", "attempt": 1,
                                    "agent_id": "ana"}
    assert store.get(untraced).status is TaskStatus.PENDING
