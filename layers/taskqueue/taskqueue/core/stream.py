"""What a queue-table stream record says (pure): which deletions DynamoDB's TTL made."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TTL_PRINCIPAL = "dynamodb.amazonaws.com"


def is_ttl_delete(event_name: str, user_identity: Mapping[str, Any] | None) -> bool:
    identity = user_identity if isinstance(user_identity, Mapping) else {}  # a malformed record's: no TTL deletion
    return event_name == "REMOVE" and identity.get("type") == "Service" and identity.get("principalId") == TTL_PRINCIPAL
