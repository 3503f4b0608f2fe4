"""Wake-ups over SNS (WorkerWakeUpTopic): a worker's tail call at its budget, and Trigger's (the safety net, a queue's
scheduled wake-up at its delayed head). The message attribute ``queue`` is what the workers' subscriptions filter on."""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

from taskqueue.core.correlation import Correlation
from taskqueue.core.describe import described, shown
from taskqueue.core.errors import ConfigError, InvalidEvent, TaskQueueError
from taskqueue.core.keys import validate_queue_name
from taskqueue.core.settings import Settings
from taskqueue.store.dynamo import error_code


class PublishError(TaskQueueError):
    """SNS did not take a message; the caller must report the work as not done so it is retried."""


# A publish SNS refused for a passing reason (throttling, KMS throttling, an internal error, a dropped connection)
# is tried again with full-jitter backoff, up to PUBLISH_ATTEMPTS tries in all (waits drawn from [0, 0.1 s],
# [0, 0.2 s], [0, 0.4 s], never over PUBLISH_BACKOFF_MAX_SECONDS): at most ~0.7 s more for a wake-up that would
# otherwise be lost until the safety net, since an undelivered wake-up is retried by nothing else.
PUBLISH_ATTEMPTS = 4
PUBLISH_BACKOFF_SECONDS = 0.1
PUBLISH_BACKOFF_MAX_SECONDS = 1.0
# Refusals no retry can change (a wrong topic, a missing permission, a disabled key): not tried again.
PERMANENT_PUBLISH_CODES = frozenset({
    "AuthorizationError", "InvalidParameter", "InvalidParameterValue", "InvalidSecurity", "NotFound",
    "ValidationException", "KMSAccessDenied", "KMSDisabled", "KMSInvalidState", "KMSNotFound", "KMSOptInRequired",
})

_log = logging.getLogger("taskqueue.wakeups.notify")


def publish_retryable(exc: Exception) -> bool:
    """May publishing again succeed? Not for a refusal in PERMANENT_PUBLISH_CODES or a request botocore refused
    to send (bad parameters); yes for any other SNS error and for connection errors."""
    if isinstance(exc, ClientError):
        return error_code(exc) not in PERMANENT_PUBLISH_CODES
    return isinstance(exc, BotoCoreError) and not isinstance(exc, ParamValidationError)


