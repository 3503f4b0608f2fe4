"""The board's routes through Flask's test client, against the test's table (moto, and DynamoDB Local in
`make test`'s second run): what each page shows, that every action does what the matching taskq command does, that
state changes need the session's CSRF token, --read-only, escaping, and that counts never scan the table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from taskqueue.core.states import TaskStatus
from tests.board.support import Browser, create, dead_letter, make_board, status_of

pytestmark = pytest.mark.dynamodb_engines


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "local-stack.functions.log"


@pytest.fixture
def browser(store, clock, log) -> Browser:
    return Browser(make_board(store, clock, log))


def requests_of(store) -> list[tuple[str, dict[str, Any]]]:
    """Every DynamoDB request the store's client sends from now on: (operation, parameters)."""
    seen: list[tuple[str, dict[str, Any]]] = []
    store._db.meta.events.register("provide-client-params.dynamodb.*",
                                   lambda params, model, **_: seen.append((model.name, dict(params))))
    return seen


def test_the_queues_page_counts_every_state_by_count_queries_alone(store, clock, browser):
    now = clock.now_ms()
    create(store, now, 3)
    create(store, now, 2, delaySeconds=60)
    dead_letter(store, "work", 2)
    cancelled = create(store, now, 1)
    store.cancel(cancelled[0])
    store.claim(store.candidates("work", 1)[0], "worker-1")
    create(store, now, 1, ttlSeconds=5)
    clock.advance(10)  # the 5 s task is past its ttl now (expired, not yet shed)
    store.pause("calls")
    seen = requests_of(store)

    page = browser.get("/")

    counts = {name: _cell(page, f"work:{name}") for name in ("ready", "delayed", "expired", "taken", "failure", "cancelled")}
    assert counts == {"ready": "2", "delayed": "2", "expired": "1", "taken": "1", "failure": "2", "cancelled": "1"}
    assert 'data-state="calls">paused' in page and 'data-state="work">running' in page
    operations = {name for name, _ in seen}
    assert "Scan" not in operations
    queries = [params for name, params in seen if name == "Query"]
    # ... but the ring of groups (fair share): one bounded read per shard names the groups whose partitions to count.
    ring = [p for p in queries if p["ExpressionAttributeValues"].get(":k", {}).get("S", "").endswith("#groups")]
    assert ring and all(p["Limit"] <= 1000 for p in ring)
    # ... the StatusIndex by COUNT queries, the ReadyIndex by queries that return two projected attributes (billed as
    # a COUNT would be: by the index bytes read) to tell waiting, expired and running entries apart.
    # The queue metrics' figures (store/gauges.py) read the sort key too (the oldest waiting task's order time), at
    # most the cap's entries a partition, like the counts.
    for params in queries:
        if params not in ring:
            assert params.get("Select") == "COUNT" or (
                params["IndexName"] == "ReadyIndex" and params["ProjectionExpression"] == "#ttl, notBefore") or (
                params["IndexName"] == "ReadyIndex" and params["ProjectionExpression"] == "readySort, #ttl, notBefore"
                and params["Limit"] <= 1000), params


def _cell(page: str, name: str) -> str:
    start = page.index(f'data-count="{name}"')
    return page[page.index(">", start) + 1 : page.index("<", start)].strip()


def test_the_fragment_refreshes_the_counts(store, clock, browser):
    assert _cell(browser.get("/fragments/queues"), "work:ready") == "0"
    create(store, clock.now_ms(), 4)
    fragment = browser.get("/fragments/queues")
    assert _cell(fragment, "work:ready") == "4"
    assert "<html" not in fragment  # a fragment, swapped into the page in place


