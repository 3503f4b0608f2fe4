"""A producer's trace context, as a task carries it from its enqueue to its runner (pure: parsing and conversion).

A DynamoDB stream carries no trace header, so the context is stored on the task itself, in two small attributes kept
out of every index projection: ``traceparent`` (W3C Trace Context, what OpenTelemetry propagates) and
``awsTraceHeader`` (X-Ray's ``Root=...;Parent=...;Sampled=...``, the name SQS gives the same system attribute).
Both say the same three things: a 128-bit trace id, the 64-bit id of the span (segment) that enqueued, and whether
the trace is sampled. X-Ray takes W3C trace ids written its way (``1-<8 hex>-<24 hex>``), so one converts into the
other: the X-Ray header is stored only when it names another trace or parent than ``traceparent`` (a producer whose
OpenTelemetry span and X-Ray segment are not one trace), which keeps a traced task 66 bytes larger, not 150.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from taskqueue.core.errors import InvalidTaskInput

TRACEPARENT = "traceparent"
AWS_TRACE_HEADER = "awsTraceHeader"
# The HTTP headers a runner passes on (tracing.headers()): W3C's, and X-Ray's.
TRACEPARENT_HEADER = "traceparent"
XRAY_HEADER = "X-Amzn-Trace-Id"
# Lambda sets the invocation's X-Ray header in this variable.
LAMBDA_TRACE_VARIABLE = "_X_AMZN_TRACE_ID"
MAX_HEADER_CHARS = 256

_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
_XRAY_ROOT = re.compile(r"^1-([0-9a-f]{8})-([0-9a-f]{24})$")
_SPAN_ID = re.compile(r"^[0-9a-f]{16}$")


@dataclass(frozen=True)
class TraceContext:
    """Where a task's trace goes on. ``trace_id``: 32 lowercase hex digits (W3C form; X-Ray's root is
    ``1-<first 8>-<last 24>``); ``parent_id``: 16 hex digits, the span or segment that enqueued (None: an X-Ray root
    without a parent); ``sampled``: the producer's sampling decision (None: not decided, as X-Ray's ``Sampled=?``).
    ``xray_trace_id``/``xray_parent_id``: the producer's X-Ray segment when it is not the same trace and parent
    (an OpenTelemetry span and an X-Ray segment both active, unrelated)."""

    trace_id: str
    parent_id: str | None
    sampled: bool | None = None
    xray_trace_id: str | None = None
    xray_parent_id: str | None = None
    xray_sampled: bool | None = None

    @property
    def traceparent(self) -> str | None:
        """The W3C ``traceparent`` header (None without a parent id: W3C needs one)."""
        if self.parent_id is None:
            return None
        return f"00-{self.trace_id}-{self.parent_id}-{'01' if self.sampled else '00'}"

    @property
    def xray_header(self) -> str:
        """The X-Ray trace header (``X-Amzn-Trace-Id``): the producer's own segment when it was another trace."""
        trace_id, parent, sampled = self.xray_ids()
        parts = [f"Root={xray_root(trace_id)}"]
        if parent is not None:
            parts.append(f"Parent={parent}")
        parts.append("Sampled=" + ("?" if sampled is None else "1" if sampled else "0"))
        return ";".join(parts)

    @property
    def xray_root(self) -> str:
        """The trace id as X-Ray writes it (``1-xxxxxxxx-yyyyyyyyyyyyyyyyyyyyyyyy``), of the X-Ray side."""
        return xray_root(self.xray_ids()[0])

    def xray_ids(self) -> tuple[str, str | None, bool | None]:
        """(trace id, parent id, sampled) of the X-Ray side: its own when stored apart, else the W3C one's."""
        if self.xray_trace_id is not None:
            return self.xray_trace_id, self.xray_parent_id, self.xray_sampled
        return self.trace_id, self.parent_id, self.sampled

    def headers(self) -> dict[str, str]:
        """The headers to send downstream so its spans join this trace: ``traceparent`` and ``X-Amzn-Trace-Id``."""
        found = {XRAY_HEADER: self.xray_header}
        if self.traceparent is not None:
            found[TRACEPARENT_HEADER] = self.traceparent
        return found

    def attributes(self) -> dict[str, str]:
        """The stored form (item attributes, and the CreateTasks request's fields): ``traceparent``, and
        ``awsTraceHeader`` only when the W3C one cannot say it."""
        found: dict[str, str] = {}
        if self.traceparent is not None:
            found[TRACEPARENT] = self.traceparent
        if self.traceparent is None or self.xray_trace_id is not None:
            found[AWS_TRACE_HEADER] = self.xray_header
        return found


