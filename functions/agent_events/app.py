"""AgentEvents: the door for agent events of the matching queue "calls" (synchronous invokes by the contact center).

Events (examples in events/agent_events-*.json):
- {"action": "agentAvailable", "agent": {"agentId", "name", "attributes": {"language": [...], "gender": [...]}}};
- {"action": "agentOffline", "agentId": "..."};
- {"action": "callEnded", "agentId": "...", "callId": "..."} (callId optional);
- {"action": "agentHeartbeat", "agentId": "..."}: the agent is still there (AGENT_TIMEOUT_SECONDS);
- {"action": "callerHungUp", "callId": "..."}: the caller left; their call is never matched (taskqueue.matching.hangup);
- {"action": "queueDepth", "preferences": {"language": "fr"}}: agents waiting for that combination.

Its own function, without reserved concurrency, not the Matcher's: the Matcher has reserved concurrency
(MatcherConcurrency, 1) and a run lasts up to its time budget, and Lambda refuses a synchronous invoke over
reserved concurrency at once (HTTP 429 TooManyRequestsException), so an agent could not log in or end a call
while a matching run was in progress. Each event is a few DynamoDB requests on the agent table. An agent who
queues (logs in, ends a call) is new work for the Matcher: the agent table's stream starts it (its AgentStream
event), as the queue table's stream does for a new call. A hang-up writes the call in the queue table (one
conditional UpdateItem).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from taskqueue.core.describe import json_kind, shown
from taskqueue.core.errors import InvalidAgentInput
from taskqueue.matching import rules as matching
from taskqueue.matching.hangup import HangUpOutcome, hang_up
from taskqueue.services import MatcherServices

logger = Logger()
tracer = Tracer()
metrics = Metrics()

# The fields each action takes besides "action"; any other field is refused (a typo such as "callID" would
# otherwise be ignored without a word).
FIELDS: dict[str, tuple[str, ...]] = {
    "agentAvailable": ("agent",),
    "agentOffline": ("agentId",),
    "callEnded": ("agentId", "callId"),
    "agentHeartbeat": ("agentId",),
    "callerHungUp": ("callId",),
    "queueDepth": ("preferences",),
}
ACTIONS = tuple(FIELDS)


@functools.cache
def services() -> MatcherServices:
    return MatcherServices.from_env()


def handle(event: Any, svc: MatcherServices) -> dict[str, Any]:
    action = event.get("action") if isinstance(event, Mapping) else None
    if action is None:
        got = f"keys {sorted(map(str, event))[:10]}" if isinstance(event, Mapping) else f"a JSON {json_kind(event)}"
        raise InvalidAgentInput(
            f"AgentEvents takes agent events {{\"action\": one of {', '.join(ACTIONS)}, ...}}, got {got}; "
            "wake-ups of queue 'calls' go to the Matcher"
        )
    if not isinstance(action, str) or action not in FIELDS:
        raise InvalidAgentInput(f"unknown action {shown(action)}; known actions: {', '.join(ACTIONS)}")
    unknown = sorted(str(k) for k in event if k != "action" and k not in FIELDS[action])
    if unknown:
        raise InvalidAgentInput(f"unknown field(s) {unknown} in a {action} event; its fields: {['action', *FIELDS[action]]}")
    agents = svc.agents
    if action == "callerHungUp":
        return caller_hung_up(event.get("callId"), svc)
    if action == "agentAvailable":
        agent = event.get("agent")
        if not isinstance(agent, Mapping):
            raise InvalidAgentInput(
                f'agent must be a JSON object {{"agentId", "name", "attributes"}}, got {shown(agent)}'
            )
        profile = matching.parse_profile(agent, svc.match_settings.attributes)
        outcome = agents.put_available(profile)
        agent_id = profile.agent_id
    elif action == "agentOffline":
        agent_id = matching.validate_agent_id(event.get("agentId"))
        outcome = agents.offline(agent_id)
    elif action == "callEnded":
        agent_id = matching.validate_agent_id(event.get("agentId"))
        call_id = event.get("callId")
        if call_id is not None and not isinstance(call_id, str):
            raise InvalidAgentInput(f"callId must be a string, got {shown(call_id)}")
        outcome = agents.call_ended(agent_id, call_id)
    elif action == "agentHeartbeat":
        agent_id = matching.validate_agent_id(event.get("agentId"))
        outcome = agents.heartbeat(agent_id)
    else:  # queueDepth
        preferences = event.get("preferences")
        if preferences is not None and not isinstance(preferences, Mapping):
            raise InvalidAgentInput(
                f"preferences must be a JSON object of attribute -> value (or absent: no preference), got {shown(preferences)}"
            )
        key = matching.preferences_key(preferences, svc.match_settings.attributes)
        return {"queueKey": key, "depth": agents.depth(key)}
    metrics.add_dimension(name="queue", value=svc.match_settings.queue)
    metrics.add_metric(name="AgentEvents", unit=MetricUnit.Count, value=1)
    logger.info("agent event", extra={"action": action, "agent_id": agent_id, "outcome": outcome.value})
    return {"action": action, "agentId": agent_id, "outcome": outcome.value}


def caller_hung_up(call_id: Any, svc: MatcherServices) -> dict[str, Any]:
    """The caller left: their call is cancelled (never matched), or the answer says what had become of it."""
    queue = svc.match_settings.queue
    done = hang_up(svc.base.store, call_id, queue)
    metrics.add_dimension(name="queue", value=queue)
    metrics.add_metric(name="AgentEvents", unit=MetricUnit.Count, value=1)
    if done.outcome is HangUpOutcome.HUNG_UP:
        metrics.add_metric(name="CallsHungUp", unit=MetricUnit.Count, value=1)
    logger.info("caller hung up", extra={"call_id": done.call_id, "outcome": done.outcome.value, "agent_id": done.agent_id})
    answer: dict[str, Any] = {"action": "callerHungUp", "callId": done.call_id, "outcome": done.outcome.value}
    return answer | ({"agentId": done.agent_id} if done.agent_id else {})


@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
@logger.inject_lambda_context
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    return handle(event, services())
