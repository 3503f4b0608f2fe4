"""Following one task across functions: the ids a wake-up carries, and the log lines that show them.

A task's creating request id (CreateTasks' Lambda request id, stored as ``requestId``) is the *correlation id*.
A worker started by the table's stream logs every line of its invocation under the creating request of the first task
its batch names, and its tail call carries that id and the task's on (SNS message attributes ``correlation_id`` and
``task_id``) to the next worker. A start without them (the safety net, a scheduled wake-up, a direct invoke) begins a
new chain: the invocation's own request id. docs/operations.md has the
CloudWatch Logs Insights query that follows one task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger

CORRELATION_ATTRIBUTE = "correlation_id"
TASK_ATTRIBUTE = "task_id"
# The log key of the task whose creation woke this invocation (``task_id`` is the key of the task a line is about).
WAKE_UP_TASK_KEY = "wake_up_task_id"


@dataclass(frozen=True)
class Correlation:
    """The ids one wake-up carries: the chain's correlation id, and the task that started it (if one did)."""

    correlation_id: str | None = None
    task_id: str | None = None

    def message_attributes(self) -> dict[str, dict[str, str]]:
        """The SNS message attributes for these ids (none for an id that is not known)."""
        values = ((CORRELATION_ATTRIBUTE, self.correlation_id), (TASK_ATTRIBUTE, self.task_id))
        return {name: {"DataType": "String", "StringValue": value} for name, value in values if value}


def of_record(record: object) -> Correlation:
    """The ids an SNS record's message attributes carry; none for anything else (never raises: the wake-up's
    own parsing says what is wrong with a record)."""
    sns = record.get("Sns") if isinstance(record, Mapping) else None
    attributes = sns.get("MessageAttributes") if isinstance(sns, Mapping) else None
    if not isinstance(attributes, Mapping):
        return Correlation()
    return Correlation(_string(attributes.get(CORRELATION_ATTRIBUTE)), _string(attributes.get(TASK_ATTRIBUTE)))


def of_event(event: object, request_id: str | None) -> Correlation:
    """The ids of a worker's wake-up (its first SNS record); ``request_id`` as the correlation id when it
    carries none, so this invocation starts a chain of its own."""
    records = event.get("Records") if isinstance(event, Mapping) else None
    found = of_record(records[0]) if isinstance(records, list) and records else Correlation()
    return Correlation(found.correlation_id or request_id, found.task_id)


def log_under(logger: Logger, correlation: Correlation) -> None:
    """Every line ``logger`` (and its child loggers in the layer) writes from now on carries the correlation id
    and the waking task's id; the handler clears them when the next invocation starts (``clear_state``)."""
    logger.set_correlation_id(correlation.correlation_id)
    if correlation.task_id:
        logger.append_keys(**{WAKE_UP_TASK_KEY: correlation.task_id})


def _string(attribute: Any) -> str | None:
    value = attribute.get("Value") if isinstance(attribute, Mapping) else None
    return value if isinstance(value, str) and value else None
