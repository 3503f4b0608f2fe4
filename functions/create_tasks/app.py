"""CreateTasks: writes PENDING tasks, from the EventBridge schedule, a direct invoke or a user's system.

Input (every field optional): {"queue": "work", "count": 1, "priority": 0, "ttlSeconds": DEFAULT_TTL_SECONDS,
"payload": {}, "maxAttempts": MAX_ATTEMPTS, "delaySeconds": 0, "taskIds": [...], "traceparent": "00-...",
"awsTraceHeader": "Root=..."}, or a whole EventBridge
Scheduled Event (a schedule without Input), which creates the default request {}. Both shapes are declared in
layers/taskqueue/taskqueue/core/schemas/create_tasks.schema.json; any other input is refused with an InvalidField that
names the field, and nothing is written. Without a trace context in the request the tasks carry the invocation's
(Lambda passes a traced caller's X-Ray trace on; docs/tracing.md).
"""

from __future__ import annotations

import functools
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from taskqueue.client.create import create_tasks
from taskqueue.core.model import parse_create_event
from taskqueue.services import Services

logger = Logger()
tracer = Tracer()
metrics = Metrics()


@functools.cache
def services() -> Services:
    return Services.from_env()


def handle(event: Any, svc: Services, request_id: str | None = None) -> dict[str, Any]:
    """``request_id`` (the invocation's) names the tasks when the caller names none: Lambda retries an
    asynchronous invocation (the schedule's) with the same request id, so a retry after a partial write
    creates only the missing tasks."""
    # A schedule with Input delivers the Input as it is (a request); one without delivers the whole Scheduled
    # Event, whose detail is always {}: the default request.
    request = parse_create_event(event, svc.settings)
    svc.check_request(request)  # a call whose preferences can never match is refused now, not shed at its TTL
    # The tasks alone: the table's stream starts the queue's worker for them.
    summary = create_tasks(request, svc.store, svc.clock.now_ms(), request_id)
    metrics.add_dimension(name="queue", value=request.queue)
    metrics.add_metric(name="TasksCreated", unit=MetricUnit.Count, value=summary.created)
    logger.info(
        "tasks created",
        extra={"queue": request.queue, "tasks_created": summary.created, "already_existed": summary.already_existed},
    )
    return summary.as_dict()


@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    # The request id names the tasks (requestId) and is the correlation id of their logs.
    logger.set_correlation_id(context.aws_request_id)
    return handle(event, services(), context.aws_request_id)
