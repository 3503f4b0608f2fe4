"""The emulator's change counts (local/emulator/changes.py) and the engine's feed of them
(local/delivery/change_feed.py): which requests count, the wait for the next, and the fallback to a cadence."""

from __future__ import annotations

import threading

import pytest

from local.delivery.change_feed import ChangeFeed
from local.emulator.changes import ITEMS, MESSAGES, SCHEDULES, Changes, change_kind


def request(target: str = "", service: str = "", method: str = "POST") -> dict[str, str]:
    environ = {"REQUEST_METHOD": method, "HTTP_X_AMZ_TARGET": target}
    if service:
        environ["HTTP_AUTHORIZATION"] = (f"AWS4-HMAC-SHA256 Credential=testing/20261127/us-east-1/{service}/aws4_request, "
                                         "SignedHeaders=host, Signature=0")
    return environ


@pytest.mark.parametrize(("environ", "kind"), [
    (request("DynamoDB_20120810.PutItem", "dynamodb"), ITEMS),
    (request("DynamoDB_20120810.TransactWriteItems", "dynamodb"), ITEMS),
    (request("DynamoDB_20120810.BatchWriteItem", "dynamodb"), ITEMS),
    (request("DynamoDB_20120810.Query", "dynamodb"), None),
    (request("DynamoDB_20120810.GetItem", "dynamodb"), None),
    (request("DynamoDBStreams_20120810.GetRecords", "dynamodb"), None),
    (request("AmazonSQS.SendMessage", "sqs"), MESSAGES),
    (request("AmazonSQS.ReceiveMessage", "sqs"), None),
    (request("AmazonSQS.DeleteMessageBatch", "sqs"), None),
    (request("", "sns"), MESSAGES),  # query protocol: the action is in the body, not read
    (request("", "scheduler", "POST"), SCHEDULES),
    (request("", "scheduler", "DELETE"), SCHEDULES),
    (request("", "scheduler", "GET"), None),
    (request("", "lambda", "POST"), None),
    (request(), None),
])
def test_only_requests_that_can_give_a_poller_something_count(environ, kind):
    assert change_kind(environ) == kind


def test_a_wait_returns_at_the_next_change_of_a_kind_it_waits_for_and_not_for_another():
    changes = Changes()
    changes.note(ITEMS)
    assert changes.wait_past({ITEMS: 0}, timeout=60)[ITEMS] == 1  # already past: no wait
    assert changes.wait_past({ITEMS: 1, MESSAGES: 0}, timeout=0.01) == {ITEMS: 1, MESSAGES: 0, SCHEDULES: 0}
    noted = threading.Timer(0.05, changes.note, args=(MESSAGES,))
    noted.start()
    assert changes.wait_past({MESSAGES: 0}, timeout=60)[MESSAGES] == 1
    changes.note(SCHEDULES)
    assert changes.wait_past({MESSAGES: 1}, timeout=0.01)[MESSAGES] == 1  # a schedule written: not a message


def test_an_endpoint_without_the_feed_leaves_a_poller_at_its_cadence():
    feed = ChangeFeed("http://127.0.0.1:9").start()  # nothing listens on the discard port
    assert feed.wait_past(ITEMS, feed.seen(ITEMS), timeout=60)  # cannot tell: poll now

