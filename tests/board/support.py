"""Helpers of the board's tests: a Board over the test's moto (or DynamoDB Local) table, a Flask test client that
carries the page's CSRF token, and tasks in each state."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import boto3

from taskq.board.app import create_app
from taskq.board.counting import CAP, BackgroundValue, CountKeeper
from taskq.board.metrics import EmfLogMetrics
from taskq.board.services import Board
from taskq.connection import Connection, Target
from taskq.failed_events import FailedEventsTarget
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.matching.agents import AgentStore
from taskqueue.store import TaskStore

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


def make_board(store: TaskStore, clock: Any, log: Path, *, read_only: bool = False, agents: AgentStore | None = None,
               failed_events_url: str | None = None, background: bool = False, cap: int = CAP) -> Board:
    """A board whose counts are read again at every request (no sharing window) and, unless ``background``, whose
    background reads (full counts, the agent table's Scan) are made when asked for, in the asking thread, so a
    test sees them at once."""
    connection = Connection(boto3.session.Session(), None, None, {})
    target = Target(connection, store.settings, store, clock)
    failed = FailedEventsTarget(connection.session, None, failed_events_url) if failed_events_url else None
    counts = CountKeeper(store, clock.now_ms, cap=cap, fresh_s=0, background=background)
    seen = None if agents is None else BackgroundValue(agents.agents, 0 if not background else 30, "agents",
                                                      background=background)
    return Board(target, read_only, EmfLogMetrics(log), agents, failed, "test table", counts=counts, agents_seen=seen,
                 groups_every_s=30 if background else 0, groups_background=background,
                 gauges_every_s=30 if background else 0, gauges_background=background)


class Browser:
    """A Flask test client that keeps the session cookie and knows the CSRF token of the last page it read."""

    def __init__(self, board: Board) -> None:
        self.app = create_app(board, secret_key=b"test-secret-key")
        self.client = self.app.test_client()
        self.token: str | None = None

    def get(self, path: str, status: int = 200) -> str:
        response = self.client.get(path)
        assert response.status_code == status, f"GET {path}: {response.status_code}\n{response.get_data(as_text=True)[:2000]}"
        text = response.get_data(as_text=True)
        found = TOKEN.search(text)
        if found:
            self.token = found.group(1)
        return text

    def post(self, path: str, data: dict[str, str] | None = None, *, token: bool = True, status: int = 303) -> Any:
        form = dict(data or {})
        if token:
            if self.token is None:
                self.get("/")
            form["csrf_token"] = self.token or ""
        response = self.client.post(path, data=form)
        assert response.status_code == status, f"POST {path}: {response.status_code}\n{response.get_data(as_text=True)[:2000]}"
        return response

    def act(self, path: str, data: dict[str, str] | None = None) -> str:
        """POST an action with the token, follow the redirect, return the page it lands on."""
        response = self.post(path, data)
        return self.get(response.headers["Location"])


def create(store: TaskStore, now_ms: int, n: int = 1, **body: Any) -> list[str]:
    tasks = new_tasks(parse_create_request({"count": n, **body}, store.settings), now_ms, store.settings)
    store.put_tasks(tasks)
    return [t.task_id for t in tasks]


def dead_letter(store: TaskStore, queue: str, n: int, error: str = "boom") -> list[str]:
    """``n`` tasks of ``queue`` that failed their only attempt with ``error``."""
    ids = create(store, store._clock.now_ms(), n, queue=queue, maxAttempts=1)
    for task_id in ids:  # these tasks, whatever else waits in the queue
        candidate = next(c for c in store.candidates(queue, 1000, shed=False) if c.task_id == task_id)
        task = store.claim(candidate, "w")
        assert task is not None and store.fail(task, "w", error)
    return ids


def status_of(store: TaskStore, task_id: str) -> str:
    return store.get(task_id).status.value
