"""SNS -> Lambda subscriptions: each subscription is an SQS queue subscribed in the emulator (unfiltered);
a poller applies the subscription's filter policy with the engine's own matcher (``local/template/filter_patterns.py``) and
hands one Lambda SNS event per message to the function's asynchronous queue."""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from local.delivery.async_invoker import AsyncInvoker
from local.delivery.change_feed import ChangeFeed, wait_for_change
from local.emulator.changes import MESSAGES
from local.template import filter_patterns

log = logging.getLogger("local.engine")


@dataclass
class SnsSubscription:
    function: str
    topic_arn: str
    queue_url: str
    subscription_arn: str
    filter_policy: Any
    scope: str


class SnsDelivery:
    """Delivers SNS notifications to subscribed functions. Each subscription is an SQS queue subscribed
    in the emulator without a filter policy; one thread polls them, applies the policy with the engine's
    matcher, and submits one Lambda SNS event per message to the function's async queue."""

    def __init__(self, sqs: Any, invokers: dict[str, AsyncInvoker], poll_seconds: float = 0.1,
                 changes: ChangeFeed | None = None) -> None:
        self.sqs = sqs
        self.changes = changes  # with the emulator's change feed, an idle poller waits for a send instead of asking
        self.invokers = invokers
        self.subscriptions: list[SnsSubscription] = []
        self.poll_seconds = poll_seconds
        self.stats = {"delivered": 0, "filtered": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sns-delivery", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            seen = self.changes.seen(MESSAGES) if self.changes else 0
            busy = False
            for sub in self.subscriptions:
                try:
                    messages = self.sqs.receive_message(QueueUrl=sub.queue_url, MaxNumberOfMessages=10,
                                                        WaitTimeSeconds=0).get("Messages", [])
                except Exception as exc:  # noqa: BLE001 - the emulator is going away, or a hiccup: next poll
                    if self._stop.is_set():
                        return
                    log.warning("SNS poll failed: %s", exc)
                    continue
                for message in messages:
                    busy = True
                    self._deliver(sub, json.loads(message["Body"]))
                if messages:
                    self.sqs.delete_message_batch(QueueUrl=sub.queue_url, Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)])
            if not busy:
                wait_for_change(self.changes, MESSAGES, seen, self._stop, self.poll_seconds, started)

    def _deliver(self, sub: SnsSubscription, envelope: dict[str, Any]) -> None:
        attributes = envelope.get("MessageAttributes") or {}
        if not filter_patterns.sns_policy_matches(sub.filter_policy, attributes, envelope.get("Message", ""), sub.scope):
            self.stats["filtered"] += 1
            return
        self.stats["delivered"] += 1
        event = {"Records": [{
            "EventSource": "aws:sns",
            "EventVersion": "1.0",
            "EventSubscriptionArn": sub.subscription_arn,
            "Sns": {
                "Type": envelope.get("Type", "Notification"),
                "MessageId": envelope.get("MessageId"),
                "TopicArn": envelope.get("TopicArn", sub.topic_arn),
                "Subject": envelope.get("Subject"),
                "Message": envelope.get("Message"),
                "Timestamp": envelope.get("Timestamp"),
                "SignatureVersion": envelope.get("SignatureVersion", "1"),
                "Signature": envelope.get("Signature", "EXAMPLE"),
                "SigningCertUrl": envelope.get("SigningCertURL", "EXAMPLE"),
                "UnsubscribeUrl": envelope.get("UnsubscribeURL", "EXAMPLE"),
                "MessageAttributes": {k: {"Type": v.get("Type"), "Value": v.get("Value")} for k, v in attributes.items()},
            },
        }]}
        self.invokers[sub.function].submit(event, "sns")

