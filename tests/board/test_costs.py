"""What the board's pages cost and change (issues 29 and 28): counts bounded in a request and made in full in the
background, shared between tabs, marked when not exact; no Scan inside a request (SUCCESS / SHED listings, the
agent table); the page says its read units; a read-only board receives no FailedEventsQueue message."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import boto3
import pytest

from taskq.board.counting import CountKeeper
from tests.agent_support import agent_table, agents, create_calls, profile  # noqa: F401 - fixtures
from tests.board.support import Browser, create, dead_letter, make_board

pytestmark = pytest.mark.dynamodb_engines


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "local-stack.functions.log"


def requests_of(*clients: Any) -> list[tuple[str, dict[str, Any], int]]:
    """Every DynamoDB request the clients send from now on: (operation, parameters, thread id)."""
    seen: list[tuple[str, dict[str, Any], int]] = []
    for client in {id(c): c for c in clients}.values():
        client.meta.events.register(
            "provide-client-params.dynamodb.*",
            lambda params, model, **_: seen.append((model.name, dict(params), threading.get_ident())))
    return seen


def _cell(page: str, name: str) -> str:
    start = page.index(f'data-count="{name}"')
    return page[page.index(">", start) + 1 : page.index("<", start)].strip()


def test_a_big_count_stops_at_the_cap_in_the_request_and_is_made_in_full_in_the_background(store, clock, log):
    board = make_board(store, clock, log, cap=10)
    browser = Browser(board)
    create(store, clock.now_ms(), 25)
    create(store, clock.now_ms(), 2, delaySeconds=60)
    seen = requests_of(store._db)

    page = browser.get("/")

    assert _cell(page, "work:ready") == "≥10" and 'data-approx="at-least"' in page
    assert _cell(page, "work:delayed") == "2" and _cell(page, "calls:ready") == "0"  # small ones stay exact
    counts = [params for name, params, _ in seen if name == "Query" and params.get("Select") == "COUNT"]
    assert counts and all(params.get("Limit", 0) <= 10 for params in counts)
    assert not any(name == "Scan" for name, _, _ in seen)

    assert board.counts.run_pending() == 1  # what the background thread does: one full count of work's ready entries
    page = browser.get("/")
    assert _cell(page, "work:ready") == "~25" and re.search(r'data-approx="\d+"', page)
    assert "counted in full" in page


def test_the_background_thread_makes_the_full_count(store, clock, log):
    board = make_board(store, clock, log, cap=5, background=True)
    create(store, clock.now_ms(), 12)
    browser = Browser(board)
    assert _cell(browser.get("/"), "work:ready") == "≥5"
    assert board.counts.settle(30)
    assert _cell(browser.get("/"), "work:ready") == "~12"


def test_counts_are_shared_between_tabs_and_read_again_after_an_action(store, clock, log):
    board = make_board(store, clock, log)
    board.counts = CountKeeper(store, clock.now_ms, fresh_s=60, background=False)
    first, second = Browser(board), Browser(board)
    dead_letter(store, "work", 1)
    seen = requests_of(store._db)
    assert _cell(first.get("/"), "work:failure") == "1"
    counted = len([1 for name, params, _ in seen if params.get("Select") == "COUNT"])
    assert counted > 0
    assert _cell(second.get("/fragments/queues"), "work:failure") == "1"
    assert len([1 for name, params, _ in seen if params.get("Select") == "COUNT"]) == counted  # the other tab's
    first.act("/actions/retry-all", {"queue": "work", "state": "FAILURE"})
    assert _cell(first.get("/"), "work:failure") == "0"


def test_the_page_says_the_read_units_of_its_refresh_and_of_the_last_hour(store, clock, log):
    page = Browser(make_board(store, clock, log)).get("/fragments/queues")
    assert 'data-read-units="request"' in page and 'data-read-units="hour"' in page and "data-dollars-per-hour" in page


@pytest.mark.parametrize("state", ["SUCCESS", "SHED"])
def test_listing_success_or_shed_makes_no_scan(store, clock, log, state):
    seen = requests_of(store._db)
    page = Browser(make_board(store, clock, log)).get(f"/tasks?queue=work&state={state}")
    assert not any(name == "Scan" for name, _, _ in seen)
    assert f'data-not-indexed="{state}"' in page and f"taskq list --state {state}" in page


def test_the_matching_page_reads_the_agent_table_in_the_background_only(store, clock, agents, log):
    agents.put_available(profile("ann", ["fr"], ["f"]))
    board = make_board(store, clock, log, agents=agents, background=True)
    browser = Browser(board)
    seen = requests_of(store._db, agents._db)
    me = threading.get_ident()

    first = browser.get("/matching")
    assert board.agents_seen is not None and board.agents_seen.settle(30)
    page = browser.get("/matching")

    assert not any(name == "Scan" and thread == me for name, _, thread in seen)  # not in a request
    assert any(name == "Scan" for name, _, _ in seen)  # in the background
    assert 'data-agents-read="pending"' in first or 'data-agent="ann"' in first
    assert 'data-agent="ann"' in page and "data-agents-read=" in page
    browser.get("/matching")
    assert len([1 for name, _, _ in seen if name == "Scan"]) == 1  # read again only after AGENTS_EVERY_S


# ---- issue 28: a read-only board changes nothing -----------------------------------------------------------------


def test_a_read_only_board_does_not_receive_failed_events(store, clock, log):
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName="failed-events-ro")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"requestContext": {"condition": "RetriesExhausted"}}))
    browser = Browser(make_board(store, clock, log, read_only=True, failed_events_url=url))

    page = browser.get("/failed-events")

    assert 'data-count="failed-visible">1<' in page and "taskq failed-events" in page
    assert "RetriesExhausted" not in page  # the message was not read
    [message] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"  # this receive is its first
