"""An example task runner: it sends each task's payload to an HTTP service. Copy it as the start of your own.

TaskRunner: ``example_runner.http_call:run``. Its configuration comes from the RunnerEnvironment parameter (a JSON
object of environment variables):

- ``EXAMPLE_API_URL`` (required): where each task is POSTed as JSON;
- ``EXAMPLE_API_TIMEOUT_SECONDS`` (default 10): how long one call may take.

The runner protocol (docs/runner.md), as this runner uses it:

- return a dict: the task succeeded, and the dict is kept as its result (keep it small: at most 100 KB);
- raise ``PermanentTaskError``: retrying cannot help (the service refused the request: HTTP 4xx), the task goes to
  FAILURE (the dead-letter state) at once;
- raise anything else: a failed attempt, retried with backoff until the task's maxAttempts (HTTP 5xx, 408, 429,
  a timeout, a refused connection);
- ``report_progress(number, message)``: how far it is; written at most every few seconds, seen by ``taskq show``,
  the producer client and the table's stream;
- ``tracing.span`` and ``tracing.headers()``: each call is a span of the task's trace (the producer's, which the
  worker's span for the attempt joins), and the service gets ``traceparent`` and ``X-Amzn-Trace-Id`` so its own spans
  join it too (docs/tracing.md).

A payload ``{"items": [...]}`` is sent one item per call, with progress after each; any other payload in one call.
"""

from __future__ import annotations

import os
from typing import Any

import httpx

from taskqueue import tracing
from taskqueue.errors import PermanentTaskError
from taskqueue.model import Task
from taskqueue.progress import report_progress

# 4xx answers that say "later", not "never": retried like a server error.
RETRYABLE_CLIENT_ERRORS = frozenset({408, 425, 429})


class ServiceUnavailable(Exception):
    """The service could not take the call now (5xx, 408/425/429, a timeout, no connection): the attempt is
    retried with backoff."""


def run(task: Task) -> dict[str, Any]:
    url = os.environ.get("EXAMPLE_API_URL", "")
    if not url:
        # A configuration error: no retry can fix it, so fail the task at once with what to do.
        raise PermanentTaskError("EXAMPLE_API_URL is not set: give it in the RunnerEnvironment parameter")
    timeout = float(os.environ.get("EXAMPLE_API_TIMEOUT_SECONDS", "10"))
    items = task.payload.get("items")
    calls = items if isinstance(items, list) else [task.payload]
    answers = []
    with httpx.Client(timeout=timeout, headers={"Idempotency-Key": task.task_id}) as client:
        for number, body in enumerate(calls, start=1):
            answers.append(call(client, url, body))
            report_progress(100 * number / len(calls), f"{number} of {len(calls)} sent")
    return {"calls": len(calls), "lastStatus": answers[-1]["status"], "lastBody": answers[-1]["body"]}


def call(client: httpx.Client, url: str, body: Any) -> dict[str, Any]:
    """One POST, a span of the task's trace; its status and (clipped) answer, or the error the runner protocol needs."""
    with tracing.span(f"POST {httpx.URL(url).host}"):
        try:
            response = client.post(url, json=body, headers=tracing.headers())
        except httpx.TimeoutException as exc:
            raise ServiceUnavailable(f"{url} did not answer within {client.timeout.read} s") from exc
        except httpx.TransportError as exc:
            raise ServiceUnavailable(f"{url} could not be reached: {exc}") from exc
    status = response.status_code
    if status >= 500 or status in RETRYABLE_CLIENT_ERRORS:
        raise ServiceUnavailable(f"{url} answered {status}: {response.text[:200]}")
    if status >= 400:
        raise PermanentTaskError(f"{url} refused the task with {status}: {response.text[:200]}")
    return {"status": status, "body": response.text[:1000]}
