"""A runner for bench/pickup_realtime.py's ``busy`` and ``killed`` cases only (not an example to copy: see
example_runner/): it sleeps ``payload["seconds"]`` (default 1) and, for a payload with ``"die": true``, ends its
process at the task's first attempt, as Lambda does on a Timeout or OOM (no outcome recorded, the lease held).

TaskRunner: ``bench_runner:run``.
"""

from __future__ import annotations

import os
import time
from typing import Any

from taskqueue.model import Task


def run(task: Task) -> dict[str, Any]:
    if task.payload.get("die") and task.attempts == 1:
        os._exit(137)
    time.sleep(float(task.payload.get("seconds", 1.0)))
    return {}