class Notifier:
    """Publishes wake-ups. A refused publish is tried again (see PUBLISH_ATTEMPTS); ``attempts`` and
    ``sleep``/``rng`` are for tests. ``published``, ``retries`` and ``failures`` count what happened."""

    def __init__(
        self,
        client: Any,
        settings: Settings,
        *,
        attempts: int = PUBLISH_ATTEMPTS,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if attempts < 1:
            raise ConfigError(f"a Notifier must try a publish at least once, got attempts={attempts}")
        self._sns = client
        self._settings = settings
        self._attempts = attempts
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.published = 0
        self.retries = 0  # publishes tried again after a refusal
        self.failures = 0  # publishes given up (PublishError raised)

    @classmethod
    def from_settings(cls, settings: Settings) -> Notifier:
        return cls(boto3.client("sns"), settings)

    def publish_wakeup(self, queue: str, reason: str, correlation: Correlation | None = None) -> str:
        """Ask the worker subscribed to ``queue`` to run (WorkerWakeUpTopic)."""
        return self._publish(
            self._settings.worker_wake_up_topic_arn, "WORKER_WAKE_UP_TOPIC_ARN", queue, reason, correlation
        )

    def _publish(
        self, topic_arn: str | None, variable: str, queue: str, reason: str, correlation: Correlation | None
    ) -> str:
        """``queue`` is the attribute subscriptions filter on; the correlation ids ride along (taskqueue.core.correlation)."""
        if not topic_arn:
            raise ConfigError(f"{variable} is not set: it must be the ARN of the topic to publish on")
        self._settings.order_of(queue)
        for attempt in range(1, self._attempts + 1):
            try:
                response = self._sns.publish(
                    TopicArn=topic_arn,
                    Message=json.dumps({"queue": queue, "reason": reason}),
                    MessageAttributes={
                        "queue": {"DataType": "String", "StringValue": queue},
                        **(correlation.message_attributes() if correlation else {}),
                    },
                )
            except (ClientError, BotoCoreError) as exc:
                if attempt == self._attempts or not publish_retryable(exc):
                    self.failures += 1
                    raise PublishError(
                        f"could not publish a wake-up for queue {queue!r} on {topic_arn} "
                        f"({attempt} attempt{'s' if attempt > 1 else ''}): {exc}"
                    ) from exc
                self.retries += 1
                ceiling = min(PUBLISH_BACKOFF_MAX_SECONDS, PUBLISH_BACKOFF_SECONDS * 2 ** (attempt - 1))
                delay = self._rng.uniform(0, ceiling)
                _log.warning("publish refused; trying again in %.2f s (attempt %d of %d): %s",
                             delay, attempt, self._attempts, exc)
                self._sleep(delay)
                continue
            self.published += 1
            return str(response["MessageId"])
        raise AssertionError("unreachable")


# What a direct wake-up may carry: the queue, and the reason Trigger's messages give.
_WAKEUP_FIELDS = ("queue", "reason")
_DIRECT = '{"queue": "<name>"}'


def queue_of_wakeup(event: object) -> str:
    """The queue a worker's wake-up is for: an SNS notification's ``queue`` attribute (or JSON body), or a direct
    invoke's ``{"queue": "<name>"}``. Anything else raises InvalidEvent naming what was wrong."""
    queues = wakeup_queues(event)
    if len(queues) > 1:
        raise InvalidEvent(f"a worker's wake-up names one queue; this one names {len(queues)}: {queues}")
    return queues[0]


def wakeup_queues(event: object) -> list[str]:
    """The queues an event asks to wake, in order, each once: every record of an SNS notification checked, or a
    direct invoke ``{"queue": "<name>"}``. Checked whole before anything acts on it."""
    if not isinstance(event, Mapping):
        raise InvalidEvent(f"a wake-up must be a JSON object, an SNS notification or {_DIRECT}; got {described(event)}")
    if "Records" in event:
        records = event["Records"]
        if not isinstance(records, list) or not records:
            raise InvalidEvent(f"a wake-up's Records must be a non-empty list of SNS records, got {shown(records)}")
        queues: list[str] = []
        for index, record in enumerate(records):
            queue = _queue_of_sns_record(record, index)
            if queue not in queues:
                queues.append(queue)
        return queues
    if "queue" not in event:
        raise InvalidEvent(
            f"a wake-up must be an SNS notification or {_DIRECT}; got keys {sorted(map(str, event))[:10]}"
        )
    unknown = sorted(str(k) for k in event if k not in _WAKEUP_FIELDS)
    if unknown:
        raise InvalidEvent(f"unknown field(s) {unknown} in a wake-up: a direct wake-up is {_DIRECT} (\"reason\" optional)")
    return [_queue_name(event["queue"], "queue")]


def _queue_of_sns_record(record: object, index: int) -> str:
    where = f"Records[{index}]"
    if not isinstance(record, Mapping):
        raise InvalidEvent(f"{where} must be an SNS record (a JSON object), got {described(record)}")
    source = record.get("EventSource", record.get("eventSource", "aws:sns"))
    if source != "aws:sns":
        raise InvalidEvent(
            f"{where} is not an SNS record (EventSource {shown(source)}): a worker is woken by SNS notifications or {_DIRECT}"
        )
    sns = record.get("Sns")
    if not isinstance(sns, Mapping):
        raise InvalidEvent(f"{where} has no \"Sns\" object (got {shown(sns)}): not an SNS notification")
    attributes = sns.get("MessageAttributes")
    if attributes is not None and not isinstance(attributes, Mapping):
        raise InvalidEvent(f"{where}.Sns.MessageAttributes must be an object, got {shown(attributes)}")
    attribute = (attributes or {}).get("queue")
    if attribute is not None:
        value = attribute.get("Value") if isinstance(attribute, Mapping) else None
        kind = attribute.get("Type", "String") if isinstance(attribute, Mapping) else None
        if kind != "String" or not isinstance(value, str):
            raise InvalidEvent(
                f'{where}: the "queue" message attribute must be {{"Type": "String", "Value": "<queue>"}}, got {shown(attribute)}'
            )
        return _queue_name(value, f"{where}: the queue message attribute")
    message = sns.get("Message")
    try:
        body = json.loads(message) if isinstance(message, str) else None
    except ValueError:
        body = None
    if not isinstance(body, Mapping) or "queue" not in body:
        raise InvalidEvent(
            f"SNS wake-up names no queue (no 'queue' message attribute or JSON field): {message!r:.200}"
        )
    return _queue_name(body["queue"], f"{where}: the message's queue")


def _queue_name(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidEvent(f"{what} must be a string naming a queue, got {shown(value)}")
    return validate_queue_name(value)
