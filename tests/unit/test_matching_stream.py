"""Stream records of the agent table: an inserted queue entry wakes its matching queue; task records unchanged."""

import pytest

from taskqueue.core.errors import InvalidEvent
from taskqueue.core.stream import ChangeKind, classify

ENTRY = {"pk": "Q#gender=f#language=fr", "sk": "001795348800001#a1", "entity": "entry", "queue": "calls", "agentId": "a1"}


def test_inserted_agent_entry_wakes_the_calls_queue():
    change = classify("INSERT", None, ENTRY, None)
    assert (change.kind, change.queue, change.task_id) == (ChangeKind.AGENT_QUEUED, "calls", None)


def test_agent_entry_without_its_queue_is_malformed():
    with pytest.raises(InvalidEvent, match="agent queue entry"):
        classify("INSERT", None, {**ENTRY, "queue": None}, None)


def test_removed_agent_entry_and_agent_items_wake_nobody():
    assert classify("REMOVE", None, None, ENTRY).kind is ChangeKind.OTHER
    assert classify("MODIFY", None, {"entity": "agent"}, {"entity": "agent"}).kind is ChangeKind.OTHER


def test_task_records_are_classified_as_before():
    task = {"taskId": "t1", "queue": "calls", "taskStatus": "PENDING"}
    assert classify("INSERT", None, task, None).kind is ChangeKind.CREATED