def test_succeeded_and_shed_come_from_the_functions_metrics(store, clock, browser, log):
    at = clock.now_ms() - 120_000
    blobs = [
        {"_aws": {"Timestamp": at, "CloudWatchMetrics": [{"Namespace": "TaskQueues", "Dimensions": [["queue", "service"]],
                  "Metrics": [{"Name": "TasksSucceeded", "Unit": "Count"}, {"Name": "TasksShed", "Unit": "Count"},
                              {"Name": "AgeAtClaim", "Unit": "Milliseconds"}]}]},
         "queue": "work", "service": "taskqueue", "TasksSucceeded": 7.0, "TasksShed": 2.0, "AgeAtClaim": [100.0, 300.0]},
    ]
    log.write_text("".join(f"ProcessTasksFunction {json.dumps(b)}\n" for b in blobs) + "TriggerFunction not json\n")
    page = browser.get("/")
    assert (_cell(page, "work:succeeded"), _cell(page, "work:shed")) == ("7", "2")
    assert "<polyline" in page and "age at claim" in page


def test_a_payload_holding_script_is_shown_as_text(store, clock, browser):
    payload = {"note": "<script>alert('x')</script>", "html": "<b>bold</b>"}
    [task_id] = create(store, clock.now_ms(), payload=payload)
    page = browser.get(f"/tasks/{task_id}")
    assert "<script>alert" not in page and "<b>bold</b>" not in page
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page
    listing = browser.get("/tasks?queue=work&state=PENDING")
    assert "<script>alert" not in listing and "&lt;script&gt;" in listing


def test_an_action_without_the_token_is_refused_and_changes_nothing(store, browser):
    browser.get("/")
    refused = browser.post("/actions/pause", {"queue": "work"}, token=False, status=400)
    assert "CSRF" in refused.get_data(as_text=True)
    assert not store.is_paused("work")
    browser.post("/actions/pause", {"queue": "work", "csrf_token": "forged"}, token=False, status=400)
    assert not store.is_paused("work")
    assert browser.client.get("/actions/pause").status_code == 405  # state changes are POSTs only


def test_pause_and_resume(store, browser, topics):
    page = browser.act("/actions/pause", {"queue": "work"})
    assert store.is_paused("work") and "paused queue &#39;work&#39;" in page
    page = browser.act("/actions/resume", {"queue": "work"})
    assert not store.is_paused("work") and "resumed queue" in page
    # a resume mark, which the table's stream hands to the queue's worker, as `taskq resume` writes; no publish
    marks = [i["taskId"]["S"] for i in store._db.scan(TableName=store.settings.queue_table_name)["Items"]
             if i["taskId"]["S"].startswith("queue#work#resume#")]
    assert len(marks) == 1 and topics.wakeups() == [] and topics.tail_calls() == []


def test_retry_a_failure_task(store, browser, topics):
    [task_id] = dead_letter(store, "work", 1)
    page = browser.get(f"/tasks/{task_id}")
    assert 'data-action="retry"' in page and "boom" in page
    page = browser.act(f"/actions/tasks/{task_id}/retry")
    assert status_of(store, task_id) == "PENDING" and store.get(task_id).attempts == 0
    # a MODIFY into PENDING: the table's stream starts the worker; nothing is published
    assert "retried" in page and topics.wakeups() == [] and topics.tail_calls() == []
    page = browser.act(f"/actions/tasks/{task_id}/retry")  # a PENDING task: refused as the CLI refuses it
    assert "cannot redrive task" in page


def test_cancel_reprioritize_and_touch(store, clock, browser):
    first, second = create(store, clock.now_ms(), 2)
    browser.act(f"/actions/tasks/{first}/reprioritize", {"priority": "7"})
    assert store.get(first).priority == 7
    page = browser.act(f"/actions/tasks/{first}/reprioritize", {"priority": "high"})
    assert "priority must be a whole number" in page and store.get(first).priority == 7
    clock.advance(5)
    browser.act(f"/actions/tasks/{second}/touch")
    assert store.get(second).enqueued_ms == clock.now_ms()
    browser.act(f"/actions/tasks/{first}/cancel")
    assert status_of(store, first) == "CANCELLED"