def xray_root(trace_id: str) -> str:
    return f"1-{trace_id[:8]}-{trace_id[8:]}"


def parse_traceparent(text: str) -> TraceContext:
    """A W3C ``traceparent``; any version but ``ff`` is read by its first four fields (the spec's rule)."""
    match = _TRACEPARENT.match(text.strip()) if isinstance(text, str) and len(text) <= MAX_HEADER_CHARS else None
    if match is None or match.group(1) == "ff" or (match.group(1) == "00" and match.group(5)):
        raise InvalidTaskInput(f"traceparent {text!r:.100} is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)")
    trace_id, parent_id, flags = match.group(2), match.group(3), match.group(4)
    if set(trace_id) == {"0"} or set(parent_id) == {"0"}:
        raise InvalidTaskInput(f"traceparent {text!r:.100} has an all-zero trace or parent id, which W3C forbids")
    return TraceContext(trace_id, parent_id, bool(int(flags, 16) & 1))


def parse_xray_header(text: str) -> TraceContext:
    """An X-Ray trace header, ``Root=1-...;Parent=...;Sampled=...`` (other fields, such as Lineage, are dropped)."""
    if not isinstance(text, str) or len(text) > MAX_HEADER_CHARS:
        raise InvalidTaskInput(f"X-Ray trace header {text!r:.100} is not text of at most {MAX_HEADER_CHARS} characters")
    fields = dict(part.strip().split("=", 1) for part in text.split(";") if "=" in part)
    root = _XRAY_ROOT.match(fields.get("Root", "").strip().lower())
    if root is None:
        raise InvalidTaskInput(f"X-Ray trace header {text!r:.100} has no Root=1-<8 hex>-<24 hex>")
    parent = fields.get("Parent", "").strip().lower() or None
    if parent is not None and not _SPAN_ID.match(parent):
        raise InvalidTaskInput(f"X-Ray trace header {text!r:.100}: Parent must be 16 hex digits")
    sampled = {"1": True, "0": False}.get(fields.get("Sampled", "").strip())
    return TraceContext(root.group(1) + root.group(2), parent, sampled)


def combine(w3c: TraceContext | None, xray: TraceContext | None) -> TraceContext | None:
    """One context of a W3C one and an X-Ray one (either may be None): the X-Ray side is kept apart only when it
    names another trace or parent."""
    if w3c is None or w3c.parent_id is None:
        return xray if w3c is None else w3c
    if xray is None or (xray.trace_id, xray.parent_id) == (w3c.trace_id, w3c.parent_id):
        return w3c
    return TraceContext(w3c.trace_id, w3c.parent_id, w3c.sampled, xray.trace_id, xray.parent_id, xray.sampled)


def from_attributes(values: Mapping[str, str | None]) -> TraceContext | None:
    """The context of the stored attributes or request fields (``traceparent``, ``awsTraceHeader``); None without."""
    w3c, xray = values.get(TRACEPARENT), values.get(AWS_TRACE_HEADER)
    return combine(parse_traceparent(w3c) if w3c else None, parse_xray_header(xray) if xray else None)


def context_of(value: object) -> TraceContext | None:
    """A context from what a caller hands in: a TraceContext, a ``traceparent`` or X-Ray header string, or a
    mapping of headers (``traceparent``, ``X-Amzn-Trace-Id``, any case) or of stored attributes; None: none."""
    if value is None or isinstance(value, TraceContext):
        return value
    if isinstance(value, str):
        return parse_xray_header(value) if "Root=" in value else parse_traceparent(value)
    if isinstance(value, Mapping):
        lowered = {str(k).lower(): v for k, v in value.items()}
        w3c = lowered.get(TRACEPARENT_HEADER)
        xray = lowered.get(XRAY_HEADER.lower()) or lowered.get(AWS_TRACE_HEADER.lower())
        return combine(parse_traceparent(w3c) if w3c else None, parse_xray_header(xray) if xray else None)
    raise InvalidTaskInput(
        f"a trace context is a traceparent or X-Ray header string, a mapping of headers or a TraceContext, "
        f"got {type(value).__name__}"
    )
