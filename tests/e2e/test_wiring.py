"""The engine reads the wiring from the template: editing a copy of it changes what is delivered."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import invocations, queue_stream_mapping

pytestmark = pytest.mark.e2e

INSERT_PATTERN = """'{"eventName": ["INSERT"], "dynamodb": {"NewImage": {"taskStatus": {"S": ["PENDING"]}}}}'"""


def test_filter_criteria_in_the_template_decide_which_records_reach_trigger(start_engine, template_copy):
    # Only INSERTs of priority-9 tasks pass (nested keys, exact value) in the edited copy.
    path = template_copy(lambda text: text.replace(
        INSERT_PATTERN, """'{"eventName": ["INSERT"], "dynamodb": {"NewImage": {"priority": {"N": ["9"]}}}}'"""))
    engine = start_engine(template=path)
    assert engine.invoke("CreateTasksFunction", {"queue": "work", "count": 3, "priority": 0}).ok
    assert engine.invoke("CreateTasksFunction", {"queue": "work", "count": 2, "priority": 9}).ok
    mapping = queue_stream_mapping(engine)
    assert engine.wait_for(lambda: mapping.stats["records_in"] >= 5 and not engine.busy(), timeout=30)
    assert mapping.stats["records_delivered"] == 2, mapping.stats
    assert mapping.stats["filtered_out"] >= 3, mapping.stats


def test_unedited_template_delivers_every_insert(start_engine):
    engine = start_engine()
    assert engine.invoke("CreateTasksFunction", {"queue": "work", "count": 3, "priority": 0}).ok
    mapping = queue_stream_mapping(engine)
    assert engine.wait_for(lambda: mapping.stats["records_delivered"] >= 3, timeout=30), mapping.stats
    assert invocations(engine, "TriggerFunction", "dynamodb")


def test_filter_policy_in_the_template_decides_which_wakeups_reach_process_tasks(start_engine, template_copy):
    path = template_copy(lambda text: text.replace("queue: [work]", "queue: [nothing-here]"))
    engine = start_engine(template=path)
    assert engine.invoke("CreateTasksFunction", {"queue": "work", "count": 2}).ok
    # Trigger is woken by the stream and publishes a wake-up for "work"; the edited policy drops it.
    assert engine.wait_for(lambda: any(i["ok"] and i["result"] for i in invocations(engine, "TriggerFunction")), timeout=30)
    assert engine.wait_for(lambda: not engine.busy(), timeout=10)
    assert engine.invoke("TriggerFunction", {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}).ok
    assert engine.wait_for(lambda: not engine.busy(), timeout=10)
    assert invocations(engine, "ProcessTasksFunction") == []
    assert engine.observer.counts()["PENDING"] == 2
