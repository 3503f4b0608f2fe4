"""What an application imports to put work on the queues: ``TaskQueueClient`` (queue_client), the creation of
tasks that CreateTasks and the client share (create), and how a client or the CLI finds a stack (discovery).
May import every package below it (services, wakeups, store, core).

The client's names are loaded on first use, so CreateTasks importing ``taskqueue.client.create`` loads no more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from taskqueue.client.queue_client import Enqueued, TaskQueueClient, WakeUp

# What ``from taskqueue.client import ...`` gives an application: the client, what ``enqueue`` returns, and how the
# worker learns of the task (``WakeUp``).
__all__ = ["Enqueued", "TaskQueueClient", "WakeUp"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from taskqueue.client import queue_client

        return getattr(queue_client, name)
    raise AttributeError(f"module 'taskqueue.client' has no attribute {name!r}")
