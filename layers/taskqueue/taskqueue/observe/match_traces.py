"""A match's span in its call's trace: the Matcher does for a call and its agent what ProcessTasks does for an attempt
(taskqueue.observe.tracing). Called once a match transaction has committed, with what it matched; each call whose
producer stored a trace context gets a ``process calls`` span (an X-Ray segment of that trace, an OpenTelemetry span)
annotated with the call's id, queue, group and the agent it got (``agent_id``). The contact center that connects the
two reads the call's ``trace`` (TaskQueueClient.get) to go on in the same trace.

The calls' contexts are not in the index the Matcher reads (no index projects them): one eventually consistent
BatchGetItem per committed transaction reads them (half a read unit per call, about $0.06 per million calls), only
while a tracing backend records. A trace never fails a match: an error here is logged and the match stands.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from aws_lambda_powertools import Logger

from taskqueue.core.trace_context import TraceContext
from taskqueue.observe import tracing

logger = Logger(child=True)


class CallTraces(Protocol):
    def call_traces(self, task_ids: Sequence[str]) -> dict[str, TraceContext]: ...


def record_matches(store: CallTraces, result: Any) -> None:
    """The spans of the calls a committed ``PairsResult`` matched (``result.matched``: (pair, recorded) pairs)."""
    try:
        matched = list(getattr(result, "matched", ()) or ())
        if not matched or not tracing.recording():
            return
        traces = store.call_traces([pair.call.task_id for pair, _ in matched])
        for pair, _ in matched:
            call = pair.call
            with tracing.attempt_span(call.task_id, call.queue, call.group, 1, traces.get(call.task_id),
                                      extra={"agent_id": pair.head.agent_id}):
                pass
    except Exception as exc:  # noqa: BLE001 - a trace never fails a match
        logger.warning("could not record the matches' spans", extra={"error": f"{type(exc).__name__}: {exc}"})
