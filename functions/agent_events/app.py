"""AgentEvents: the door for agent events of the matching queue "calls" (synchronous invokes by the contact center).

Events (examples in events/agent_events-*.json):
- {"action": "agentAvailable", "agent": {"agentId", "name", "attributes": {"language": [...], "gender": [...]}}};
- {"action": "agentOffline", "agentId": "..."};
- {"action": "callEnded", "agentId": "...", "callId": "..."} (callId optional);
- {"action": "queueDepth", "preferences": {"language": "fr"}}: agents waiting for that combination.

Its own function, without reserved concurrency, not the Matcher's: the Matcher has reserved concurrency
(MatcherConcurrency, 1) and a run lasts up to its time budget, and Lambda refuses a synchronous invoke over
reserved concurrency at once (HTTP 429 TooManyRequestsException), so an agent could not log in or end a call
while a matching run was in progress. Each event is a few DynamoDB requests on the agent table; a newly queued
agent wakes the Matcher through the agent table's stream.
"""

from __future__ import annotations

import functools
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from taskqueue import matching
from taskqueue.errors import InvalidTaskInput
from taskqueue.matcher import MatcherServices

logger = Logger()
tracer = Tracer()
metrics = Metrics()

ACTIONS = ("agentAvailable", "agentOffline", "callEnded", "queueDepth")


@functools.cache
def services() -> MatcherServices:
    return MatcherServices.from_env()


def handle(event: dict[str, Any], svc: MatcherServices) -> dict[str, Any]:
    action = event.get("action") if isinstance(event, dict) else None
    if action is None:
        raise InvalidTaskInput(
            f"AgentEvents takes agent events {{\"action\": one of {', '.join(ACTIONS)}, ...}}; "
            "wake-ups of queue 'calls' go to the Matcher"
        )
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


@metrics.log_metrics
@tracer.capture_lambda_handler
@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(event, services())
