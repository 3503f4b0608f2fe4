"""One trace from producer to runner: the producer's context captured onto the task, each attempt's span in that
trace, and what a runner uses so its own calls join it (docs/tracing.md). Public as ``taskqueue.tracing``:

    from taskqueue import tracing

    def run(task):
        with tracing.span("legacy call"):                                 # a child span / X-Ray subsegment
            httpx.post(url, json=task.payload, headers=tracing.headers())  # traceparent and X-Amzn-Trace-Id

Capture (``capture``): an explicit context wins; else the active OpenTelemetry span (when the application imported
opentelemetry: no span can be active otherwise) and the active X-Ray entity (aws-xray-sdk's recorder, when the
application imported it), else Lambda's ``_X_AMZN_TRACE_ID``; inside an attempt, the attempt's own span (a runner that
enqueues chains its follow-up tasks into the same trace).

Each attempt (``attempt_span``) is, in OpenTelemetry, a CONSUMER span named ``process <queue>`` whose parent is the
producer's context (the messaging conventions allow the creation context as the parent of a single message's process
span; it is also added as a link, as they ask), made the current span while the runner runs, so an instrumented
runner's calls are its children. X-Ray has no span links a segment can carry, and a subsegment always belongs to its
invocation's trace; so the attempt is an X-Ray *segment* of the producer's trace whose parent is the producer's
segment or subsegment, the way a downstream service joins a caller's trace through ``X-Amzn-Trace-Id``. It is sent to
the X-Ray daemon when it ends (UDP, aws-xray-sdk's emitter), with the runner's ``span`` subsegments inside. Lambda's
X-Ray SDK ties its automatic subsegments (patched boto3, requests) to the invocation's own trace: those do not join;
``span`` and ``headers`` do. A task created without a context joins the worker's own (in Lambda, the invocation's).

Annotations (X-Ray, indexed: ``annotation.task_id = "..."``) and attributes (OpenTelemetry) name the task: task id,
queue, group, attempt, with the messaging conventions' names where they fit (``messaging.system``,
``messaging.operation.name`` and ``.type`` = ``process``, ``messaging.destination.name``, ``messaging.message.id``).
"""

from __future__ import annotations

import contextvars
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from taskqueue.core.errors import InvalidTaskInput
from taskqueue.core.fairness import DEFAULT_GROUP
from taskqueue.core.model import Task
from taskqueue.core.trace_context import (
    LAMBDA_TRACE_VARIABLE,
    TraceContext,
    combine,
    context_of,
    parse_traceparent,
    parse_xray_header,
)

__all__ = ["TraceContext", "attempt_span", "capture", "configure", "current", "headers", "recording", "run_traced", "span"]

SYSTEM = "taskqueue"  # messaging.system
TRACER_NAME = "taskqueue"
T = TypeVar("T")


@dataclass
class _Attempt:
    """The attempt in progress in this thread: its X-Ray segment (None: not recorded in X-Ray) and the open runner
    subsegments, innermost last."""

    segment: Any | None
    open: list[Any] = field(default_factory=list)


_attempt: contextvars.ContextVar[_Attempt | None] = contextvars.ContextVar("taskqueue_attempt", default=None)
_current: contextvars.ContextVar[TraceContext | None] = contextvars.ContextVar("taskqueue_trace", default=None)
_UNSET: Any = object()  # the default: no override
_KEEP: Any = object()  # configure(): leave this one as it is
_overrides: dict[str, Any] = {"xray_emitter": _UNSET, "tracer_provider": _UNSET}
_emitter: Any = None
_otel_missing = False  # opentelemetry is not importable here (a failed import is not cached by Python: this is)


