"""Why a producer's wake-up failed (taskqueue.wakeups.producer.failure): the refused request read from the error
behind it, named with its IAM action and resource, and what to do."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from taskqueue.client.create import CreateSummary
from taskqueue.core.errors import TaskQueueError
from taskqueue.wakeups.notify import PublishError
from taskqueue.wakeups.producer import WakeUp, failure, no_topic

TOPIC = "arn:aws:sns:us-east-1:123456789012:stack-WorkerWakeUpTopic-ABC"


def behind(outer: type[Exception], code: str, operation: str) -> Exception:
    try:
        try:
            raise ClientError({"Error": {"Code": code, "Message": f"said {code}"}}, operation)
        except ClientError as exc:
            raise outer(f"refused: {exc}") from exc
    except outer as wrapped:
        return wrapped


@pytest.mark.parametrize(("error", "cause", "words"), [
    (behind(PublishError, "AuthorizationError", "Publish"), "access-denied", ["sns:Publish", TOPIC, "ProducerPolicyArn"]),
    (behind(PublishError, "KMSAccessDenied", "Publish"), "access-denied", ["KMS key"]),
    (behind(PublishError, "NotFound", "Publish"), "not-found", [TOPIC, "WorkerWakeUpTopicArn"]),
    (behind(TaskQueueError, "AccessDeniedException", "UpdateItem"), "access-denied",
     ["dynamodb:UpdateItem", "queue 'work'", "control item", "'table-1'"]),
    (behind(TaskQueueError, "AccessDeniedException", "update_item"), "access-denied", ["dynamodb:UpdateItem"]),
    (behind(TaskQueueError, "ThrottlingException", "UpdateItem"), "error", ["dynamodb:UpdateItem", "ThrottlingException"]),
    (TaskQueueError("no route"), "error", ["no route"]),
])
def test_a_failure_names_the_refused_permission_and_what_to_do(error, cause, words):
    wakeup = failure("work", error, TOPIC, "table-1")
    assert (wakeup, wakeup.cause, wakeup.failed) == ("failed", cause, True)
    for word in words:
        assert word in wakeup.problem, (word, wakeup.problem)


def test_a_wakeup_is_the_outcome_string_createtasks_answers():
    woken = WakeUp("woken")
    assert woken == "woken" and json.dumps(woken) == '"woken"' and not woken.failed and woken.cause is None
    missing = no_topic()
    assert (missing, missing.cause) == ("failed", "no-topic") and "WorkerWakeUpTopicArn" in missing.problem
    answer = CreateSummary("work", 1, 0, ("t",), 0, missing).as_dict()
    assert (answer["wakeup"], answer["wakeupCause"]) == ("failed", "no-topic") and type(answer["wakeup"]) is str
    assert "wakeupCause" not in CreateSummary("work", 1, 0, ("t",), 0, woken).as_dict()
