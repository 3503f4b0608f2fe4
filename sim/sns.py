"""A fake of boto3's SNS client for what the product sends: ``publish`` (the Notifier's wake-ups and relays).

Each publish is a kernel yield point (``sim.faults.FakeService``: the harness's fault hook may throttle it, lose
its answer, slow it) and is recorded as a ``Published`` message with its attributes and virtual time. The harness
delivers them: ``take()`` hands over (and forgets) what was published so far, ``messages`` keeps everything.
``sns_record`` builds the record Lambda hands a subscribed function.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sim.faults import FakeService, FaultHook, aws_error, unknown_parameters
from sim.kernel import Kernel

_PUBLISH = frozenset({"TopicArn", "TargetArn", "PhoneNumber", "Message", "Subject", "MessageStructure",
                      "MessageAttributes", "MessageDeduplicationId", "MessageGroupId"})


@dataclass(frozen=True)
class Published:
    message_id: str
    topic_arn: str
    message: str
    attributes: Mapping[str, Mapping[str, str]]
    at_ms: int  # virtual epoch milliseconds
    sender: str | None  # the kernel task that published it

    def attribute(self, name: str) -> str | None:
        found = self.attributes.get(name)
        return None if found is None else found.get("StringValue")


class FakeSNS(FakeService):
    service = "sns"

    def __init__(self, kernel: Kernel | None = None, *, faults: FaultHook | None = None, rng: Any = None,
                 topics: list[str] | None = None) -> None:
        """``topics``: the ARNs that exist (a publish elsewhere is refused, NotFound); None: any ARN."""
        super().__init__(kernel, faults=faults, rng=rng)
        self.topics = None if topics is None else set(topics)
        self.messages: list[Published] = []
        self._taken = 0

    def publish(self, **params: Any) -> dict[str, Any]:
        unknown_parameters("Publish", params, _PUBLISH, ("Message",))

        def run(fault: Any) -> dict[str, Any]:
            topic = params.get("TopicArn") or params.get("TargetArn")
            if not topic:
                raise aws_error("InvalidParameter", "Invalid parameter: TopicArn or TargetArn Reason: no value for "
                                "required parameter", "Publish")
            if self.topics is not None and topic not in self.topics:
                raise aws_error("NotFound", "Topic does not exist", "Publish", status=404)
            attributes = {name: dict(value) for name, value in (params.get("MessageAttributes") or {}).items()}
            for name, value in attributes.items():
                if value.get("DataType") not in ("String", "Number", "Binary", "String.Array"):
                    raise aws_error("ParameterValueInvalid", f"The message attribute '{name}' has an invalid message "
                                    "attribute type, the set of supported type prefixes is Binary, Number, and String.",
                                    "Publish")
            message_id = f"00000000-0000-4000-8000-{len(self.messages) + 1:012d}"
            task = self.kernel.current if self.kernel is not None else None
            now = self.kernel.clock.now_ms() if self.kernel is not None else 0
            self.messages.append(Published(message_id, topic, str(params["Message"]), attributes, now,
                                           task.name if task else None))
            return {"MessageId": message_id, "ResponseMetadata": {"HTTPStatusCode": 200, "RetryAttempts": 0}}

        return self.serve("Publish", params, run)

    def take(self) -> list[Published]:
        """The messages published since the last ``take``, oldest first."""
        new = self.messages[self._taken:]
        self._taken = len(self.messages)
        return new


def sns_record(message: Published, subscription_arn: str | None = None) -> dict[str, Any]:
    """The record of an SNS event as Lambda delivers ``message`` to a subscribed function."""
    return {
        "EventSource": "aws:sns",
        "EventVersion": "1.0",
        "EventSubscriptionArn": subscription_arn or f"{message.topic_arn}:00000000-0000-0000-0000-000000000000",
        "Sns": {
            "Type": "Notification",
            "MessageId": message.message_id,
            "TopicArn": message.topic_arn,
            "Subject": None,
            "Message": message.message,
            "Timestamp": dt.datetime.fromtimestamp(message.at_ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
            "MessageAttributes": {name: {"Type": value.get("DataType", "String"), "Value": value.get("StringValue")}
                                  for name, value in message.attributes.items()},
        },
    }


def sns_event(messages: list[Published]) -> dict[str, Any]:
    """An SNS event (Lambda delivers one record per invocation; a list for tests of several)."""
    return {"Records": [sns_record(m) for m in messages]}


def decoded(message: Published) -> Any:
    return json.loads(message.message)