def configure(*, xray_emitter: Any = _KEEP, tracer_provider: Any = _KEEP) -> dict[str, Any]:
    """Where spans go, instead of the defaults (aws-xray-sdk's UDP emitter to the X-Ray daemon; OpenTelemetry's global
    tracer provider): ``xray_emitter`` has ``send_entity(segment)`` (None: no X-Ray), ``tracer_provider`` is an
    OpenTelemetry TracerProvider (None: no OpenTelemetry); one not given stays as it is. Returns the previous
    settings, for ``configure(**previous)``."""
    previous = dict(_overrides)
    if xray_emitter is not _KEEP:
        _overrides["xray_emitter"] = xray_emitter
    if tracer_provider is not _KEEP:
        _overrides["tracer_provider"] = tracer_provider
    return previous


# ---- capture -------------------------------------------------------------------------------------------------------


def capture(explicit: object = None) -> TraceContext | None:
    """The caller's trace context, to store on the tasks it creates (see the module's docstring); None: untraced.
    ``explicit``: a TraceContext, a traceparent or X-Ray header string, or a mapping of headers."""
    if explicit is not None:
        return context_of(explicit)
    inside = _current.get()
    if inside is not None:
        return inside
    return combine(_otel_active(), _xray_active())


def recording() -> bool:
    """Would a span be recorded here: an X-Ray emitter (aws-xray-sdk present and enabled, a daemon known), or an
    OpenTelemetry tracer provider other than the API's default (which records nothing)?"""
    if _xray_emitter() is not None:
        return True
    provider = _overrides["tracer_provider"]
    if provider is not _UNSET:
        return provider is not None
    if "opentelemetry.trace" not in sys.modules:
        return False
    from opentelemetry import trace

    return type(trace.get_tracer_provider()).__name__ not in ("ProxyTracerProvider", "NoOpTracerProvider")


def current() -> TraceContext | None:
    """For runners: the context of the span in progress (the attempt's, or the innermost ``span``'s), to pass on to
    what the runner calls; None outside an attempt."""
    return _current.get()


def headers() -> dict[str, str]:
    """For runners: the HTTP headers that make a downstream service's spans children of the span in progress
    (``traceparent`` and ``X-Amzn-Trace-Id``); {} outside an attempt."""
    context = _current.get()
    return {} if context is None else context.headers()


def _otel_active() -> TraceContext | None:
    if "opentelemetry.trace" not in sys.modules:  # a span can be active only where the application imported the API
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return TraceContext(f"{context.trace_id:032x}", f"{context.span_id:016x}", bool(context.trace_flags & 1))


def _xray_active() -> TraceContext | None:
    """The active X-Ray entity's context (aws-xray-sdk, when imported), else Lambda's variable."""
    if "aws_xray_sdk.core" in sys.modules:
        entity = _xray_entity()
        if entity is not None and getattr(entity, "trace_id", None) and getattr(entity, "id", None):
            try:
                found = parse_xray_header(f"Root={entity.trace_id};Parent={entity.id}")
            except InvalidTaskInput:
                found = None
            if found is not None:
                return TraceContext(found.trace_id, found.parent_id, bool(getattr(entity, "sampled", True)))
    header = os.environ.get(LAMBDA_TRACE_VARIABLE)
    if header:
        try:
            return parse_xray_header(header)
        except InvalidTaskInput:
            return None
    return None


def _xray_entity() -> Any | None:
    """The recorder's active segment or subsegment, without the SDK's "cannot find the current segment" complaint."""
    from aws_xray_sdk.core import xray_recorder

    context = xray_recorder.context
    if type(context).__name__ != "LambdaContext" and not getattr(getattr(context, "_local", None), "entities", None):
        return None
    try:
        entity = xray_recorder.get_trace_entity()
    except Exception:  # noqa: BLE001 - a recorder configured to raise on a missing context
        return None
    return None if type(entity).__name__ in ("DummySegment", "DummySubsegment") else entity


# ---- an attempt's span -----------------------------------------------------------------------------------------------


def run_traced(task: Task, runner: Callable[[Task], T]) -> T:
    """Run ``runner(task)`` inside the attempt's span (``attempt_span``): what ProcessTasks does with each attempt."""
    with attempt_span(task.task_id, task.queue, task.group, task.attempts, task.trace):
        return runner(task)