def test_purge_needs_the_queue_name_typed(store, browser):
    ids = dead_letter(store, "work", 2)
    page = browser.act("/actions/purge", {"queue": "work", "state": "FAILURE", "confirm": "yes"})
    assert "purge not confirmed" in page and store.count("work", TaskStatus.FAILURE) == 2
    page = browser.act("/actions/purge", {"queue": "work", "state": "TAKEN", "confirm": "work"})
    assert "TAKEN" in page and store.count("work", TaskStatus.FAILURE) == 2
    page = browser.act("/actions/purge", {"queue": "work", "state": "FAILURE", "confirm": "work"})
    assert "purged 2 FAILURE task(s)" in page and store.count("work", TaskStatus.FAILURE) == 0
    assert all(not store._get_many([i]) for i in ids)


def test_retry_all_of_a_filtered_list_retries_only_what_matches(store, browser):
    timeouts = dead_letter(store, "work", 2, error="legacy system timed out")
    refused = dead_letter(store, "work", 1, error="payload refused")
    listing = browser.get("/tasks?queue=work&state=FAILURE&error=TIMED+OUT")
    assert all(t in listing for t in timeouts) and refused[0] not in listing
    assert 'data-action="retry-filtered"' in listing
    browser.act("/actions/retry-all", {"queue": "work", "state": "FAILURE", "error": "timed out"})
    assert [status_of(store, t) for t in timeouts] == ["PENDING", "PENDING"]
    assert status_of(store, refused[0]) == "FAILURE"
    browser.act("/actions/retry-all", {"queue": "work", "state": "FAILURE"})  # the whole queue, as `taskq retry-all`
    assert status_of(store, refused[0]) == "PENDING"


def test_read_only_hides_and_refuses_every_action(store, clock, log):
    [task_id] = dead_letter(store, "work", 1)
    browser = Browser(make_board(store, clock, log, read_only=True))
    for path in ("/", f"/tasks/{task_id}", "/tasks?queue=work&state=FAILURE"):
        page = browser.get(path)
        assert "data-action=" not in page and "<form method=\"post\"" not in page
    assert "read-only" in browser.get("/")
    with browser.app.test_request_context():
        from flask_wtf.csrf import generate_csrf

        token = generate_csrf()
        cookie_session = dict(__import__("flask").session)
    with browser.client.session_transaction() as session:
        session.update(cookie_session)
    response = browser.client.post(f"/actions/tasks/{task_id}/retry", data={"csrf_token": token})
    assert response.status_code == 403 and "read-only" in response.get_data(as_text=True)
    assert status_of(store, task_id) == "FAILURE"


def test_search_by_task_id_and_by_request_id(store, clock, browser):
    from taskqueue.client.create import create_tasks
    from taskqueue.core.model import parse_create_request

    summary = create_tasks(parse_create_request({"count": 3}, store.settings), store, clock.now_ms(), request_id="req-42")
    one = summary.task_ids[1]
    response = browser.client.get(f"/search?q={one}")
    assert response.status_code == 302 and response.headers["Location"].endswith(f"/tasks/{one}")
    page = browser.get("/search?q=req-42")
    assert "3 task(s) created by request" in page and all(t in page for t in summary.task_ids)
    assert "No task has the id" in browser.get("/search?q=nothing-here")


def test_task_page_shows_lease_error_and_timeline(store, clock, browser):
    [task_id] = create(store, clock.now_ms(), payload={"job": 1})
    store.claim(store.candidates("work", 1)[0], "worker-9")
    page = browser.get(f"/tasks/{task_id}")
    assert "worker-9" in page and "lease of worker-9 expires" in page and "created (PENDING)" in page
    assert browser.client.get("/tasks/no-such-task").status_code == 404


def test_only_loopback_host_names_are_answered(browser):
    assert browser.client.get("/", headers={"Host": "evil.example:8080"}).status_code == 400
    assert browser.client.get("/", headers={"Host": "127.0.0.1:8080"}).status_code == 200


def test_every_page_forbids_inline_script(browser):
    response = browser.client.get("/")
    policy = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
