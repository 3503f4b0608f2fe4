"""The fuzz tests (one handler each, FUZZ_EXAMPLES generated events per test, against moto). Each test builds its
world once, from tests/conftest.py's `aws` (moto) and `clock` fixtures: the queue and agent tables as the template
declares them (without streams, see support.create_tables), a Services on them, and an SNS client that records
what is published; each example leaves the world as the next one expects. Run them alone with
`.venv/bin/python -m pytest -q tests/fuzz`; helpers are in tests/fuzz/support.py, strategies in strategies.py."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from tests.fuzz.support import RecordingSns, create_tables


@pytest.fixture
def fuzz_dynamodb(aws: None) -> Any:
    client = boto3.client("dynamodb")
    create_tables(client)
    return client


@pytest.fixture
def sns() -> RecordingSns:
    return RecordingSns()


@pytest.fixture(autouse=True)
def quiet_handler_logs() -> Iterator[None]:
    """Thousands of invocations: keep the handlers' INFO logs (the Powertools logger "taskqueue") out of the way."""
    # Also Powertools' tracer, which logs every exception a handler raises (thousands of expected refusals).
    loggers = [logging.getLogger(name) for name in ("taskqueue", "aws_lambda_powertools.tracing.tracer")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    yield
    for logger, level in zip(loggers, levels):
        logger.setLevel(level)
