"""CreateTasks: writes PENDING tasks, from the EventBridge schedule, a direct invoke or a user's system.

Input (every field optional): {"queue": "work", "count": 1, "priority": 0, "ttlSeconds": DEFAULT_TTL_SECONDS,
"payload": {}, "maxAttempts": MAX_ATTEMPTS, "delaySeconds": 0, "taskIds": [...]}, or a whole EventBridge
Scheduled Event (a schedule without Input), which creates the default request {}. Both shapes are declared in
layers/taskqueue/taskqueue/schemas/create_tasks.schema.json; any other input is refused with an InvalidField that
names the field, and nothing is written.
"""

from __future__ import annotations

import functools
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from taskqueue.model import new_tasks, parse_create_event
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
    tasks = new_tasks(request, svc.clock.now_ms(), svc.settings, request_id)
    if request.task_ids:
        result = svc.store.put_tasks(tasks, idempotent=True)
    elif request_id is not None:
        result = svc.store.put_tasks_once(tasks)
    else:
        result = svc.store.put_tasks(tasks)
    metrics.add_dimension(name="queue", value=request.queue)
    metrics.add_metric(name="TasksCreated", unit=MetricUnit.Count, value=result.created)
    logger.info(
        "tasks created",
        extra={"queue": request.queue, "tasks_created": result.created, "already_existed": result.already_existed},
    )
    return {
        "queue": request.queue,
        "created": result.created,
        "alreadyExisted": result.already_existed,
        "taskIds": [t.task_id for t in tasks],
        "ttl": tasks[0].ttl,
    }


@metrics.log_metrics
@tracer.capture_lambda_handler
@logger.inject_lambda_context
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    return handle(event, services(), context.aws_request_id)
