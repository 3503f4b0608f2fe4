from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

# Set before any boto3 client or Powertools object is made.
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        # botocore 1.44 otherwise sends DynamoDB requests to an account-id endpoint that moto does not intercept.
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_SERVICE_NAME": "taskqueue",
        "POWERTOOLS_METRICS_NAMESPACE": "TaskQueues",
        "POWERTOOLS_DEV": "false",
    }
)

from moto import mock_aws  # noqa: E402

from taskqueue.services import Services  # noqa: E402
from taskqueue.settings import Settings  # noqa: E402
from taskqueue.notify import Notifier  # noqa: E402
from taskqueue.store import TaskStore  # noqa: E402
from tests.support import FakeClock, create_queue_table  # noqa: E402

TABLE = "test-queue-table"


class Topics:
    """The two SNS topics, each with an SQS queue subscribed so tests can read what was published."""

    def __init__(self) -> None:
        self.sns = boto3.client("sns")
        self.sqs = boto3.client("sqs")
        self.trigger_arn, self.trigger_queue = self._topic("trigger-topic")
        self.process_arn, self.process_queue = self._topic("process-tasks-topic")

    def _topic(self, name: str) -> tuple[str, str]:
        arn = self.sns.create_topic(Name=name)["TopicArn"]
        url = self.sqs.create_queue(QueueName=f"{name}-probe")["QueueUrl"]
        queue_arn = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint=queue_arn)
        return arn, url

    def messages(self, url: str) -> list[dict[str, Any]]:
        """Every notification published so far (drains the probe queue)."""
        found: list[dict[str, Any]] = []
        while True:
            batch = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            if not batch:
                return found
            for message in batch:
                found.append(json.loads(message["Body"]))
                self.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    def wakeups(self) -> list[str]:
        """Queues named by the messages on ProcessTasksTopic."""
        return [m["MessageAttributes"]["queue"]["Value"] for m in self.messages(self.process_queue)]

    def tail_calls(self) -> list[str]:
        return [m["MessageAttributes"]["queue"]["Value"] for m in self.messages(self.trigger_queue)]


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def dynamodb(aws: None) -> Any:
    client = boto3.client("dynamodb")
    create_queue_table(client, TABLE)
    return client


@pytest.fixture
def topics(aws: None) -> Topics:
    return Topics()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def make_settings(topics: Topics | None = None, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "queue_table_name": TABLE,
        "trigger_topic_arn": topics.trigger_arn if topics else None,
        "process_tasks_topic_arn": topics.process_arn if topics else None,
        "retry_base_seconds": 0.0,
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def settings(topics: Topics) -> Settings:
    return make_settings(topics)


@pytest.fixture
def store(dynamodb: Any, settings: Settings, clock: FakeClock) -> TaskStore:
    return TaskStore(dynamodb, settings, clock)


@pytest.fixture
def services(store: TaskStore, settings: Settings, clock: FakeClock) -> Services:
    return Services(settings, store, Notifier(boto3.client("sns"), settings), clock)
