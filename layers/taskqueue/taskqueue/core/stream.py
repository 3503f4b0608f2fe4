"""What a queue-table stream record means for the queues (pure: images in, a decision out)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from taskqueue.core.errors import InvalidEvent
from taskqueue.core.states import TaskStatus

TTL_PRINCIPAL = "dynamodb.amazonaws.com"
# Agent-table queue entries (taskqueue.matching.agents) carry entity="entry" and the queue whose calls they serve.
AGENT_ENTRY_ENTITY = "entry"
# The taskStatus values a task image may carry; any other is a malformed record.
_STATES = tuple(status.value for status in TaskStatus)


class ChangeKind(StrEnum):
    CREATED = "created"  # a new PENDING task: its queue's worker should run
    SHED = "shed"  # removed by TTL while still PENDING: load shedding
    CLEANED = "cleaned"  # removed by TTL after it finished: retention cleanup
    AGENT_QUEUED = "agent-queued"  # an agent entered a matching queue: that queue's matcher should run
    OTHER = "other"  # nothing for Trigger to do


@dataclass(frozen=True)
class StreamChange:
    kind: ChangeKind
    queue: str | None
    task_id: str | None
    request_id: str | None = None  # CREATED: the request that created the task (its correlation id)


def is_ttl_delete(event_name: str, user_identity: Mapping[str, Any] | None) -> bool:
    identity = user_identity or {}
    return event_name == "REMOVE" and identity.get("type") == "Service" and identity.get("principalId") == TTL_PRINCIPAL


def classify(
    event_name: str,
    user_identity: Mapping[str, Any] | None,
    new_image: Mapping[str, Any] | None,
    old_image: Mapping[str, Any] | None,
) -> StreamChange:
    """Classify one record from deserialized images; a task record without its queue or status is malformed."""
    if event_name == "INSERT" and new_image and new_image.get("entity") == AGENT_ENTRY_ENTITY:
        if not new_image.get("queue") or not new_image.get("agentId"):
            raise InvalidEvent("INSERT record of an agent queue entry names no queue or agentId")
        return StreamChange(ChangeKind.AGENT_QUEUED, str(new_image["queue"]), None)
    if event_name == "INSERT":
        image = _task_image(new_image, "NewImage", event_name)
        kind = ChangeKind.CREATED if image["taskStatus"] == TaskStatus.PENDING else ChangeKind.OTHER
        request_id = image.get("requestId")
        return StreamChange(kind, str(image["queue"]), str(image["taskId"]), request_id if isinstance(request_id, str) else None)
    if is_ttl_delete(event_name, user_identity):
        image = _task_image(old_image, "OldImage", event_name)
        kind = ChangeKind.SHED if image["taskStatus"] == TaskStatus.PENDING else ChangeKind.CLEANED
        return StreamChange(kind, str(image["queue"]), str(image["taskId"]))
    return StreamChange(ChangeKind.OTHER, None, None)


def _task_image(image: Mapping[str, Any] | None, which: str, event_name: str) -> Mapping[str, Any]:
    if not image:
        raise InvalidEvent(f"{event_name} record has no {which}: the table stream must be NEW_AND_OLD_IMAGES")
    missing = [name for name in ("taskId", "queue", "taskStatus") if name not in image]
    if missing:
        raise InvalidEvent(f"{event_name} record's {which} is not a task: missing {', '.join(missing)}")
    if not isinstance(image["queue"], str) or not image["queue"]:
        raise InvalidEvent(f"{event_name} record's {which} names no queue (queue={image['queue']!r})")
    if image["taskStatus"] not in _STATES:
        raise InvalidEvent(
            f"{event_name} record's {which} has taskStatus={image['taskStatus']!r}, which is no state "
            f"(one of {', '.join(_STATES)})"
        )
    return image
