"""Issue 28: every task id the CreateTasks schema allows (1-200 printable characters but '#') has a page on the
board, links that reach it, and actions that act on it: ids with '/', '?', '%', spaces, quotes, unicode, and the
ids a browser would resolve away in a path ("." and "..")."""

from __future__ import annotations

import html
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.board.support import Browser, create, make_board, status_of

pytestmark = pytest.mark.dynamodb_engines


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "local-stack.functions.log"


ODD_IDS = ["a/b", "a//b/", "/lead", "what?x=1", "100%", "50%2F", "with space", "plus+sign", "ünïcødé-任务", "..", ".",
           "a/../b", "semi;colon", "quote'\"<>", "back\\slash", "emoji-🙂", "tab-free&amp=1"]


def _links(page: str) -> list[str]:
    return [html.unescape(href) for href in re.findall(r'href="(/task[^"]*)"', page)]


def test_every_task_id_the_schema_allows_has_a_page_and_actions(store, clock, log):
    ids = create(store, clock.now_ms(), len(ODD_IDS), taskIds=ODD_IDS)
    assert sorted(ids) == sorted(ODD_IDS)
    browser = Browser(make_board(store, clock, log))
    listing = browser.get("/tasks?queue=work&state=PENDING&limit=50")
    links = [link for link in _links(listing) if link != "/tasks" and not link.startswith("/tasks?")]
    assert len(links) == len(ODD_IDS)
    for link in links:
        # what a browser does to the URL: no dot segment may be left in its path (it would resolve it away)
        path = urlsplit(link).path
        assert not any(segment in (".", "..") for segment in unquote(path).split("/")[1:]) or "?" in link
        assert "#" not in link and " " not in link
    shown = set()
    for link in links:
        page = browser.get(link)
        found = re.search(r'data-task-id="([^"]*)"', page)
        assert found, link
        shown.add(found.group(1))
    assert {html.unescape(s) for s in shown} == set(ODD_IDS)
    for task_id in ("a/b", "what?x=1", "..", "ünïcødé-任务"):
        page = browser.get(_task_link(browser, task_id))
        action = re.search(r'<form method="post" action="([^"]+)"[^>]*>\s*<input[^>]*>\s*(?:<input[^>]*>\s*)*<button[^>]*data-action="cancel"',
                           page)
        assert action, page[:3000]
        landed = browser.act(html.unescape(action.group(1)))
        assert status_of(store, task_id) == "CANCELLED", landed[:2000]
        assert "cancelled" in landed and "data-task-id=" in landed  # back on the task's own page


def _task_link(browser: Browser, task_id: str) -> str:
    from taskq.board.views import task_url

    with browser.app.test_request_context():
        return task_url(task_id)


def test_search_by_an_odd_id_lands_on_its_page(store, clock, log):
    create(store, clock.now_ms(), 1, taskIds=["x/y?z"])
    browser = Browser(make_board(store, clock, log))
    response = browser.client.get("/search", query_string={"q": "x/y?z"})
    assert response.status_code == 302
    assert 'data-task-id="x/y?z"' in browser.get(response.headers["Location"])
