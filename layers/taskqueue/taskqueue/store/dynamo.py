"""DynamoDB plumbing shared by the two table adapters (``store`` for tasks, ``agents`` for agents).

One place decides what a ``ClientError`` means for the queue:

- ``ConditionalCheckFailedException``: the write lost its condition, a domain outcome (``ConditionLost``);
- ``TransactionConflictException``: the item is inside another transaction in flight (a matcher's match).
  botocore's standard retry mode does not retry it, so it is retried here with bounded, jittered backoff;
  if it persists it is the lost race it is (``ConditionLost``), never an error;
- throttling past botocore's retries, a missing table, an invalid request (e.g. an item over 400 KB): the
  adapter's error class, with a message that says what to check.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from taskqueue.core.clock import Clock
from taskqueue.core.errors import TaskQueueError

THROTTLING_CODES = frozenset({"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"})
CONFLICT_CODE = "TransactionConflictException"
# Attempts of one request that meets TransactionConflictException (a transaction lasts milliseconds).
CONFLICT_ATTEMPTS = 4
_CONFLICT_BACKOFF_SECONDS = 0.02


class ConditionLost(Exception):
    """A ConditionExpression did not hold, or the item stayed inside another transaction: a lost race.
    Caught by the adapters, which turn it into their domain outcome (``None`` / ``False``). ``item``: the item as
    it was, when the request asked for it (``ReturnValuesOnConditionCheckFailure=ALL_OLD``) and it exists."""

    def __init__(self, message: str, item: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.item = item


def make_client(region: str | None = None) -> Any:
    """A DynamoDB client with standard retries (throttling is retried by botocore first)."""
    return boto3.client("dynamodb", region_name=region, config=Config(retries={"mode": "standard", "max_attempts": 6}))


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def cancellation_reasons(exc: ClientError) -> list[str]:
    """The per-item reason codes of a cancelled TransactWriteItems ("None" for an item that was not the cause)."""
    reasons = [str(r.get("Code") or "None") for r in exc.response.get("CancellationReasons", [])]
    if not reasons:  # older SDKs put the codes only in the message: "[None, ConditionalCheckFailed]"
        message = exc.response.get("Error", {}).get("Message", "")
        inside = message[message.rfind("[") + 1 : message.rfind("]")]
        reasons = [r.strip() for r in inside.split(",")] if inside else []
    return reasons


def call(
    client: Any,
    operation: str,
    *,
    table: str,
    setting: str,
    error: type[TaskQueueError],
    clock: Clock,
    rng: random.Random | None = None,
    **request: Any,
) -> dict[str, Any]:
    """One DynamoDB request; errors translated as the module docstring says."""
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            return getattr(client, operation)(**request)
        except ClientError as exc:
            code = error_code(exc)
            if code != CONFLICT_CODE:
                raise translate(exc, table, setting, error) from exc
            if attempt == CONFLICT_ATTEMPTS:
                raise ConditionLost(f"{operation} on {table!r} stayed in conflict with another transaction") from exc
            clock.sleep((rng or random).uniform(0, _CONFLICT_BACKOFF_SECONDS * 2**attempt))
    raise AssertionError("unreachable")


RETRYABLE_CODES = THROTTLING_CODES | {"InternalServerError", "ServiceUnavailable"}


def is_retryable(exc: BaseException) -> bool:
    """Did DynamoDB refuse for a passing reason (throttling, a server error), so that trying later may work?"""
    return bool(getattr(exc, "retryable", False))


def translate(exc: ClientError, table: str, setting: str, error: type[TaskQueueError]) -> Exception:
    """``setting`` names the environment variable that holds the table's name (for the hint). The error
    returned carries ``retryable`` (see ``is_retryable``)."""
    translated = _translate(exc, table, setting, error)
    translated.retryable = error_code(exc) in RETRYABLE_CODES  # type: ignore[attr-defined]
    return translated


def _translate(exc: ClientError, table: str, setting: str, error: type[TaskQueueError]) -> Exception:
    code = error_code(exc)
    message = exc.response.get("Error", {}).get("Message", "")
    if code == "ConditionalCheckFailedException":
        return ConditionLost(message, exc.response.get("Item"))
    if code == CONFLICT_CODE:
        return ConditionLost(f"conflict with another transaction on {table!r}: {message}")
    if code == "ResourceNotFoundException":
        return error(
            f"table {table!r} (or its index) does not exist: check {setting} and that the stack is deployed ({message})"
        )
    if code in THROTTLING_CODES:
        return error(f"DynamoDB is throttling {table!r} even after retries ({code}); the caller should retry later")
    if code == "ValidationException":
        return error(f"DynamoDB rejected a request on {table!r} as invalid: {message}")
    return error(f"DynamoDB error {code or 'unknown'} on {table!r}: {message}")


def count_all(call_fn: Callable[..., dict[str, Any]], operation: str, request: dict[str, Any]) -> int:
    """Total ``Count`` of a ``Select=COUNT`` query or scan, following every page."""
    request = dict(request)
    total = 0
    while True:
        response = call_fn(operation, **request)
        total += int(response.get("Count", 0))
        if "LastEvaluatedKey" not in response:
            return total
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
