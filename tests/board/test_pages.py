"""The matching queue's and FailedEventsQueue's pages, and the store operations the board added (depth by COUNT
queries, the tasks of a request, the claim lanes held)."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest

from taskqueue.core.states import TaskStatus
from tests.agent_support import agent_table, agents, create_calls, profile  # noqa: F401 - fixtures
from tests.board.support import Browser, create, dead_letter, make_board, status_of

pytestmark = pytest.mark.dynamodb_engines


def test_matching_page_shows_agents_and_waiting_calls_and_cancels_a_call(store, clock, agents, tmp_path: Path):
    agents.put_available(profile("ann", ["fr"], ["f"], name="Ann <admin>"))
    agents.put_available(profile("bob", ["en"], ["m"]))
    agents.offline("bob")
    clock.advance(30)
    [call] = create_calls(store, clock.now_ms(), {"language": "de"})
    clock.advance(12)
    browser = Browser(make_board(store, clock, tmp_path / "log", agents=agents))
    page = browser.get("/matching")
    assert 'data-agent="ann"' in page and "Ann &lt;admin&gt;" in page and "language=fr" in page
    assert 'data-count="agents-offline">1' in page and 'data-count="agents-queued">1' in page
    assert f'data-call="{call}"' in page and "language=de" in page and "12s" in page
    landed = browser.act(f"/actions/tasks/{call}/cancel", {"next": "/matching"})
    assert status_of(store, call) == "CANCELLED" and "no call is waiting" in landed


def test_failed_events_page_reads_without_deleting(store, clock, tmp_path: Path):
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName="failed-events")["QueueUrl"]
    record = {
        "requestContext": {"requestId": "r-1", "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:CreateTasks",
                           "condition": "RetriesExhausted", "approximateInvokeCount": 3},
        "requestPayload": {"queue": "work", "payload": {"x": "<img src=x onerror=alert(1)>"}},
        "responsePayload": {"errorMessage": "throttled", "errorType": "StoreError"},
    }
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(record))
    browser = Browser(make_board(store, clock, tmp_path / "log", failed_events_url=url))
    page = browser.get("/failed-events")
    assert "asynchronous invocation" in page and "RetriesExhausted" in page and "throttled" in page
    assert "<img src=x" not in page and "&lt;img src=x" in page
    again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    assert len(again) == 1  # made visible again at once, not deleted


def test_depth_counts_each_state_by_partition(store, clock):
    now = clock.now_ms()
    create(store, now, 3)
    create(store, now, 2, delaySeconds=30)
    create(store, now, 1, ttlSeconds=2, delaySeconds=1)
    dead_letter(store, "calls", 1)
    clock.advance(3)
    work = store.depth("work")
    assert (work.ready, work.delayed, work.expired, work.pending) == (3, 2, 1, 6)
    assert store.depth("calls").by_state() == {"PENDING": 0, "TAKEN": 0, "FAILURE": 1, "CANCELLED": 0}
    assert work.pending == store.count("work", TaskStatus.PENDING)


def test_tasks_of_a_request_are_found_by_their_derived_ids(store, clock):
    from taskqueue.client.create import create_tasks
    from taskqueue.core.model import parse_create_request

    summary = create_tasks(parse_create_request({"count": 150}, store.settings), store, clock.now_ms(), request_id="r-9")
    create_tasks(parse_create_request({"count": 2}, store.settings), store, clock.now_ms(), request_id="r-10")
    found = store.tasks_of_request("r-9")
    assert sorted(t.task_id for t in found) == sorted(summary.task_ids)
    assert store.tasks_of_request("nobody") == []


def test_the_board_reads_the_function_log_the_local_stack_writes():
    from local.engine.stack import FUNCTION_LOG
    from taskq.board.services import LOCAL_FUNCTION_LOG

    assert LOCAL_FUNCTION_LOG == FUNCTION_LOG.name


def test_count_partition_stops_at_its_cap_and_agrees_with_depth_without_one(store, clock):
    now = clock.now_ms()
    create(store, now, 7)
    create(store, now, 2, ttlSeconds=2)
    clock.advance(3)
    [ready] = [p for p in store.depth_partitions("work") if p.state == "ready"]
    capped = store.count_partition(ready, clock.now_ms(), 4)
    assert (capped.complete, capped.total) == (False, 4)
    full = store.count_partition(ready, clock.now_ms())
    depth = store.depth("work")
    assert (full.complete, full.live, full.expired) == (True, depth.ready, depth.expired) == (True, 7, 2)
    # Running tasks are counted in the ready partitions (their entries carry their lease): no partition of their own.
    assert {p.state for p in store.depth_partitions("work")} == {"ready", "delayed", "failure", "cancelled"}
