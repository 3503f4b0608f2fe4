"""The local engine's fault setting (local/faults/faults.py): what it accepts, what it refuses, how it reads."""

from __future__ import annotations

import json
import math

import pytest

from local.faults.faults import NEVER, ErrorRule, Faults, FaultsError
from local.faults.item_size import LIMIT_BYTES, item_size, number_size, value_size


def test_nothing_is_faulted_by_default():
    faults = Faults()
    assert not faults.needs_server and faults.dynamodb_errors == () and faults.sns_publish_errors is None
    assert faults.ttl_lateness_seconds(2.0) == 2.0
    assert "Lambda 429" in faults.describe()


def test_a_json_setting_reads_into_rules_and_back():
    text = json.dumps({
        "seed": 7, "ttl_lateness": "never", "index_lag": 0.5, "index_lag_indexes": ["ReadyIndex"],
        "dynamodb_errors": [{"share": 0.1, "codes": ["ThrottlingException"], "per": "call"},
                            {"share": 0.05, "code": "TransactionConflictException", "operations": ["UpdateItem"]}],
        "sns_publish_errors": 0.2, "item_size_limit": True,
    })
    faults = Faults.parse(text)
    assert faults.seed == 7 and faults.needs_server
    assert faults.ttl_lateness_seconds(2.0) == math.inf and faults.ttl_lateness == NEVER
    assert faults.dynamodb_errors[1] == ErrorRule(0.05, ("TransactionConflictException",), "call", ("UpdateItem",))
    assert faults.sns_publish_errors == ErrorRule(0.2, ("KMSThrottling",))
    assert Faults.from_dict(faults.to_dict()) == faults
    assert "ttl_lateness" not in faults.server_config()
    assert "index lag 0.5 s (ReadyIndex)" in faults.describe() and "SNS Publish KMSThrottling on 20% of calls" in faults.describe()


def test_a_setting_in_a_file(tmp_path):
    path = tmp_path / "faults.json"
    path.write_text('{"index_lag": 1}')
    assert Faults.parse(str(path)).index_lag == 1


@pytest.mark.parametrize("setting, complaint", [
    ({"ttl_lateness": "sometimes"}, "ttl_lateness"),
    ({"index_lag": -1}, "index_lag"),
    ({"dynamodb_errors": {"share": 1.5}}, "share must be from 0 to 1"),
    ({"dynamodb_errors": {"share": 0.1, "codes": ["SlowDown"]}}, "codes must be some of"),
    ({"dynamodb_errors": {"share": 0.1, "per": "minute"}}, "per must be one of"),
    ({"sns_publish_errors": {"share": 0.1, "codes": ["ThrottlingException"]}}, "codes must be some of"),
    ({"dynamodb_errors": {"share": 0.1, "burst": 0}}, "burst"),
    ({"dynamodb_errors": {"shares": 0.1}}, "unknown keys"),
    ({"lambda_throttle": True}, "unknown fault settings"),
])
def test_a_setting_that_cannot_be_used_is_refused_naming_it(setting, complaint):
    with pytest.raises(FaultsError, match=complaint):
        Faults.from_dict(setting)


def test_text_that_is_neither_json_nor_a_file_is_refused():
    with pytest.raises(FaultsError, match="no file"):
        Faults.parse("not-a-file.json")
    with pytest.raises(FaultsError, match="not valid JSON"):
        Faults.parse("{nope")


def test_item_size_counts_as_dynamodb_does():
    assert value_size({"S": "héllo"}) == 6  # UTF-8 bytes
    assert value_size({"B": "AAEC"}) == 3  # base64 of 3 bytes
    assert value_size({"BOOL": True}) == value_size({"NULL": True}) == 1
    assert number_size("12345") == 4 and number_size("0") == 2 and number_size("-1.50") == 2
    assert value_size({"L": [{"S": "ab"}, {"N": "1"}]}) == 3 + (1 + 2) + (1 + 2)
    assert value_size({"M": {"k": {"S": "v"}}}) == 3 + 1 + 1 + 1
    assert value_size({"SS": ["a", "bc"]}) == 3
    assert item_size({"taskId": {"S": "x" * 10}}) == 6 + 10
    assert LIMIT_BYTES == 409_600
