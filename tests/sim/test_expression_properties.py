"""Property tests: random items, condition and update expressions, and queries give the same answers (results,
error codes, the item left behind) on the fake DynamoDB as on DynamoDB Local (``--dynamodb=local|both``). They run
there only: moto departs from DynamoDB on shapes these draw (a query's LastEvaluatedKey at its Limit, UPDATED_* by
path, errors before reads), and DynamoDB Local is the authority the fake follows."""

from __future__ import annotations

import itertools
import os
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.dynamodb import FakeDynamoDB
from tests.sim.differential import normalized_error
from tests.sim.expression_strategies import Rendered, condition, item, update, value

pytestmark = pytest.mark.dynamodb_local_only

TABLE = "expression-properties"
SORTED = "query-properties"
_keys = itertools.count()
EXAMPLES = settings(max_examples=int(os.environ.get("SIM_PROPERTY_EXAMPLES", "120")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _create(client: Any) -> None:
    client.create_table(TableName=TABLE, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                        BillingMode="PAY_PER_REQUEST")
    client.create_table(TableName=SORTED, BillingMode="PAY_PER_REQUEST",
                        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                              {"AttributeName": "sk", "AttributeType": "S"}])


@pytest.fixture
def engines(aws: None) -> tuple[Any, FakeDynamoDB]:
    engine, fake = boto3.client("dynamodb"), FakeDynamoDB()
    _create(engine)
    _create(fake)
    return engine, fake


def _outcome(call: Any) -> Any:
    try:
        response = call()
    except ClientError as exc:
        return ("error", normalized_error(exc))
    return ("ok", {k: v for k, v in response.items() if k not in ("ResponseMetadata", "ConsumedCapacity")})


def _sorted_sets(found: Any) -> Any:
    """Sets in a canonical order (DynamoDB keeps no order in a set)."""
    if isinstance(found, dict):
        return {k: sorted(v) if k in ("SS", "NS", "BS") else _sorted_sets(v) for k, v in found.items()}
    if isinstance(found, list):
        return [_sorted_sets(v) for v in found]
    return found


def _both(engines: tuple[Any, FakeDynamoDB], operation: str, **params: Any) -> Any:
    engine, fake = engines
    theirs = _sorted_sets(_outcome(lambda: getattr(engine, operation)(**params)))
    mine = _sorted_sets(_outcome(lambda: getattr(fake, operation)(**params)))
    assert mine == theirs, f"{operation} {params}\n  fake:   {mine}\n  engine: {theirs}"
    return mine


@EXAMPLES
@given(data=st.data(), stored=item, returned=st.sampled_from(["NONE", "ALL_OLD", "ALL_NEW", "UPDATED_OLD",
                                                                "UPDATED_NEW"]))
def test_conditional_updates_agree(engines: Any, data: Any, stored: dict[str, Any], returned: str) -> None:
    key = {"pk": {"S": f"item-{next(_keys)}"}}
    if data.draw(st.booleans()):  # else the update creates the item
        _both(engines, "put_item", TableName=TABLE, Item={**key, **stored})
    rendered = Rendered()
    request: dict[str, Any] = {"TableName": TABLE, "Key": key, "ReturnValues": returned,
                               "UpdateExpression": data.draw(update(rendered))}
    if data.draw(st.booleans()):
        request["ConditionExpression"] = data.draw(condition(rendered))
        request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    _both(engines, "update_item", **request, **rendered.params())
    _both(engines, "get_item", TableName=TABLE, Key=key, ConsistentRead=True)


@EXAMPLES
@given(data=st.data(), stored=item)
def test_conditional_puts_and_deletes_agree(engines: Any, data: Any, stored: dict[str, Any]) -> None:
    key = {"pk": {"S": f"item-{next(_keys)}"}}
    _both(engines, "put_item", TableName=TABLE, Item={**key, **stored})
    rendered = Rendered()
    check = data.draw(condition(rendered))
    operation = data.draw(st.sampled_from(["put_item", "delete_item"]))
    body = {"Item": {**key, **data.draw(item)}} if operation == "put_item" else {"Key": key}
    _both(engines, operation, TableName=TABLE, ConditionExpression=check, ReturnValues="ALL_OLD",
          ReturnValuesOnConditionCheckFailure="ALL_OLD", **body, **rendered.params())
    _both(engines, "get_item", TableName=TABLE, Key=key, ConsistentRead=True)


sort_keys = st.text(alphabet="abc", min_size=1, max_size=3)


@EXAMPLES
@given(data=st.data(), rows=st.dictionaries(sort_keys, value, min_size=0, max_size=8))
def test_queries_and_their_pages_agree(engines: Any, data: Any, rows: dict[str, Any]) -> None:
    partition = {"S": f"part-{next(_keys)}"}
    for sort, stored in rows.items():
        _both(engines, "put_item", TableName=SORTED, Item={"pk": partition, "sk": {"S": sort}, "v": stored})
    rendered = Rendered()
    key_condition = f"{rendered.name('pk')} = {rendered.value(partition)}"
    kind = data.draw(st.sampled_from(["none", "=", "<", "<=", ">", ">=", "between", "begins_with"]))
    sort_name = rendered.name("sk")
    if kind == "between":
        low, high = sorted([data.draw(sort_keys), data.draw(sort_keys)])
        key_condition += f" AND {sort_name} BETWEEN {rendered.value({'S': low})} AND {rendered.value({'S': high})}"
    elif kind == "begins_with":
        key_condition += f" AND begins_with({sort_name}, {rendered.value({'S': data.draw(sort_keys)})})"
    elif kind != "none":
        key_condition += f" AND {sort_name} {kind} {rendered.value({'S': data.draw(sort_keys)})}"
    request: dict[str, Any] = {"TableName": SORTED, "KeyConditionExpression": key_condition,
                               "ScanIndexForward": data.draw(st.booleans()), "ConsistentRead": True}
    if data.draw(st.booleans()):
        request["Limit"] = data.draw(st.integers(1, 4))
    if data.draw(st.booleans()):
        request["FilterExpression"] = data.draw(condition(rendered))
    request.update(rendered.params())
    for _ in range(10):  # every page, as the product pages
        outcome = _both(engines, "query", **request)
        if outcome[0] != "ok" or "LastEvaluatedKey" not in outcome[1]:
            break
        request["ExclusiveStartKey"] = outcome[1]["LastEvaluatedKey"]
