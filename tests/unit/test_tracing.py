"""A task's trace context (taskqueue/core/trace_context.py) and the spans of taskqueue.tracing: what is captured from
a producer (an explicit header, Lambda's variable, the active X-Ray segment, the active OpenTelemetry span), how it is
stored on the item (never in an index), and each attempt's span in the producer's trace, in X-Ray (a segment whose
parent is the producer's) and in OpenTelemetry (a CONSUMER span whose parent and link are the producer's), with the
runner's own span inside and the headers it passes on."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from aws_xray_sdk import global_sdk_config
from aws_xray_sdk.core.context import Context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from taskqueue.core import keys
from taskqueue.core.errors import InvalidField, InvalidTaskInput
from taskqueue.core.model import from_item, new_tasks, parse_create_request, to_item
from taskqueue.core.settings import Settings
from taskqueue.core.trace_context import TraceContext, combine, context_of, parse_traceparent, parse_xray_header
from taskqueue.observe import tracing
from tests.support import template

TRACEPARENT = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
XRAY = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"


class Emitter:
    """aws-xray-sdk's emitter interface, in memory: the segment documents as the daemon would receive them."""

    def __init__(self) -> None:
        self.documents: list[dict] = []

    def send_entity(self, entity) -> None:
        self.documents.append(json.loads(entity.serialize()))


@pytest.fixture
def spans() -> Iterator[tuple[Emitter, InMemorySpanExporter]]:
    emitter, exporter = Emitter(), InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = tracing.configure(xray_emitter=emitter, tracer_provider=provider)
    yield emitter, exporter
    tracing.configure(**previous)


def settings() -> Settings:
    return Settings(queue_table_name="t")


# ---- the context ------------------------------------------------------------------------------------------------


def test_a_traceparent_and_an_xray_header_of_one_span_are_one_context():
    w3c, xray = parse_traceparent(TRACEPARENT), parse_xray_header(XRAY + ";Lineage=a87bd80c:1")
    assert w3c == xray == TraceContext("5759e988bd862e3fe1be46a994272793", "53995c3f42cd8ad8", True)
    assert w3c.xray_header == XRAY and xray.traceparent == TRACEPARENT
    assert w3c.headers() == {"traceparent": TRACEPARENT, "X-Amzn-Trace-Id": XRAY}
    # Stored once: the X-Ray header is derived from the W3C one.
    assert combine(w3c, xray).attributes() == {"traceparent": TRACEPARENT}


def test_an_xray_segment_of_another_trace_is_kept_apart():
    other = parse_xray_header("Root=1-6759e988-cd862e3fe1be46a994272793;Parent=63995c3f42cd8ad8;Sampled=0")
    both = combine(parse_traceparent(TRACEPARENT), other)
    assert both.traceparent == TRACEPARENT
    assert both.xray_header == "Root=1-6759e988-cd862e3fe1be46a994272793;Parent=63995c3f42cd8ad8;Sampled=0"
    assert set(both.attributes()) == {"traceparent", "awsTraceHeader"}
    # Without a parent an X-Ray root has no W3C form: it is stored as it is.
    root_only = parse_xray_header("Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=?")
    assert root_only.traceparent is None and root_only.attributes() == {
        "awsTraceHeader": "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=?"}


@pytest.mark.parametrize("bad", [
    "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8",  # no flags
    "ff-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01",  # the forbidden version
    "00-00000000000000000000000000000000-53995c3f42cd8ad8-01",  # an all-zero trace id
    "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01-extra",  # version 00 has four fields
])
def test_a_malformed_traceparent_is_refused(bad):
    with pytest.raises(InvalidTaskInput, match="traceparent"):
        parse_traceparent(bad)


def test_context_of_takes_what_a_caller_has_in_hand():
    assert context_of(TRACEPARENT) == context_of(XRAY) == context_of({"X-Amzn-Trace-Id": XRAY})
    assert context_of({"TraceParent": TRACEPARENT}).parent_id == "53995c3f42cd8ad8"
    assert context_of(None) is None
    with pytest.raises(InvalidTaskInput, match="X-Ray trace header"):
        context_of("Root=1-zz;Parent=1")
    with pytest.raises(InvalidTaskInput, match="got int"):
        context_of(7)


