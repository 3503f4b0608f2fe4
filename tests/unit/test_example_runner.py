"""The example runner (runner/example_runner/http_call.py) keeps the runner protocol: 2xx returns a result, 4xx is a
PermanentTaskError, 5xx / 429 / a timeout / no connection are retried, progress is reported per item."""

from __future__ import annotations

import pytest

from example_runner import http_call
from taskqueue.core.errors import PermanentTaskError
from taskqueue.core.model import Task
from taskqueue.core.states import TaskStatus
from tests.http_service import http_service


def task(payload: dict) -> Task:
    return Task(task_id="t-1", queue="work", status=TaskStatus.TAKEN, priority=0, created_ms=0, updated_ms=0,
                enqueued_ms=0, ttl=10**10, payload=payload)


@pytest.fixture
def service(monkeypatch):
    with http_service(slow_seconds=1.0) as (url, received):
        monkeypatch.setenv("EXAMPLE_API_TIMEOUT_SECONDS", "0.3")
        yield url, received


def use(monkeypatch, url: str) -> None:
    monkeypatch.setenv("EXAMPLE_API_URL", url)


def test_a_2xx_answer_is_the_tasks_result_and_each_item_is_a_call(service, monkeypatch):
    url, received = service
    use(monkeypatch, f"{url}/ok")
    result = http_call.run(task({"items": [{"n": 1}, {"n": 2}]}))
    assert result == {"calls": 2, "lastStatus": 200, "lastBody": '{"path": "/ok", "status": 200}'}
    assert [r["body"] for r in received] == [{"n": 1}, {"n": 2}]
    assert {r["key"] for r in received} == {"t-1"}  # the service can tell a retried call from a new one


def test_a_4xx_answer_fails_the_task_for_good(service, monkeypatch):
    use(monkeypatch, f"{service[0]}/missing")
    with pytest.raises(PermanentTaskError, match="refused the task with 404"):
        http_call.run(task({"x": 1}))


@pytest.mark.parametrize("path", ["/broken", "/busy", "/slow"])
def test_a_5xx_a_429_or_a_timeout_is_a_failed_attempt_to_retry(service, monkeypatch, path):
    use(monkeypatch, service[0] + path)
    with pytest.raises(http_call.ServiceUnavailable):
        http_call.run(task({"x": 1}))


def test_no_service_at_all_is_retried_too(monkeypatch):
    use(monkeypatch, "http://127.0.0.1:9/")  # the discard port: nothing listens
    with pytest.raises(http_call.ServiceUnavailable, match="could not be reached"):
        http_call.run(task({}))


def test_without_its_url_the_runner_fails_the_task_with_what_to_set(monkeypatch):
    monkeypatch.delenv("EXAMPLE_API_URL", raising=False)
    with pytest.raises(PermanentTaskError, match="EXAMPLE_API_URL is not set.*RunnerEnvironment"):
        http_call.run(task({}))
