"""On-failure destinations: where Lambda sends an asynchronous event or a stream batch that ran out of
retries (an SQS queue or an SNS topic of the stack), as one JSON message."""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

log = logging.getLogger("local.engine")


def now_iso() -> str:
    """Now as Lambda writes it in a destination record: UTC, milliseconds, ``Z``."""
    now = dt.datetime.now(dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


class Destinations:
    """Sends failure records to the destinations the template names, by ARN; counts what it sent."""

    def __init__(self, sqs: Any, sns: Any) -> None:
        self.sqs = sqs
        self.sns = sns
        self.sent = 0

    def send(self, destination: str, record: dict[str, Any]) -> None:
        self.sent += 1
        body = json.dumps(record, default=str)
        try:
            if destination.startswith("arn:aws:sqs:"):
                url = self.sqs.get_queue_url(QueueName=destination.rsplit(":", 1)[1])["QueueUrl"]
                self.sqs.send_message(QueueUrl=url, MessageBody=body)
            elif destination.startswith("arn:aws:sns:"):
                self.sns.publish(TopicArn=destination, Message=body)
            else:
                log.warning("on-failure destination %s is not emulated", destination)
        except Exception as exc:  # noqa: BLE001 - the engine keeps running; the loss is logged
            log.warning("could not send to on-failure destination %s: %s", destination, exc)