@contextmanager
def attempt_span(task_id: str, queue: str, group: str | None, attempt: int, trace: TraceContext | None,
                 extra: Mapping[str, str | int] | None = None, operation: str = "process") -> Iterator[TraceContext | None]:
    """The span of one attempt of a task (or one match of a call: ``extra`` names the agent), in the producer's trace
    (``trace``; None: the worker's own context). Yields the attempt's own context (also ``current()`` inside)."""
    parent = trace or capture()
    names = {"task_id": task_id, "queue": queue, "group": group or DEFAULT_GROUP, "attempt": attempt, **(extra or {})}
    attributes = {
        "messaging.system": SYSTEM,
        "messaging.operation.name": operation,
        "messaging.operation.type": "process",
        "messaging.destination.name": queue,
        "messaging.message.id": task_id,
        **{f"taskqueue.{k}": v for k, v in names.items() if k not in ("task_id", "queue")},
    }
    name = f"{operation} {queue}"
    with ExitStack() as stack:
        otel = stack.enter_context(_otel_span(name, parent, attributes))
        segment = _xray_segment(name, parent, names, attributes)
        own = _own_context(parent, otel, segment)
        attempt_token = _attempt.set(_Attempt(segment))
        current_token = _current.set(own)
        try:
            yield own
        except BaseException as exc:
            if segment is not None:
                segment.add_exception(exc, traceback.extract_tb(exc.__traceback__, limit=10))
            raise
        finally:
            _current.reset(current_token)
            _attempt.reset(attempt_token)
            if segment is not None:
                _send(segment)


@contextmanager
def span(name: str, **annotations: str | int | float | bool) -> Iterator[TraceContext | None]:
    """For runners: a child of the span in progress (an X-Ray subsegment of the attempt's segment, an OpenTelemetry
    span), ``annotations`` on both. Yields its context, for the headers of the call it covers."""
    attempt = _attempt.get()
    parent_entity = None if attempt is None or attempt.segment is None else (attempt.open or [attempt.segment])[-1]
    with ExitStack() as stack:
        otel = stack.enter_context(_otel_child(name, annotations))
        sub = None
        if parent_entity is not None:
            from aws_xray_sdk.core.models.subsegment import Subsegment

            sub = Subsegment(name, "local", attempt.segment)
            parent_entity.add_subsegment(sub)
            for key, value in annotations.items():
                sub.put_annotation(key, value)
            attempt.open.append(sub)
        before = _current.get()
        own = _child_context(before, otel, sub)
        token = _current.set(own)
        try:
            yield own
        except BaseException as exc:
            if sub is not None:
                sub.add_exception(exc, traceback.extract_tb(exc.__traceback__, limit=10))
            raise
        finally:
            _current.reset(token)
            if sub is not None:
                attempt.open.remove(sub)
                sub.close()


# ---- OpenTelemetry -------------------------------------------------------------------------------------------------


def _tracer() -> Any | None:
    global _otel_missing
    provider = _overrides["tracer_provider"]
    if provider is None:
        return None
    if provider is _UNSET:
        if _otel_missing:
            return None
        if "opentelemetry.trace" not in sys.modules:
            try:
                import opentelemetry.trace  # noqa: F401 - importable: the application may have configured it
            except ImportError:
                _otel_missing = True
                return None
        from opentelemetry import trace

        return trace.get_tracer(TRACER_NAME)
    return provider.get_tracer(TRACER_NAME)


@contextmanager
def _otel_span(name: str, parent: TraceContext | None, attributes: Mapping[str, Any]) -> Iterator[Any | None]:
    tracer = _tracer()
    if tracer is None:
        yield None
        return
    from opentelemetry import trace
    from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, TraceFlags

    context = links = None
    if parent is not None and parent.parent_id is not None:
        remote = SpanContext(int(parent.trace_id, 16), int(parent.parent_id, 16), is_remote=True,
                             trace_flags=TraceFlags(TraceFlags.SAMPLED if parent.sampled else TraceFlags.DEFAULT))
        context, links = trace.set_span_in_context(NonRecordingSpan(remote)), [Link(remote)]
    with tracer.start_as_current_span(name, context=context, kind=SpanKind.CONSUMER, attributes=dict(attributes),
                                      links=links) as otel:
        yield otel if otel.is_recording() else None


