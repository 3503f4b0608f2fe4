"""One TransactWriteItems of the matching queue (an agent event's, a match's), sent so that DynamoDB's answers mean
what they say.

- **Idempotent.** Every transaction carries a ``ClientRequestToken``. When its answer is lost (a read timeout, a closed
  connection, a server error: it may have committed), it is sent again with the same token, and DynamoDB answers a
  transaction that committed as committed (for 10 minutes) instead of failing its conditions, which would read as a
  lost race (botocore's own retries re-send the same request, so the same token, too).
- **Throttling is not an error of the caller's.** A transaction cancelled by throttling (CancellationReasons
  ``ThrottlingError`` / ``ProvisionedThroughputExceeded``, which botocore does not retry) or refused whole past
  botocore's retries wrote nothing: it is sent again after a full-jitter backoff, a few times, with a new token; after
  that the outcome says ``throttled`` and the caller decides (the Matcher ends its run and tail-calls; an agent event
  fails, for the contact center to send again).
- **A lost race is an outcome.** ConditionalCheckFailed or TransactionConflict on items: the reason per item and,
  where the request asked for it (``ReturnValuesOnConditionCheckFailure``), the item as it was. Any other reason is an
  error.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError, HTTPClientError

from taskqueue.core.clock import Clock
from taskqueue.core.errors import TaskQueueError
from taskqueue.store import dynamo

# Reasons of a cancelled transaction that mean "an item changed under us": a lost race.
LOST_REASONS = frozenset({"ConditionalCheckFailed", "TransactionConflict", "None"})
# Reasons that mean DynamoDB throttled an item of it (the table's or a partition's capacity).
THROTTLED_REASONS = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"})
# Sends of one transaction that DynamoDB throttles (the first included), and the backoff's base between them.
THROTTLED_ATTEMPTS = 4
THROTTLED_BACKOFF_SECONDS = 0.05
# Sends of one transaction whose answer was lost, with its token (the first included).
ANSWER_LOST_ATTEMPTS = 3
_ANSWER_LOST_CODES = frozenset({"InternalServerError", "ServiceUnavailable"})


@dataclass(frozen=True)
class Cancelled:
    """A transaction that wrote nothing: DynamoDB's reason per item (one reason, the error code, when the request
    met another transaction as a whole), the item as it was where it was returned, or ``throttled``."""

    reasons: tuple[str, ...]
    items: tuple[Mapping[str, Any] | None, ...] = ()
    throttled: bool = False

    def item(self, index: int) -> Mapping[str, Any] | None:
        return self.items[index] if index < len(self.items) else None


def transact(db: Any, items: Sequence[dict[str, Any]], *, table: str, error: type[TaskQueueError], clock: Clock,
             rng: random.Random | None = None) -> Cancelled | None:
    """Send one TransactWriteItems (idempotent, throttling retried as the module docstring says): ``None`` if it
    committed, else what cancelled it. Errors other than a lost race or throttling raise ``error``."""
    rng = rng or random.Random()
    token = str(uuid.uuid4())
    throttled = 0
    answer_lost = 0
    while True:
        try:
            db.transact_write_items(TransactItems=list(items), ClientRequestToken=token)
            return None
        except HTTPClientError:  # the answer was lost: the transaction may have committed
            answer_lost += 1
            if answer_lost >= ANSWER_LOST_ATTEMPTS:
                raise
            continue
        except ClientError as exc:
            code = dynamo.error_code(exc)
            if code in _ANSWER_LOST_CODES and answer_lost + 1 < ANSWER_LOST_ATTEMPTS:
                answer_lost += 1
                continue
            cancelled = _cancelled(exc, code, table, error)
        if not cancelled.throttled:
            return cancelled
        throttled += 1
        if throttled >= THROTTLED_ATTEMPTS:
            return cancelled
        clock.sleep(rng.uniform(0, THROTTLED_BACKOFF_SECONDS * 2 ** (throttled - 1)))
        token = str(uuid.uuid4())  # it wrote nothing: the next send is a new transaction


def _cancelled(exc: ClientError, code: str, table: str, error: type[TaskQueueError]) -> Cancelled:
    if code == dynamo.CONFLICT_CODE:  # the whole request met another transaction: a lost race, no item named
        return Cancelled((code,))
    if code in dynamo.THROTTLING_CODES:  # the whole request, past botocore's retries
        return Cancelled((code,), throttled=True)
    if code != "TransactionCanceledException":
        raise dynamo.translate(exc, table, "AGENT_TABLE_NAME", error) from exc
    reasons = tuple(dynamo.cancellation_reasons(exc))
    if any(r in THROTTLED_REASONS for r in reasons) and all(r in LOST_REASONS | THROTTLED_REASONS for r in reasons):
        return Cancelled(reasons, throttled=True)
    if not reasons or any(r not in LOST_REASONS for r in reasons):
        raise error(f"a transaction on {table!r} was cancelled for reasons other than a lost race: {list(reasons)}") from exc
    items = tuple(r.get("Item") for r in exc.response.get("CancellationReasons", []))
    return Cancelled(reasons, items)
