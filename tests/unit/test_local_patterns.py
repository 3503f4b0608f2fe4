"""The local engine's filter-pattern matcher (Lambda FilterCriteria / EventBridge / SNS filter policies)."""

from __future__ import annotations

import pytest

from local.template.filter_patterns import PatternError, matches, matches_any, sns_policy_matches
from tests.support import template

INSERT = {"eventName": "INSERT", "dynamodb": {"NewImage": {"queue": {"S": "work"}, "priority": {"N": "9"}, "taskStatus": {"S": "PENDING"}}}}
# The first write of a queue's control item (a running-limit slot, pause) is an INSERT too.
CONTROL_INSERT = {"eventName": "INSERT", "dynamodb": {"Keys": {"taskId": {"S": "queue#work#slot#0"}},
                                                      "NewImage": {"taskId": {"S": "queue#work#slot#0"}, "tokenOwner": {"S": "w"}}}}
RESUME_MARK = {"eventName": "INSERT", "dynamodb": {"Keys": {"taskId": {"S": "queue#work#resume#1795349100000"}},
                                                   "NewImage": {"taskId": {"S": "queue#work#resume#1795349100000"}}}}
TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def removal(status: str | None, identity: dict | None = TTL_IDENTITY, queue: str = "work") -> dict:
    """A REMOVE record as Lambda delivers it: the deleted item's old image, the TTL identity if TTL deleted it."""
    image = {"taskId": {"S": "t1"}, "queue": {"S": queue}}
    if status is not None:
        image["taskStatus"] = {"S": status}
    record: dict = {"eventName": "REMOVE", "dynamodb": {"Keys": {"taskId": {"S": "t1"}}, "OldImage": image}}
    if identity:
        record["userIdentity"] = identity
    return record


def modify(old: str, new: str, queue: str = "work") -> dict:
    image = {"taskId": {"S": "t1"}, "queue": {"S": queue}}
    return {"eventName": "MODIFY", "dynamodb": {"Keys": {"taskId": {"S": "t1"}},
                                                "OldImage": {**image, "taskStatus": {"S": old}},
                                                "NewImage": {**image, "taskStatus": {"S": new}}}}


def template_filters(function: str = "ProcessTasksFunction", event: str = "TaskStream") -> list[str]:
    """An event source's FilterCriteria, read from template.yaml."""
    stream = template()["Resources"][function]["Properties"]["Events"][event]["Properties"]
    return [f["Pattern"] for f in stream["FilterCriteria"]["Filters"]]


CALL_INSERT = {"eventName": "INSERT", "dynamodb": {"NewImage": {"queue": {"S": "calls"}, "taskStatus": {"S": "PENDING"}}}}


def test_the_task_stream_passes_what_makes_work_of_queue_work_claimable_and_sheds_only():
    filters = template_filters()
    assert matches_any(filters, INSERT) and not matches_any(filters, CALL_INSERT)
    for old in ("TAKEN", "FAILURE", "CANCELLED"):  # a release, a redrive: PENDING again
        assert matches_any(filters, modify(old, "PENDING")), old
    assert not matches_any(filters, modify("PENDING", "PENDING"))  # a touch, a reprioritization
    assert not matches_any(filters, modify("PENDING", "TAKEN")) and not matches_any(filters, modify("TAKEN", "SUCCESS"))
    assert matches_any(filters, RESUME_MARK) and not matches_any(filters, CONTROL_INSERT)
    assert matches_any(filters, removal("PENDING"))  # shed: counted
    for status in ("SUCCESS", "FAILURE", "CANCELLED", None):  # retention cleanup: nothing to do
        assert not matches_any(filters, removal(status)), status
    assert not matches_any(filters, removal("PENDING", identity=None))  # a user's delete
    assert not matches_any(filters, removal("PENDING", identity={"type": "User", "principalId": "me"}))


def test_the_call_stream_passes_the_same_for_queue_calls():
    filters = template_filters("MatcherFunction", "CallStream")
    assert matches_any(filters, CALL_INSERT) and not matches_any(filters, INSERT)
    assert matches_any(filters, modify("TAKEN", "PENDING", "calls")) and matches_any(filters, removal("PENDING", queue="calls"))


def test_no_filters_pass_everything():
    assert matches_any([], {"anything": 1})


