"""Matcher: the worker of queue "calls" (FIFO with filtering), and the door for agent events.

Events:
- an SNS wake-up from ProcessTasksTopic (attribute queue=calls) or {"queue": "calls"}: match waiting calls,
  oldest first, each with the longest-waiting matching agent, for up to the time budget; tail-call through
  TriggerTopic if calls that could match remain;
- {"action": "agentAvailable", "agent": {"agentId", "name", "attributes": {"language": [...], "gender": [...]}}};
- {"action": "agentOffline", "agentId": "..."};
- {"action": "callEnded", "agentId": "...", "callId": "..."} (callId optional);
- {"action": "queueDepth", "preferences": {"language": "fr"}}: agents waiting for that combination.
"""

from __future__ import annotations

import functools
from dataclasses import asdict
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from taskqueue import matching
from taskqueue.errors import InvalidTaskInput
from taskqueue.matcher import Matcher, MatcherServices, MatchReport
from taskqueue.notify import queue_of_wakeup
from taskqueue.worker import claim_window_seconds

logger = Logger()
tracer = Tracer()
metrics = Metrics()

ACTIONS = ("agentAvailable", "agentOffline", "callEnded", "queueDepth")


@functools.cache
def services() -> MatcherServices:
    return MatcherServices.from_env()


def handle(event: dict[str, Any], remaining_seconds: float, owner: str, svc: MatcherServices) -> dict[str, Any]:
    if "action" in event:
        return handle_agent_event(event, svc)
    queue = queue_of_wakeup(event)
    if queue != svc.match_settings.queue:
        raise InvalidTaskInput(f"the Matcher serves queue {svc.match_settings.queue!r}, not {queue!r}")
    report = run_matcher(svc, owner, claim_window_seconds(svc.base.settings.time_budget_seconds, remaining_seconds))
    return {k: v for k, v in asdict(report).items() if k != "wait_times_ms"} | {"waitTimesMs": report.wait_times_ms[:50]}


def run_matcher(svc: MatcherServices, owner: str, budget_seconds: float) -> MatchReport:
    matcher = Matcher(svc.base.store, svc.agents, owner=owner, clock=svc.base.clock)
    report = matcher.run(budget_seconds)
    if report.work_remains:
        svc.base.notifier.tail_call(report.queue)
    emit_metrics(report)
    logger.info("matcher finished", extra={k: v for k, v in asdict(report).items() if k != "wait_times_ms"})
    return report


def handle_agent_event(event: dict[str, Any], svc: MatcherServices) -> dict[str, Any]:
    action = event["action"]
    agents = svc.agents
    if action == "agentAvailable":
        profile = matching.parse_profile(event.get("agent") or {}, svc.match_settings.attributes)
        outcome = agents.put_available(profile)
        agent_id = profile.agent_id
    elif action == "agentOffline":
        agent_id = matching.validate_agent_id(event.get("agentId"))
        outcome = agents.offline(agent_id)
    elif action == "callEnded":
        agent_id = matching.validate_agent_id(event.get("agentId"))
        call_id = event.get("callId")
        if call_id is not None and not isinstance(call_id, str):
            raise InvalidTaskInput(f"callId must be a string, got {call_id!r}")
        outcome = agents.call_ended(agent_id, call_id)
    elif action == "queueDepth":
        key = matching.preferences_key(event.get("preferences"), svc.match_settings.attributes)
        return {"queueKey": key, "depth": agents.depth(key)}
    else:
        raise InvalidTaskInput(f"unknown action {action!r}; known actions: {', '.join(ACTIONS)}")
    metrics.add_dimension(name="queue", value=svc.match_settings.queue)
    metrics.add_metric(name="AgentEvents", unit=MetricUnit.Count, value=1)
    logger.info("agent event", extra={"action": action, "agent_id": agent_id, "outcome": outcome.value})
    return {"action": action, "agentId": agent_id, "outcome": outcome.value}


def emit_metrics(report: MatchReport) -> None:
    metrics.add_dimension(name="queue", value=report.queue)
    for name, value in (
        ("CallsMatched", report.matched),
        ("NoAgent", report.no_agent),
        ("MatchConflicts", report.conflicts),
        ("CallsDeadLettered", report.invalid),
        ("TailCalls", int(report.work_remains)),
    ):
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    for waited in report.wait_times_ms[:100]:
        metrics.add_metric(name="WaitTimeAtMatch", unit=MetricUnit.Milliseconds, value=waited)


@metrics.log_metrics
@tracer.capture_lambda_handler
@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(event, context.get_remaining_time_in_millis() / 1000, context.aws_request_id, services())
