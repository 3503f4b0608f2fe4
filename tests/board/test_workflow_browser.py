"""The board's workflow page in a real browser, as tests/board/test_browser.py runs the other pages (its fixtures: a
local stack as `make up` starts it, queues paused; `taskq board` as a user starts it; headless chromium). A screenshot
is saved under reports/board/."""

from __future__ import annotations

import time

import pytest

from taskqueue.client.create import create_tasks
from taskqueue.core.model import parse_create_request
from tests.board.test_browser import board_url, browser, page, stack  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e


def test_the_workflow_page_draws_the_tasks_and_opens_a_waiting_one(stack, board_url, page):  # noqa: F811
    from playwright.sync_api import expect

    store = stack["store"]
    body = {"queue": "work", "workflow": {"id": "browser-diamond", "tasks": [
        {"key": "fetch"}, {"key": "resize-1", "dependsOn": ["fetch"]}, {"key": "resize-2", "dependsOn": ["fetch"]},
        {"key": "gallery", "dependsOn": ["resize-1", {"key": "resize-2", "policy": "ignore-failure"}]}]}}
    create_tasks(parse_create_request(body, store.settings), store, int(time.time() * 1000))
    page.goto(board_url + "workflow?id=browser-diamond")
    expect(page.locator("#workflow-state")).to_have_text("RUNNING")
    expect(page.locator('#workflow-picture g[data-key="fetch"]')).to_have_attribute("data-status", "PENDING")
    expect(page.locator('#workflow-picture g[data-key="gallery"]')).to_have_attribute("data-status", "WAITING")
    expect(page.locator("#workflow-picture line")).to_have_count(4)
    expect(page.locator('#workflow-tasks tr[data-key="gallery"]')).to_contain_text("resize-1, resize-2?")
    page.locator('#workflow-picture g[data-key="gallery"]').click()
    expect(page.locator("#task-status")).to_have_text("WAITING")
    page.locator("#task-workflow").click()
    expect(page.locator("#workflow-id")).to_have_text("browser-diamond")
