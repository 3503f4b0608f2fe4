"""What an application imports to put work on the queues: ``TaskQueueClient`` (queue_client), the creation of
tasks that CreateTasks and the client share (create), and how a client or the CLI finds a stack (discovery).
May import every package below it (services, wakeups, store, core).

``TaskQueueClient`` is loaded on first use, so CreateTasks importing ``taskqueue.client.create`` loads no more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from taskqueue.client.queue_client import TaskQueueClient

__all__ = ["TaskQueueClient"]


def __getattr__(name: str) -> Any:
    if name == "TaskQueueClient":
        from taskqueue.client.queue_client import TaskQueueClient

        return TaskQueueClient
    raise AttributeError(f"module 'taskqueue.client' has no attribute {name!r}")