def test_the_context_is_on_the_item_and_in_no_index_projection():
    request = parse_create_request({"traceparent": TRACEPARENT}, settings())
    (task,) = new_tasks(request, 1_000_000, settings())
    item = to_item(task, keys.Order.LIFO)
    assert item["traceparent"] == {"S": TRACEPARENT} and "awsTraceHeader" not in item
    assert from_item(item).trace == parse_traceparent(TRACEPARENT)
    untraced = to_item(task.with_changes(trace=None), keys.Order.LIFO)
    assert "traceparent" not in untraced and from_item(untraced).trace is None
    for index in template()["Resources"]["QueueTable"]["Properties"]["GlobalSecondaryIndexes"]:
        projected = index["Projection"].get("NonKeyAttributes", [])
        assert "traceparent" not in projected and "awsTraceHeader" not in projected, index["IndexName"]


def test_a_bad_context_in_a_request_names_its_field():
    with pytest.raises(InvalidField) as refused:
        parse_create_request({"awsTraceHeader": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=xyz"}, settings())
    assert refused.value.field == "awsTraceHeader"
    with pytest.raises(InvalidField):
        parse_create_request({"traceparent": "not-a-traceparent"}, settings())


def test_a_stored_context_that_does_not_parse_leaves_the_task_readable():
    (task,) = new_tasks(parse_create_request({}, settings()), 1_000_000, settings())
    item = to_item(task, keys.Order.LIFO) | {"traceparent": {"S": "garbage"}}
    assert from_item(item).trace is None


# ---- capture ------------------------------------------------------------------------------------------------------


def test_capture_reads_lambdas_variable(monkeypatch):
    monkeypatch.setenv("_X_AMZN_TRACE_ID", XRAY)
    assert tracing.capture() == parse_xray_header(XRAY)
    assert tracing.capture(TRACEPARENT) == parse_traceparent(TRACEPARENT)  # an explicit one wins


def test_capture_reads_the_active_xray_segment(monkeypatch):
    monkeypatch.delenv("_X_AMZN_TRACE_ID", raising=False)
    from aws_xray_sdk.core import xray_recorder

    previous, previous_emitter = xray_recorder.context, xray_recorder.emitter
    enabled = global_sdk_config.sdk_enabled()
    global_sdk_config.set_sdk_enabled(True)  # a handler's Powertools Tracer turns it off outside Lambda
    xray_recorder.configure(context=Context(), sampling=False, emitter=Emitter())
    try:
        assert tracing.capture() is None  # no segment open: nothing, and no complaint from the SDK
        segment = xray_recorder.begin_segment("producer")
        sub = xray_recorder.begin_subsegment("enqueue")
        captured = tracing.capture()
        assert (captured.xray_root, captured.parent_id, captured.sampled) == (segment.trace_id, sub.id, True)
        xray_recorder.end_subsegment()
        xray_recorder.end_segment()
    finally:
        xray_recorder.configure(context=previous, emitter=previous_emitter)
        global_sdk_config.set_sdk_enabled(enabled)


def test_capture_reads_the_active_opentelemetry_span(monkeypatch):
    monkeypatch.delenv("_X_AMZN_TRACE_ID", raising=False)
    provider = TracerProvider()
    with provider.get_tracer("app").start_as_current_span("request") as producer:
        context = producer.get_span_context()
        captured = tracing.capture()
    assert captured.traceparent == f"00-{context.trace_id:032x}-{context.span_id:016x}-01"


# ---- an attempt's span ----------------------------------------------------------------------------------------------


def test_an_attempt_is_a_segment_and_a_span_of_the_producers_trace(spans, monkeypatch):
    monkeypatch.delenv("_X_AMZN_TRACE_ID", raising=False)
    emitter, exporter = spans
    producer = parse_traceparent(TRACEPARENT)
    seen = {}
    with tracing.attempt_span("t-1", "work", "acme", 2, producer) as own:
        seen["attempt"] = tracing.current()
        with tracing.span("legacy call", endpoint="orders") as call:
            seen["headers"] = tracing.headers()
            seen["call"] = call
    assert own == seen["attempt"] and tracing.current() is None and tracing.headers() == {}

    (document,) = emitter.documents
    assert document["trace_id"] == "1-5759e988-bd862e3fe1be46a994272793"
    assert document["parent_id"] == "53995c3f42cd8ad8" and document["name"] == "process work"
    assert document["annotations"] == {"task_id": "t-1", "queue": "work", "group": "acme", "attempt": 2}
    assert document["metadata"]["taskqueue"]["messaging"]["messaging.operation.name"] == "process"
    (runner_call,) = document["subsegments"]
    assert runner_call["name"] == "legacy call" and runner_call["annotations"] == {"endpoint": "orders"}

    finished = {s.name: s for s in exporter.get_finished_spans()}
    process, call = finished["process work"], finished["legacy call"]
    assert process.kind is SpanKind.CONSUMER
    assert f"{process.context.trace_id:032x}" == producer.trace_id
    assert f"{process.parent.span_id:016x}" == producer.parent_id
    assert [f"{link.context.span_id:016x}" for link in process.links] == [producer.parent_id]
    assert dict(process.attributes).items() >= {"messaging.system": "taskqueue", "messaging.destination.name": "work",
                                                "messaging.message.id": "t-1", "taskqueue.attempt": 2}.items()
    assert call.parent.span_id == process.context.span_id
    # What the runner passes on names its own span, in the producer's trace, on both sides.
    assert seen["headers"]["traceparent"] == f"00-{producer.trace_id}-{call.context.span_id:016x}-01"
    assert seen["headers"]["X-Amzn-Trace-Id"] == (
        f"Root=1-5759e988-bd862e3fe1be46a994272793;Parent={runner_call['id']};Sampled=1")


def test_a_runner_error_marks_the_segment_and_passes_through(spans):
    emitter, exporter = spans
    with pytest.raises(RuntimeError, match="legacy down"), tracing.attempt_span("t-2", "work", None, 1,
                                                                                 parse_traceparent(TRACEPARENT)):
        raise RuntimeError("legacy down")
    (document,) = emitter.documents
    assert document["fault"] is True and document["annotations"]["group"] == "default"
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is trace.StatusCode.ERROR


def test_an_unsampled_producer_sends_no_segment(spans):
    emitter, _ = spans
    with tracing.attempt_span("t-3", "work", None, 1, parse_xray_header(XRAY.replace("Sampled=1", "Sampled=0"))):
        pass
    assert emitter.documents == []


def test_an_untraced_task_joins_the_workers_own_trace(spans, monkeypatch):
    emitter, _ = spans
    invocation = "Root=1-6759e988-cd862e3fe1be46a994272793;Parent=63995c3f42cd8ad8;Sampled=1"
    monkeypatch.setenv("_X_AMZN_TRACE_ID", invocation)
    with tracing.attempt_span("t-4", "work", None, 1, None):
        pass
    (document,) = emitter.documents
    assert (document["trace_id"], document["parent_id"]) == ("1-6759e988-cd862e3fe1be46a994272793", "63995c3f42cd8ad8")


def test_without_any_backend_the_producers_context_is_passed_on(monkeypatch):
    previous = tracing.configure(xray_emitter=None, tracer_provider=None)
    try:
        with tracing.attempt_span("t-5", "work", None, 1, parse_traceparent(TRACEPARENT)):
            assert tracing.headers()["traceparent"] == TRACEPARENT
            with tracing.span("nothing records"):
                assert tracing.current() == parse_traceparent(TRACEPARENT)
    finally:
        tracing.configure(**previous)


def test_a_match_names_its_agent(spans):
    emitter, _ = spans
    with tracing.attempt_span("t-6", "calls", None, 0, parse_xray_header(XRAY), extra={"agent_id": "a-1"}):
        pass
    assert emitter.documents[0]["annotations"]["agent_id"] == "a-1"


def test_no_segment_is_sent_where_no_daemon_is_known(monkeypatch):
    previous = tracing.configure(xray_emitter=tracing._UNSET, tracer_provider=None)
    try:
        for name in ("AWS_XRAY_DAEMON_ADDRESS", "_X_AMZN_TRACE_ID"):
            monkeypatch.delenv(name, raising=False)
        assert tracing._xray_emitter() is None and not tracing.recording()
        monkeypatch.setenv("AWS_XRAY_DAEMON_ADDRESS", "127.0.0.1:2000")
        assert tracing._xray_emitter() is not None and tracing.recording()
        monkeypatch.setenv("AWS_XRAY_SDK_ENABLED", "false")
        assert tracing._xray_emitter() is None
    finally:
        tracing.configure(**previous)
