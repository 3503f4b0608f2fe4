"""The board and fair share's groups: grouped waiting tasks in the queues page's counts (bounded per request, marked
when not exact), the groups page (noisiest first; waiting, running, oldest wait, limits own or default, pause), its
actions (pause, resume, limits; refused on a read-only board), and the task list filtered by group."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from taskq.board.counting import CountKeeper
from tests.board.support import Browser, create, make_board

pytestmark = pytest.mark.dynamodb_engines


def count_of(page: str, key: str) -> str:
    found = re.search(rf'data-count="{re.escape(key)}"[^>]*>([^<]*)<', page)
    assert found, key
    return found.group(1).strip()


def test_the_queues_page_counts_grouped_waiting_tasks(store, clock, tmp_path: Path):
    now = clock.now_ms()
    create(store, now, 2, queue="work")
    create(store, now, 3, queue="work", group="acme")
    create(store, now, 1, queue="work", group="globex", delaySeconds=60)
    page = Browser(make_board(store, clock, tmp_path / "log")).get("/")
    assert count_of(page, "work:ready") == "5" and count_of(page, "work:delayed") == "1"


def test_many_groups_are_counted_a_budget_per_request_and_marked_until_counted(store, clock):
    now = clock.now_ms()
    for n in range(6):
        create(store, now, 1, queue="work", group=f"g{n}")
    seconds = [0.0]
    keeper = CountKeeper(store, clock.now_ms, fresh_s=2.5, background=False, group_budget=4, clock=lambda: seconds[0])
    first = keeper.depth("work", now)  # 12 group partitions (ready and delayed), 4 counted
    assert first.ready.lower_bound and not first.ready.exact
    keeper.depth("work", now)
    third = keeper.depth("work", now)  # every partition counted once now, within fresh_s: exact
    assert (third.ready.value, third.ready.exact) == (6, True)
    seconds[0] += 10
    later = keeper.depth("work", clock.now_ms())  # 4 recounted, the rest shown with their age
    assert later.ready.value == 6 and not later.ready.exact and not later.ready.lower_bound and "~" in str(later.ready)


def test_the_groups_page_shows_each_group_noisiest_first_with_its_limits(store, clock, tmp_path: Path):
    now = clock.now_ms()
    create(store, now, 1, queue="work", group="quiet")
    create(store, now, 4, queue="work", group="noisy")
    create(store, now, 2, queue="work")
    store.set_group_settings("work", "quiet", concurrency=2, rate=(5, 1.0))
    clock.advance(7)
    browser = Browser(make_board(store, clock, tmp_path / "log"))
    page = browser.get("/groups")
    rows = re.findall(r'data-group="work:([^"]+)"', page)
    assert rows == ["noisy", "default", "quiet"]
    assert count_of(page, "work:noisy:waiting") == "4" and count_of(page, "work:noisy:running") == "0"
    assert re.search(r'data-limit="work:quiet:concurrency">2 \(own\)<', page)
    assert re.search(r'data-limit="work:quiet:rate">5/1s \(own\)<', page)
    assert "7s" in page  # the oldest wait
    assert browser.get("/fragments/groups").startswith('<section id="groups"')


def test_a_group_is_paused_resumed_and_limited_from_the_board(store, clock, tmp_path: Path):
    create(store, clock.now_ms(), 1, queue="work", group="acme")
    browser = Browser(make_board(store, clock, tmp_path / "log"))
    browser.get("/groups")
    landed = browser.act("/actions/group/pause", {"queue": "work", "group": "acme", "seconds": "120", "next": "/groups"})
    assert "paused group &#39;acme&#39;" in landed and 'data-paused="work:acme"' in landed
    assert store.group_view("work", "acme").limits.paused_until_ms == clock.now_ms() + 120_000
    landed = browser.act("/actions/group/resume", {"queue": "work", "group": "acme", "next": "/groups"})
    assert "resumed group" in landed and 'data-paused="work:acme"' not in landed
    landed = browser.act("/actions/group/limits", {"queue": "work", "group": "acme", "concurrency": "3", "rate": "10/2"})
    assert re.search(r'data-limit="work:acme:concurrency">3 \(own\)<', landed)
    limits = store.group_view("work", "acme").limits
    assert (limits.concurrency, limits.rate, limits.period_seconds) == (3, 10, 2.0)
    landed = browser.act("/actions/group/limits", {"queue": "work", "group": "acme", "rate": "default"})
    assert store.group_view("work", "acme").limits.rate is None
    for bad, reason in (({"concurrency": "lots"}, "whole number"), ({}, "nothing to set"), ({"rate": "1/0"}, "period")):
        landed = browser.act("/actions/group/limits", {"queue": "work", "group": "acme", **bad})
        assert reason in landed and 'class="flash error"' in landed
    landed = browser.act("/actions/group/pause", {"queue": "work", "group": "a#b", "seconds": "5"})
    assert "not valid" in landed


def test_a_read_only_board_shows_groups_and_refuses_their_actions(store, clock, tmp_path: Path):
    create(store, clock.now_ms(), 1, queue="work", group="acme")
    browser = Browser(make_board(store, clock, tmp_path / "log", read_only=True))
    page = browser.get("/groups")
    assert 'data-group="work:acme"' in page and "group-pause" not in page and "Pause 60 s" not in page
    assert '<form method="post"' not in page
    with browser.app.test_request_context():  # a valid token, as a read-write board's page would carry
        from flask import session
        from flask_wtf.csrf import generate_csrf

        token, cookie_session = generate_csrf(), dict(session)
    with browser.client.session_transaction() as kept:
        kept.update(cookie_session)
    for action in ("pause", "resume", "limits"):
        response = browser.client.post(f"/actions/group/{action}", data={
            "csrf_token": token, "queue": "work", "group": "acme", "seconds": "60", "concurrency": "1"})
        assert response.status_code == 403 and "read-only" in response.get_data(as_text=True)
    assert store.group_view("work", "acme").limits.paused_until_ms is None


def test_the_task_list_filters_by_group(store, clock, tmp_path: Path):
    now = clock.now_ms()
    acme = create(store, now, 2, queue="work", group="acme")
    plain = create(store, now, 1, queue="work")
    browser = Browser(make_board(store, clock, tmp_path / "log"))
    page = browser.get("/tasks?queue=work&state=PENDING&group=acme")
    assert set(re.findall(r'data-task="([^"]+)"', page)) == set(acme) and 'data-task-group="acme"' in page
    page = browser.get("/tasks?queue=work&state=PENDING&group=default")
    assert set(re.findall(r'data-task="([^"]+)"', page)) == set(plain)
    task_page = browser.get(f"/tasks/{acme[0]}")
    assert "data-group" in task_page and "acme" in task_page
    browser.get("/tasks?group=a%23b", status=400)
