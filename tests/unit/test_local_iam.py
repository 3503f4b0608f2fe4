"""IAM as AWS enforces it (local/iam): what a request needs, and the check on every request of a function's code,
raising the ClientError AWS answers where the request is made."""

from __future__ import annotations

import threading
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from local.iam.enforce import acting_as, unchecked
from local.iam.requests import Names, iam_requests
from tests.agent_support import AGENT_TABLE
from tests.conftest import TABLE
from tests.iam_support import TEST_NAMES, denials_expected, roles

NAMES = Names({TABLE: "QueueTable", AGENT_TABLE: "AgentTable", "worker-wake-up-topic": "WorkerWakeUpTopic"}, "stack")


def test_a_transaction_needs_each_items_own_action_and_nothing_for_returned_values_or_its_token():
    items = [
        {"Update": {"TableName": TABLE, "Key": {}, "UpdateExpression": "SET a = :a",
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
        {"Delete": {"TableName": AGENT_TABLE, "Key": {}}},
        {"ConditionCheck": {"TableName": AGENT_TABLE, "Key": {}, "ConditionExpression": "attribute_exists(pk)"}},
        {"Put": {"TableName": AGENT_TABLE, "Item": {}}},
    ]
    needed = list(iam_requests("dynamodb", "TransactWriteItems", {"TransactItems": items, "ClientRequestToken": "t"}, NAMES))
    assert needed == [("dynamodb:UpdateItem", "QueueTable"), ("dynamodb:DeleteItem", "AgentTable"),
                      ("dynamodb:ConditionCheckItem", "AgentTable"), ("dynamodb:PutItem", "AgentTable")]


def test_a_query_of_an_index_needs_the_index_and_unknown_names_stay_unmapped():
    assert list(iam_requests("dynamodb", "Query", {"TableName": TABLE, "IndexName": "ReadyIndex"}, NAMES)) == [
        ("dynamodb:Query", "QueueTable/index/ReadyIndex")]
    assert list(iam_requests("sns", "Publish", {"TopicArn": "arn:aws:sns:us-east-1:1:worker-wake-up-topic"}, NAMES)) == [
        ("sns:Publish", "WorkerWakeUpTopic")]
    assert list(iam_requests("dynamodb", "GetItem", {"TableName": "elsewhere"}, NAMES)) == [("dynamodb:GetItem", "?elsewhere")]
    schedule = {"Name": "wake-work", "GroupName": "teststack-WakeScheduleGroup-1A2B3C",
                "Target": {"RoleArn": "arn:aws:iam::1:role/teststack-WakeScheduleRole"}}
    assert list(iam_requests("scheduler", "CreateSchedule", schedule, TEST_NAMES)) == [
        ("scheduler:CreateSchedule", "schedule/${WakeScheduleGroup}/wake-work"), ("iam:PassRole", "WakeScheduleRole")]
    assert list(iam_requests("scheduler", "GetSchedule", {"Name": "wake-work"}, TEST_NAMES)) == [
        ("scheduler:GetSchedule", "?schedule/default/wake-work")]  # not the stack's group: unmapped


def test_the_grants_are_the_templates_after_the_sam_transform():
    granted = roles()
    assert ("dynamodb:ConditionCheckItem", "AgentTable") in granted["MatcherFunction"]
    assert ("dynamodb:GetItem", "AgentTable") not in granted["MatcherFunction"]  # a refused match returns the agent
    assert ("dynamodb:PutItem", "AgentTable") in granted["AgentEventsFunction"]
    assert ("dynamodb:Query", "QueueTable/index/ReadyIndex") in granted["MatcherFunction"]


def test_a_request_the_role_does_not_allow_fails_where_it_is_made(aws: None):
    client = boto3.client("dynamodb")
    with denials_expected() as denied:
        with acting_as("MatcherFunction"), pytest.raises(ClientError) as refused:
            client.get_item(TableName=AGENT_TABLE, Key={"pk": {"S": "AGENT#ana"}, "sk": {"S": "PROFILE"}})
    assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
    assert "dynamodb:GetItem" in str(refused.value) and "MatcherFunction" in str(refused.value)
    assert [(d["function"], d["action"], d["resource"]) for d in denied] == [
        ("MatcherFunction", "dynamodb:GetItem", "AgentTable")]


def _request_in_a_thread(client: Any) -> BaseException | None:
    outcome: list[BaseException | None] = [None]

    def run() -> None:
        try:
            client.scan(TableName=TABLE)
        except BaseException as exc:  # noqa: BLE001 - the outcome is the test's
            outcome[0] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return outcome[0]


def test_set_up_is_not_checked_and_a_functions_own_threads_are(aws: None):
    """The test's own thread outside a function's run is set-up (not checked); a thread a function's code starts
    while it alone runs makes that function's requests; a thread whose function cannot be told is not checked."""
    client = boto3.client("dynamodb")
    with pytest.raises(ClientError, match="ResourceNotFound"):  # moto's answer: the check let it through
        client.scan(TableName=TABLE)
    with denials_expected() as denied:
        with acting_as("MatcherFunction"):
            assert isinstance(_request_in_a_thread(client), ClientError)
            with unchecked(), pytest.raises(ClientError, match="ResourceNotFound"):
                client.scan(TableName=TABLE)
    assert [(d["function"], d["operation"]) for d in denied] == [("MatcherFunction", "Scan")]
    started = threading.Event()
    leave = threading.Event()

    def other_function() -> None:
        with acting_as("AgentEventsFunction"):
            started.set()
            leave.wait(10)

    other = threading.Thread(target=other_function)
    other.start()
    started.wait(10)
    try:
        with acting_as("MatcherFunction"):  # two functions run: a thread that says nothing is nobody's
            assert "ResourceNotFound" in str(_request_in_a_thread(client))
    finally:
        leave.set()
        other.join()
