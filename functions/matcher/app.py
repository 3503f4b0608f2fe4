"""Matcher: the worker of queue "calls" (FIFO with filtering).

Events: a batch of the queue table's stream (CallStream: a call written PENDING, the queue resumed, calls DynamoDB's
TTL shed) or of the agent table's stream (AgentStream: an agent who became available), an SNS wake-up from
WorkerWakeUpTopic (attribute queue=calls: a tail call, the safety net) or {"queue": "calls"}: match waiting calls,
oldest first, each with the longest-waiting matching agent, for up to the time budget; tail-call (a wake-up) if
calls that could match remain. A wake-up for a queue outside WORKER_QUEUES (the template sets "calls") or an event
that is no wake-up is refused with a clear error, before any claim.

Agent events ({"action": "agentAvailable" | "agentOffline" | "callEnded" | "queueDepth", ...}) go to the
AgentEvents function (functions/agent_events): this function's reserved concurrency would make Lambda refuse
them (HTTP 429) while a matching run is in progress.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from taskqueue.core import metrics as handler_metrics
from taskqueue.core.correlation import Correlation, log_under, of_event
from taskqueue.core.describe import shown
from taskqueue.core.errors import InvalidEvent, InvalidTaskInput, TaskQueueError
from taskqueue.matching.matcher import Matcher, MatchReport
from taskqueue.services import MatcherServices
from taskqueue.wakeups.notify import queue_of_wakeup
from taskqueue.work.stream_batch import is_stream_batch, read_batch

logger = Logger()
tracer = Tracer()
metrics = Metrics()


@functools.cache
def services() -> MatcherServices:
    return MatcherServices.from_env()


def handle(event: Any, remaining_seconds: float, owner: str, svc: MatcherServices) -> dict[str, Any]:
    match_queue = svc.match_settings.queue
    if isinstance(event, Mapping) and "action" in event:
        raise InvalidEvent(
            f"agent events ({shown(event['action'], 60)}) go to the AgentEvents function (AgentEventsFunction, stack output "
            "AgentEventsFunctionName), not the Matcher: the Matcher serves wake-ups of queue "
            f"{match_queue!r} only, and its reserved concurrency would refuse agent events (HTTP 429) "
            "while a matching run is in progress"
        )
    if is_stream_batch(event):  # a new call, an agent freed: the batch says only that the queue has work
        batch = read_batch(event["Records"], svc.base.settings.served_queues)
        for queue, shed in sorted(batch.shed.items()):
            handler_metrics.count("TasksShed", queue, shed)
        if all(isinstance(r, Mapping) and r.get("eventName") == "REMOVE" for r in event["Records"]):  # sheds only
            return {"stoppedBy": "nothing-to-run"}
        event = {"queue": match_queue, "reason": "stream"}
    queue = queue_of_wakeup(event)
    svc.base.settings.check_served(queue)
    if queue != match_queue:
        raise InvalidTaskInput(
            f"the Matcher serves queue {match_queue!r} only (MATCH_QUEUE), not {queue!r}: a wake-up for {queue!r} goes "
            "to that queue's own worker"
        )
    correlation = of_event(event, owner)  # the chain this wake-up belongs to: logged, and passed on by a tail call
    log_under(logger, correlation)
    report = run_matcher(
        svc, owner, claim_window_seconds(svc.base.settings.time_budget_seconds, remaining_seconds), correlation
    )
    return {k: v for k, v in asdict(report).items() if k != "wait_times_ms"} | {"waitTimesMs": report.wait_times_ms[:50]}


def run_matcher(
    svc: MatcherServices, owner: str, budget_seconds: float, correlation: Correlation | None = None
) -> MatchReport:
    matcher = Matcher(svc.base.store, svc.agents, owner=owner, clock=svc.base.clock)
    report = matcher.run(budget_seconds)
    if report.work_remains:  # a tail call: a publish SNS refuses after its retries fails the run (Lambda retries it)
        if svc.base.notifier is None:
            raise TaskQueueError("WORKER_WAKE_UP_TOPIC_ARN is not set: the Matcher cannot tail-call for the calls it left")
        svc.base.notifier.publish_wakeup(report.queue, "tail-call", correlation)
    emit_metrics(report)
    logger.info("matcher finished", extra={k: v for k, v in asdict(report).items() if k != "wait_times_ms"})
    return report


def claim_window_seconds(time_budget: float, remaining_seconds: float) -> float:
    """Match for the time budget, but never past half the invocation's remaining time, so a pass in flight when the
    window ends can still commit before the Lambda timeout."""
    return max(0.0, min(time_budget, remaining_seconds / 2))


def emit_metrics(report: MatchReport) -> None:
    handler_metrics.add_report(metrics, report.queue, (
        ("CallsMatched", report.matched),
        ("NoAgent", report.no_agent),
        ("MatchConflicts", report.conflicts),
        ("CallsDeadLettered", report.invalid),
        ("AgentsTimedOut", report.timed_out),
        ("TasksShed", report.shed),
        ("TailCalls", int(report.work_remains)),
    ), "WaitTimeAtMatch", report.wait_times_ms)


@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    return handle(event, context.get_remaining_time_in_millis() / 1000, context.aws_request_id, services())
