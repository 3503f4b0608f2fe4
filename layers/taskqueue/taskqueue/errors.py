"""Exceptions of the queue core. Each says what was wrong and what to do about it."""

from __future__ import annotations


class TaskQueueError(Exception):
    """Base class of every error the queue core raises on purpose."""


class ConfigError(TaskQueueError):
    """An environment variable is missing or has a bad value."""


class InvalidTaskInput(TaskQueueError):
    """A request to create or change tasks is malformed; nothing was written."""


class InvalidTransition(TaskQueueError):
    """A state change the task lifecycle does not allow (refused before any I/O)."""


class TaskNotFound(TaskQueueError):
    """No task has this id (it never existed, or TTL removed it)."""


class ConditionFailed(TaskQueueError):
    """A conditional write lost: the task was not in the state (or lease) the write required."""


class PermanentTaskError(TaskQueueError):
    """Raised by a task runner when retrying can never succeed: the task goes straight to FAILURE."""


class ResultTooLarge(TaskQueueError):
    """A runner returned a result too large to store with its task; the task is recorded as a FAILURE."""


class RunnerBusy(TaskQueueError):
    """The runner has no free slot; the caller must wait for one before it claims a task."""


class InvalidField(InvalidTaskInput):
    """An input that breaks its published JSON Schema. ``field`` names where ("count", "taskIds[2]", or "" for the
    input as a whole); the message says what was wrong and what is allowed."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field
