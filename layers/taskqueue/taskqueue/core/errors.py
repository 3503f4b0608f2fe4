"""Exceptions of the queue core. Each says what was wrong and what to do about it."""

from __future__ import annotations


class TaskQueueError(Exception):
    """Base class of every error the queue core raises on purpose."""


class ConfigError(TaskQueueError):
    """An environment variable is missing or has a bad value."""


class InvalidInput(TaskQueueError):
    """Input refused as it is, before anything was written. Each subclass names where the input came from;
    catch this one to refuse input of any kind."""


class InvalidTaskInput(InvalidInput):
    """A request to create or change tasks (or a queue name, a priority, a state in one) is malformed."""


class InvalidEvent(InvalidInput):
    """A Lambda event a function does not take: a wake-up (SNS or direct) that names no configured queue in
    the expected shape, a stream record that cannot be read, an event of another source."""


class InvalidAgentInput(InvalidInput):
    """An agent event, an agent profile or a call's matching preferences that matching cannot use."""


class InvalidPageToken(InvalidInput):
    """A page token that is not the next-page token of the same listing."""


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


class TaskTooLong(TaskQueueError):
    """A claim refused because the task declares a longer run than the claiming invocation has time for
    (taskqueue.core.run_time): the task stays PENDING for a fresh invocation. ``run_seconds``: what it may run."""

    def __init__(self, task_id: str, run_seconds: int, within_seconds: float) -> None:
        super().__init__(
            f"task {task_id} may run {run_seconds} s, longer than this invocation can still finish "
            f"({max(0.0, within_seconds):.0f} s): left for a fresh invocation"
        )
        self.task_id = task_id
        self.run_seconds = run_seconds
        self.within_seconds = within_seconds


class RunnerBusy(TaskQueueError):
    """The runner has no free slot; the caller must wait for one before it claims a task."""


class WaitTimedOut(TaskQueueError):
    """A task did not finish within the time a caller waited for it (``taskqueue.client``). ``task``: its state as
    last read."""

    def __init__(self, message: str, task: object) -> None:
        super().__init__(message)
        self.task = task


class InvalidField(InvalidTaskInput):
    """An input that breaks its published JSON Schema. ``field`` names where ("count", "taskIds[2]", or "" for the
    input as a whole); the message says what was wrong and what is allowed."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field

