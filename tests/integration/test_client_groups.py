"""The producer client's groups (taskqueue/client/groups.py) on both DynamoDB engines: an enqueue names its group, a
group's limits are set and cleared, a pause from a Retry-After holds its tasks while others are served, a resume
wakes the queue, and a group's view reads back what was set."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import boto3
import pytest

from taskqueue.client import TaskQueueClient
from taskqueue.client.groups import pause_until_ms, rate_of
from taskqueue.core.errors import InvalidField, InvalidTaskInput
from taskqueue.services import Services
from taskqueue.store import TaskStore
from taskqueue.wakeups.notify import Notifier
from taskqueue.work.worker import Worker
from tests.conftest import make_settings

pytestmark = pytest.mark.dynamodb_engines


@pytest.fixture
def client(dynamodb, topics, clock) -> TaskQueueClient:
    settings = make_settings(topics, worker_timeout_seconds=180, group_concurrency=3)
    return TaskQueueClient(Services(settings, TaskStore(dynamodb, settings, clock), Notifier(boto3.client("sns"), settings), clock))


def test_an_enqueue_names_its_group_and_the_groups_view_counts_it(client):
    task_id = client.enqueue({"n": 1}, group="customer-17")
    assert client.get(task_id).group == "customer-17"
    client.enqueue_many({"n": 2}, count=3, group="customer-17")
    view = client.group("customer-17")
    assert (view.waiting, view.running, view.limits.concurrency, view.own) == (4, 0, 3, frozenset())
    assert [g.group for g in client.groups().groups] == ["customer-17", "default"]
    with pytest.raises(InvalidField, match="group"):
        client.enqueue({"n": 3}, group="no spaces")


def test_a_groups_limits_are_set_and_cleared_back_to_the_defaults(client):
    limits = client.set_group_limits("acme", concurrency=1, rate="10/2")
    assert (limits.concurrency, limits.rate, limits.period_seconds) == (1, 10, 2.0)
    assert client.group("acme").own == {"concurrency", "rate"}
    limits = client.set_group_limits("acme", clear=["concurrency", "rate"])
    assert (limits.concurrency, limits.rate) == (3, None)
    with pytest.raises(InvalidTaskInput, match="sets no limit"):
        client.set_group_limits("acme", rate="0")
    with pytest.raises(InvalidTaskInput, match="resume_group"):
        client.set_group_limits("acme", clear=["pause"])


def test_a_paused_group_waits_while_others_are_served_and_a_resume_starts_the_queue(client, topics, dynamodb):
    clock = client.services.clock
    held = client.enqueue({"n": 1}, group="limited-api")
    other = client.enqueue({"n": 2}, group="other")
    limits = client.pause_group("limited-api", retry_after="120")
    assert limits.paused_until_ms == clock.now_ms() + 120_000 and client.group("limited-api").paused(clock.now_ms())
    ran: list[str] = []
    Worker(client.services.store, lambda task: ran.append(task.task_id), capacity=1, owner="w", clock=clock).run("work", 5)
    assert ran == [other] and client.get(held).status == "PENDING"
    clock.advance(60)
    assert client.resume_group("limited-api").paused_until_ms is None
    # The resume's mark: its INSERT on the table's stream starts the queue's worker. Nothing is published.
    marks = [i for i in dynamodb.scan(TableName=client.settings.queue_table_name)["Items"]
             if i["taskId"]["S"].startswith("queue#work#resume#")]
    assert len(marks) == 1 and topics.wakeups() == []
    Worker(client.services.store, lambda task: ran.append(task.task_id), capacity=1, owner="w", clock=clock).run("work", 5)
    assert ran == [other, held]


def test_a_pause_comes_from_seconds_a_time_or_a_retry_after_date():
    now = 1_800_000_000_000
    assert pause_until_ms(now, seconds=30) == now + 30_000
    assert pause_until_ms(now, until_ms=now + 5) == now + 5
    date = format_datetime(datetime.fromtimestamp(now / 1000 + 90, UTC), usegmt=True)
    assert pause_until_ms(now, retry_after=date) == now + 90_000
    for bad in ({}, {"seconds": 1, "until_ms": now}, {"seconds": 0}, {"retry_after": "soon"},
                {"until_ms": now + 31 * 86400 * 1000}):
        with pytest.raises(InvalidTaskInput):
            pause_until_ms(now, **bad)
    assert rate_of("600/60") == (600, 60.0) and rate_of((5, 1.0)) == (5, 1.0) and rate_of(None) is None