@contextmanager
def _otel_child(name: str, attributes: Mapping[str, Any]) -> Iterator[Any | None]:
    tracer = _tracer()
    if tracer is None:
        yield None
        return
    with tracer.start_as_current_span(name, attributes=dict(attributes)) as otel:
        yield otel if otel.is_recording() else None


# ---- X-Ray -----------------------------------------------------------------------------------------------------------


def _xray_emitter() -> Any | None:
    """Where X-Ray segments go: the configured emitter, else a UDP emitter to the X-Ray daemon (made on first use),
    where one is known: AWS_XRAY_DAEMON_ADDRESS, or a Lambda invocation's trace (Lambda sets both where tracing is
    on). None where aws-xray-sdk is missing or disabled (AWS_XRAY_SDK_ENABLED=false), or no daemon is known."""
    global _emitter
    configured = _overrides["xray_emitter"]
    if configured is not _UNSET:
        return configured
    if os.environ.get("AWS_XRAY_SDK_ENABLED", "true").strip().lower() == "false":
        return None
    if not (os.environ.get("AWS_XRAY_DAEMON_ADDRESS") or os.environ.get(LAMBDA_TRACE_VARIABLE)):
        return None
    if _emitter is None:
        try:
            from aws_xray_sdk.core.emitters.udp_emitter import UDPEmitter
        except ImportError:
            return None
        _emitter = UDPEmitter()
    return _emitter


def _xray_segment(name: str, parent: TraceContext | None, names: Mapping[str, Any],
                  attributes: Mapping[str, Any]) -> Any | None:
    if parent is None or _xray_emitter() is None:
        return None
    trace_id, parent_id, sampled = parent.xray_ids()
    if sampled is False:
        return None
    from aws_xray_sdk.core.models.segment import Segment

    segment = Segment(name, traceid=f"1-{trace_id[:8]}-{trace_id[8:]}", parent_id=parent_id, sampled=True)
    for key, value in names.items():
        segment.put_annotation(key, value)
    segment.put_metadata("messaging", dict(attributes), "taskqueue")
    return segment


def _send(segment: Any) -> None:
    emitter = _xray_emitter()
    if emitter is None:
        return
    segment.close()
    emitter.send_entity(segment)


# ---- the attempt's own context ---------------------------------------------------------------------------------------


def _own_context(parent: TraceContext | None, otel: Any | None, segment: Any | None) -> TraceContext | None:
    """The attempt's context: its OpenTelemetry span and X-Ray segment as parents of what it calls (one of them for
    both sides when only one records), in the producer's trace."""
    w3c = _otel_context(otel)
    xray = None
    if segment is not None:
        xray = TraceContext(segment.trace_id[2:].replace("-", ""), segment.id, True)
    if w3c is None and xray is None:
        return parent
    return combine(w3c or xray, xray)


def _child_context(before: TraceContext | None, otel: Any | None, sub: Any | None) -> TraceContext | None:
    w3c = _otel_context(otel)
    xray = None
    if sub is not None:
        xray = TraceContext(sub.trace_id[2:].replace("-", ""), sub.id, True)
    if w3c is None and xray is None:
        return before
    if xray is None and before is not None and before.xray_trace_id is not None:
        xray = TraceContext(before.xray_trace_id, before.xray_parent_id, before.xray_sampled)
    return combine(w3c or xray, xray)


def _otel_context(otel: Any | None) -> TraceContext | None:
    if otel is None:
        return None
    context = otel.get_span_context()
    return parse_traceparent(f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}")