@pytest.mark.parametrize(
    ("pattern", "event", "expected"),
    [
        ({"a": ["x"]}, {"a": "x"}, True),
        ({"a": ["x"]}, {"a": "y"}, False),
        ({"a": ["x"]}, {}, False),
        ({"a": ["x", "y"]}, {"a": "y"}, True),
        ({"a": ["x"]}, {"a": ["z", "x"]}, True),  # list value: any element
        ({"a": [5]}, {"a": 5.0}, True),
        ({"a": [5]}, {"a": "5"}, False),
        ({"a": [None]}, {"a": None}, True),
        ({"a": [True]}, {"a": True}, True),
        ({"a": [True]}, {"a": 1}, False),
        ({"a": {"b": {"c": ["d"]}}}, {"a": {"b": {"c": "d"}}}, True),
        ({"a": {"b": {"c": ["d"]}}}, {"a": {"b": {"c": "e"}}}, False),
        ({"a": {"b": ["d"]}}, {"a": "flat"}, False),
        ({"a": [{"prefix": "dyn"}]}, {"a": "dynamodb"}, True),
        ({"a": [{"prefix": "dyn"}]}, {"a": "sns"}, False),
        ({"a": [{"prefix": {"equals-ignore-case": "DYN"}}]}, {"a": "dynamodb"}, True),
        ({"a": [{"suffix": ".png"}]}, {"a": "x.png"}, True),
        ({"a": [{"equals-ignore-case": "WORK"}]}, {"a": "work"}, True),
        ({"a": [{"wildcard": "w*k"}]}, {"a": "work"}, True),
        ({"a": [{"wildcard": "w*k"}]}, {"a": "worker"}, False),
        ({"a": [{"exists": True}]}, {"a": "x"}, True),
        ({"a": [{"exists": True}]}, {}, False),
        ({"a": [{"exists": False}]}, {}, True),
        ({"a": [{"exists": False}]}, {"a": 1}, False),
        ({"a": {"b": [{"exists": False}]}}, {"a": {}}, True),
        ({"a": [{"anything-but": "x"}]}, {"a": "y"}, True),
        ({"a": [{"anything-but": "x"}]}, {"a": "x"}, False),
        ({"a": [{"anything-but": "x"}]}, {}, False),
        ({"a": [{"anything-but": ["x", "y"]}]}, {"a": "y"}, False),
        ({"a": [{"anything-but": {"prefix": "x"}}]}, {"a": "xy"}, False),
        ({"a": [{"anything-but": {"prefix": "x"}}]}, {"a": "yx"}, True),
        ({"a": [{"numeric": [">", 0, "<=", 5]}]}, {"a": 5}, True),
        ({"a": [{"numeric": [">", 0, "<=", 5]}]}, {"a": 0}, False),
        ({"a": [{"numeric": ["=", 3]}]}, {"a": "3"}, False),
        ({"$or": [{"a": ["x"]}, {"b": ["y"]}]}, {"b": "y"}, True),
        ({"$or": [{"a": ["x"]}, {"b": ["y"]}]}, {"b": "z"}, False),
        ({"a": ["x"], "b": ["y"]}, {"a": "x", "b": "z"}, False),  # every key must match
    ],
)
def test_pattern_syntax(pattern, event, expected):
    assert matches(pattern, event) is expected


@pytest.mark.parametrize(
    "pattern",
    ['not json', '[1]', {"a": "x"}, {"a": []}, {"a": [{"cidr": "10.0.0.0/8"}]}, {"a": [{"numeric": [">"]}]},
     {"a": [{"exists": "yes"}]}, {"a": [{"prefix": "x", "suffix": "y"}]}],
)
def test_unsupported_or_malformed_patterns_fail_loudly(pattern):
    with pytest.raises(PatternError):
        matches(pattern, {"a": 5})


def test_sns_filter_policy_on_message_attributes():
    attrs = {"queue": {"Type": "String", "Value": "work"}, "size": {"Type": "Number", "Value": "12"}}
    assert sns_policy_matches({"queue": ["work"]}, attrs)
    assert not sns_policy_matches({"queue": ["calls"]}, attrs)
    assert sns_policy_matches({"size": [{"numeric": [">", 10]}]}, attrs)
    assert not sns_policy_matches({"queue": ["work"]}, {})
    assert sns_policy_matches(None, {})
    # Publish-side shape (DataType/StringValue) and String.Array.
    assert sns_policy_matches({"queue": ["work"]}, {"queue": {"DataType": "String", "StringValue": "work"}})
    assert sns_policy_matches({"tags": ["b"]}, {"tags": {"Type": "String.Array", "Value": '["a", "b"]'}})


def test_sns_filter_policy_on_the_message_body():
    assert sns_policy_matches({"queue": ["work"]}, {}, '{"queue": "work"}', scope="MessageBody")
    assert not sns_policy_matches({"queue": ["work"]}, {}, '{"queue": "calls"}', scope="MessageBody")
    assert not sns_policy_matches({"queue": ["work"]}, {}, "not json", scope="MessageBody")
