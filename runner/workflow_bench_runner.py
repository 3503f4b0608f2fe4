"""A runner for bench/workflow_pickup.py only (not an example to copy: see example_runner/): it sleeps
``payload["seconds"]`` (default 0.01) and returns what it saw of its dependencies, so the bench can check that no
task ran before every dependency had ended.

TaskRunner: ``workflow_bench_runner:run``.
"""

from __future__ import annotations

import time
from typing import Any

from taskqueue.model import Task

ENDED = {"SUCCESS", "FAILURE", "CANCELLED", "SHED"}


def run(task: Task) -> dict[str, Any]:
    started_ms = time.time_ns() // 1_000_000
    early = [d.key for d in task.dependencies if d.status is None or d.status.value not in ENDED]
    time.sleep(float(task.payload.get("seconds", 0.01)))
    return {"startedMs": started_ms, "dependencies": len(task.dependencies), "early": early}
