"""Every sample event in events/ is what AWS delivers: it parses with Powertools' own model of its source (so a
handler that parses with ``event_parser`` takes it, as Lambda would deliver it), and each SNS sample names its queue
the way the wake-up topics' filter policies expect."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_lambda_powertools.utilities.parser.models import DynamoDBStreamModel, EventBridgeModel, SnsModel

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "events").glob("*.json"))


def source_of(event: object) -> str | None:
    if isinstance(event, dict) and isinstance(event.get("Records"), list) and event["Records"]:
        first = event["Records"][0]
        return first.get("EventSource") or first.get("eventSource")
    if isinstance(event, dict) and "detail-type" in event:
        return "aws.events"
    return None


MODELS = {"aws:sns": SnsModel, "aws:dynamodb": DynamoDBStreamModel, "aws.events": EventBridgeModel}


def test_the_samples_cover_every_delivered_source() -> None:
    sources = {source_of(json.loads(path.read_text())) for path in SAMPLES}
    assert {"aws:sns", "aws:dynamodb", "aws.events"} <= sources


# Direct invokes (CreateTasks' input, a worker's {"queue": ...}) have no AWS model: their handlers' tests check them.
DELIVERED = [path for path in SAMPLES if source_of(json.loads(path.read_text())) in MODELS]


@pytest.mark.parametrize("path", DELIVERED, ids=lambda p: p.name)
def test_a_delivered_sample_parses_with_its_sources_model(path: Path) -> None:
    event = json.loads(path.read_text())
    MODELS[source_of(event) or ""].model_validate(event)


def test_sns_samples_name_their_queue_by_attribute_except_the_one_that_shows_its_absence() -> None:
    without = []
    for path in SAMPLES:
        event = json.loads(path.read_text())
        if source_of(event) != "aws:sns":
            continue
        attributes = event["Records"][0]["Sns"].get("MessageAttributes") or {}
        if "queue" not in attributes:
            without.append(path.name)
    assert without == ["process_tasks-sns-wake-no-queue-attribute.json"]
