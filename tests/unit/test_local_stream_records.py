"""The emulator's GetRecords (``moto_patches.patch_stream_records``) writes byte for byte the body moto's serializer
writes -- every attribute type, nested maps and lists, binaries, every stream view type, INSERT / MODIFY / REMOVE --
without going through the serializer."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.core.responses import ActionResult
from moto.dynamodbstreams.models import dynamodbstreams_backends
from moto.server import DomainDispatcherApplication, create_backend_app
from werkzeug.test import Client

from local.emulator.moto_patches import patch_stream_records

AUTH = "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=x"
NAMES = itertools.count()


@pytest.fixture
def moto() -> Iterator[tuple[Any, Client]]:
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1"), Client(DomainDispatcherApplication(create_backend_app))


def get_records(server: Client, iterator: str) -> tuple[int, dict[str, str], bytes]:
    response = server.post("/", data=json.dumps({"ShardIterator": iterator, "Limit": 1000}), headers={
        "Host": "streams.dynamodb.us-east-1.amazonaws.com", "X-Amz-Target": "DynamoDBStreams_20120810.GetRecords",
        "Content-Type": "application/x-amz-json-1.0", "Authorization": AUTH})
    headers = {k: v for k, v in response.headers.items() if k.lower() != "x-amzn-requestid"}
    return response.status_code, headers, response.get_data()


def both(server: Client, iterator: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """moto's answer, then the patched one (which must not touch moto's serializer). The next iterator's id is
    random per call: it is compared apart."""
    motos = get_records(server, iterator)
    undo = patch_stream_records()
    try:
        with monkeypatch.context() as patched:
            patched.setattr(ActionResult, "execute_result", lambda *a, **k: pytest.fail("moto's serializer ran"))
            ours = get_records(server, iterator)
    finally:
        undo()
    return motos, ours


def iterator_of(client: Any, table: str) -> str:
    arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    streams = dynamodbstreams_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
    shard = streams.describe_stream(arn)["Shards"][0]["ShardId"]
    return str(streams.get_shard_iterator(arn, shard, "TRIM_HORIZON", None).arn)


def assert_same(motos: tuple[int, dict[str, str], bytes], ours: tuple[int, dict[str, str], bytes]) -> None:
    assert ours[:2] == motos[:2]
    mine, theirs = json.loads(ours[2]), json.loads(motos[2])
    assert set(mine.pop("NextShardIterator").split("|")[:2]) == set(theirs.pop("NextShardIterator").split("|")[:2])
    cut = b', "NextShardIterator"'
    assert ours[2].split(cut)[0] == motos[2].split(cut)[0]  # the records, byte for byte


scalar = st.one_of(
    st.builds(lambda s: {"S": s}, st.text(max_size=8)),
    st.builds(lambda n: {"N": n}, st.sampled_from(["0", "-1", "1.50", "12345678901234567890", "1E+3"])),
    st.builds(lambda b: {"B": b}, st.binary(max_size=6)),
    st.builds(lambda v: {"BOOL": v}, st.booleans()),
    st.just({"NULL": True}),
    st.builds(lambda s: {"SS": sorted(s)}, st.sets(st.text(min_size=1, max_size=4), min_size=1, max_size=3)),
    st.builds(lambda s: {"NS": sorted(s)}, st.sets(st.sampled_from(["1", "2.5", "-3"]), min_size=1)),
    st.builds(lambda s: {"BS": sorted(s)}, st.sets(st.binary(min_size=1, max_size=3), min_size=1, max_size=3)),
)
attribute = st.recursive(scalar, lambda inner: st.one_of(
    st.builds(lambda m: {"M": m}, st.dictionaries(st.text(min_size=1, max_size=5), inner, max_size=3)),
    st.builds(lambda items: {"L": items}, st.lists(inner, max_size=3))), max_leaves=8)
item_attributes = st.dictionaries(st.text(min_size=1, max_size=6).filter(lambda n: n not in ("pk", "sk")), attribute,
                                  max_size=5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(view=st.sampled_from(["KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES"]), with_range=st.booleans(),
       items=st.lists(item_attributes, min_size=1, max_size=4))
def test_records_are_written_as_motos_serializer_writes_them(moto: tuple[Any, Client], monkeypatch: pytest.MonkeyPatch,
                                                            view: str, with_range: bool,
                                                            items: list[dict[str, Any]]) -> None:
    client, server = moto
    table = f"stream-{next(NAMES)}"
    keys = [("pk", "HASH", "S")] + ([("sk", "RANGE", "N")] if with_range else [])
    client.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                        KeySchema=[{"AttributeName": n, "KeyType": k} for n, k, _ in keys],
                        AttributeDefinitions=[{"AttributeName": n, "AttributeType": t} for n, _, t in keys],
                        StreamSpecification={"StreamEnabled": True, "StreamViewType": view})
    for n, attributes in enumerate(items):
        key = {"pk": {"S": f"k{n % 2}"}, **({"sk": {"N": str(n)}} if with_range else {})}
        client.put_item(TableName=table, Item={**attributes, **key})  # a second put of k0: MODIFY
    client.delete_item(TableName=table, Key={"pk": {"S": "k0"}, **({"sk": {"N": "0"}} if with_range else {})})
    motos, ours = both(server, iterator_of(client, table), monkeypatch)
    assert len(json.loads(motos[2])["Records"]) == len(items) + 1
    assert_same(motos, ours)


def test_an_empty_shard_and_an_unknown_iterator_come_out_as_from_moto(moto: tuple[Any, Client],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    client, server = moto
    client.create_table(TableName="quiet", BillingMode="PAY_PER_REQUEST",
                        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"})
    assert_same(*both(server, iterator_of(client, "quiet"), monkeypatch))
    unknown = "arn:aws:dynamodb:us-east-1:123456789012:table/quiet/stream/x|1|nope"
    with pytest.raises(KeyError):  # moto's own answer: its backend's KeyError, out of the app
        get_records(server, unknown)
    undo = patch_stream_records()
    try:
        with pytest.raises(KeyError):
            get_records(server, unknown)
    finally:
        undo()
