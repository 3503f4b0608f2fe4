"""The engine reads the wiring from the template: editing a copy of it changes what is delivered."""

from __future__ import annotations

import time

import pytest

from tests.e2e.conftest import invocations, queue_stream_mapping

pytestmark = pytest.mark.e2e

INSERT_PATTERN = """'{"eventName": ["INSERT"], "dynamodb": {"NewImage": {"taskStatus": {"S": ["PENDING"]}, "queue": {"S": ["work"]}}}}'"""


def test_filter_criteria_in_the_template_decide_which_records_start_process_tasks(start_engine, template_copy):
    # Only INSERTs of priority-9 tasks pass (nested keys, exact value) in the edited copy.
    path = template_copy(lambda text: text.replace(
        INSERT_PATTERN, """'{"eventName": ["INSERT"], "dynamodb": {"NewImage": {"priority": {"N": ["9"]}}}}'""", 1))
    engine = start_engine(template=path)
    assert engine.invoke("CreateTasksFunction", {"queue": "work", "count": 3, "priority": 0}).ok
    assert engine.invoke("CreateTasksFunction", {"queue": "work", "count": 2, "priority": 9}).ok
    mapping = queue_stream_mapping(engine)
    # Until the priority-9 INSERTs are delivered (records_in >= 5 could count the first three and their updates,
    # before the reader's next poll reads the last two). Were the filter to pass the others, written first, they
    # would be delivered before or with them.
    assert engine.wait_for(lambda: mapping.stats["records_delivered"] >= 2 and not engine.busy(), timeout=30), mapping.stats
    assert mapping.stats["records_delivered"] == 2, mapping.stats
    assert mapping.stats["filtered_out"] >= 3, mapping.stats


def test_unedited_template_delivers_every_insert(start_engine):
    engine = start_engine()
    assert engine.invoke("CreateTasksFunction", {"queue": "work", "count": 3, "priority": 0}).ok
    mapping = queue_stream_mapping(engine)
    assert engine.wait_for(lambda: mapping.stats["records_delivered"] >= 3, timeout=30), mapping.stats
    assert invocations(engine, "ProcessTasksFunction", "dynamodb")
    assert invocations(engine, "TriggerFunction") == []  # the stream starts the worker itself


def test_an_idle_stack_asks_the_emulator_only_for_its_ttl_sweeps_and_delivers_the_next_write(start_engine):
    # The stream reader, SNS delivery and one-time schedules asked every 0.1-0.25 s (52 requests a second, idle,
    # about a third of a core); they now wait for the emulator's change feed (local/delivery/change_feed.py).
    engine = start_engine()
    assert engine.wait_for(lambda: not engine.busy(), timeout=10)
    before, started = engine.emulator.requests, time.monotonic()
    time.sleep(3.0)  # real time idle: what is measured
    asked, seconds = engine.emulator.requests - before, time.monotonic() - started
    # A Scan per sweep, time-driven: a window can hold one more sweep per sweeper than its length says, and under
    # load a late sweep and its next come together (11 requests once in a parallel run, 6 sweeps by length).
    sweeps = len(engine.sweepers) * (seconds / engine.ttl_interval + 1)
    assert asked <= sweeps + 4, f"{asked} requests in {seconds:.1f} s idle (up to {sweeps:.0f} TTL sweeps)"
    assert engine.invoke("CreateTasksFunction", {"queue": "work", "count": 2}).ok
    assert engine.wait_for(lambda: engine.observer.counts().get("SUCCESS", 0) == 2, timeout=30), engine.observer.counts()


def test_filter_policy_in_the_template_decides_which_wakeups_reach_process_tasks(start_engine, template_copy):
    # The stream start is turned off in the copy (its INSERT filter matches nothing), so the tasks wait for the safety
    # net, whose wake-up for "work" the edited filter policy then drops.
    path = template_copy(lambda text: text.replace("queue: [work]", "queue: [nothing-here]").replace(
        INSERT_PATTERN, """'{"eventName": ["INSERT"], "dynamodb": {"NewImage": {"queue": {"S": ["nothing-here"]}}}}'""", 1))
    engine = start_engine(template=path)
    assert engine.invoke("CreateTasksFunction", {"queue": "work", "count": 2}).ok
    assert engine.wait_for(lambda: not engine.busy(), timeout=10)
    net = engine.invoke("TriggerFunction", {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}})
    assert net.ok, net.error
    assert "work" in net.result["woken"], net.result  # published, and dropped by the filter policy
    assert engine.wait_for(lambda: not engine.busy(), timeout=10)
    assert invocations(engine, "ProcessTasksFunction") == []
    assert engine.observer.counts()["PENDING"] == 2


def test_prewarmed_environments_serve_the_first_invocations_without_a_cold_start(start_engine):
    """A scenario warms environments before its traffic (local/scenarios/tenants.py): they are idle and initialised,
    and the first invocations use them, none cold."""
    engine = start_engine()
    assert engine.prewarm("CreateTasksFunction", 2) == 2
    pool = engine.pools["CreateTasksFunction"]
    assert pool.stats["cold_starts"] == 0 and len(pool._idle) == 2
    first = engine.invoke("CreateTasksFunction", {"queue": "work", "count": 1})
    assert first.ok, first.error
    assert not first.cold_start and pool.stats["cold_starts"] == 0
    assert engine.prewarm("CreateTasksFunction", 2) == 2  # already warm: nothing more started
    assert len(pool._all) == 2
