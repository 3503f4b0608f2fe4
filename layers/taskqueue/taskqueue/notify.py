"""Wake-ups and tail calls over SNS. The message attribute ``queue`` is what subscriptions filter on."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from taskqueue.errors import ConfigError, InvalidTaskInput, TaskQueueError
from taskqueue.settings import Settings


class PublishError(TaskQueueError):
    """SNS did not take a message; the caller must report the work as not done so it is retried."""


class Notifier:
    def __init__(self, client: Any, settings: Settings) -> None:
        self._sns = client
        self._settings = settings

    @classmethod
    def from_settings(cls, settings: Settings) -> Notifier:
        return cls(boto3.client("sns"), settings)

    def wake_worker(self, queue: str, reason: str) -> str:
        """Ask the worker subscribed to ``queue`` to run (Trigger -> ProcessTasksTopic)."""
        return self._publish(self._settings.process_tasks_topic_arn, "PROCESS_TASKS_TOPIC_ARN", queue, reason)

    def tail_call(self, queue: str, reason: str = "tail-call") -> str:
        """Ask Trigger to wake ``queue`` again (worker -> TriggerTopic): claimable work remained at the budget."""
        return self._publish(self._settings.trigger_topic_arn, "TRIGGER_TOPIC_ARN", queue, reason)

    def _publish(self, topic_arn: str | None, variable: str, queue: str, reason: str) -> str:
        if not topic_arn:
            raise ConfigError(f"{variable} is not set: it must be the ARN of the topic to publish on")
        self._settings.order_of(queue)
        try:
            response = self._sns.publish(
                TopicArn=topic_arn,
                Message=json.dumps({"queue": queue, "reason": reason}),
                MessageAttributes={"queue": {"DataType": "String", "StringValue": queue}},
            )
        except (ClientError, BotoCoreError) as exc:
            raise PublishError(f"could not publish a wake-up for queue {queue!r} on {topic_arn}: {exc}") from exc
        return str(response["MessageId"])


def queue_of_wakeup(event: Mapping[str, Any]) -> str:
    """The queue a wake-up is for: an SNS notification's ``queue`` attribute (or JSON body), or a direct
    invoke's ``{"queue": "<name>"}``."""
    records = event.get("Records")
    if records:
        sns = records[0].get("Sns") or {}
        attribute = (sns.get("MessageAttributes") or {}).get("queue")
        if attribute and attribute.get("Value"):
            return str(attribute["Value"])
        try:
            return str(json.loads(sns.get("Message", ""))["queue"])
        except (ValueError, KeyError, TypeError):
            raise InvalidTaskInput(
                f"SNS wake-up names no queue (no 'queue' message attribute or JSON field): {sns.get('Message')!r:.200}"
            ) from None
    queue = event.get("queue")
    if not isinstance(queue, str):
        raise InvalidTaskInput('a wake-up must be an SNS notification or {"queue": "<name>"}; got keys ' + str(sorted(event)[:10]))
    return queue
