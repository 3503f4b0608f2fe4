"""The queue's scheduled wake-up at its delayed head: one EventBridge Scheduler one-time schedule per queue (the only
code that talks to Scheduler; the client is handed in). The rules are ``taskqueue.core.wake_schedule``.

A worker that stops with a future delayed head calls ``ensure``: when the queue's record (``wakeAt``) shows a
schedule that fires at or before the head, nothing is sent; else it records the new time (a conditional write that
only moves ``wakeAt`` earlier, so of two stopping workers the earlier head wins) and creates the schedule, or moves
the existing one (UpdateSchedule). The schedule (``at(...)``, flexible time window OFF, ActionAfterCompletion DELETE)
invokes Trigger with ``{"wakeQueue": <queue>, "reason": "delayed-head"}``, which wakes the queue as a backstop.

Per delayed task: one conditional write and one CreateSchedule (or UpdateSchedule) at the first stop that sees its
head; none at later stops while the head is covered. The safety net calls ``ensure(verify=True)`` once a minute per
queue with a future head: one GetSchedule, and a fix (the record forced, then Create/Update) if the schedule is
missing or later than the head, so a lost schedule costs at most the safety net's period.

A refusal (Scheduler or DynamoDB) never fails a run: it is logged, counted (``WakeScheduleRefused``) and the record's
``wakeAt`` given back, so the next stop tries again; until then the safety net is the backstop.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger
from botocore.exceptions import BotoCoreError, ClientError

from taskqueue.core import metrics as handler_metrics
from taskqueue.core import wake_schedule
from taskqueue.core.clock import Clock
from taskqueue.core.errors import TaskQueueError
from taskqueue.core.record import QueueRecord
from taskqueue.core.wake_schedule import ScheduleStep
from taskqueue.store import TaskStore
from taskqueue.store.dynamo import error_code

logger = Logger(child=True)

REASON = "delayed-head"
# How often Scheduler retries a refused invocation of Trigger, and for how long (the safety net backs it up).
RETRY_POLICY = {"MaximumRetryAttempts": 3, "MaximumEventAgeInSeconds": 300}


@dataclass(frozen=True)
class ScheduleConfig:
    """Where the schedules live and what they invoke (the template's environment variables)."""

    group: str  # WAKE_SCHEDULE_GROUP: the stack's own schedule group; a queue's schedule in it is wake-<queue>
    role_arn: str  # WAKE_SCHEDULE_ROLE_ARN: the role Scheduler assumes to invoke Trigger
    target_arn: str  # WAKE_TARGET_ARN: the Trigger function (Trigger itself passes its own ARN)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, target_arn: str | None = None) -> ScheduleConfig | None:
        """``None`` when the stack sets no schedules (a worker then waits within its budget, as before)."""
        env = os.environ if env is None else env
        group, role, target = env.get("WAKE_SCHEDULE_GROUP"), env.get("WAKE_SCHEDULE_ROLE_ARN"), target_arn or env.get("WAKE_TARGET_ARN")
        if not (group and role and target):
            return None
        return cls(group, role, target)


def wake_input(queue: str) -> dict[str, str]:
    """What the schedule hands Trigger."""
    return {"wakeQueue": queue, "reason": REASON}


class DelayedWakeups:
    def __init__(self, store: TaskStore, scheduler: Any, config: ScheduleConfig, clock: Clock) -> None:
        self._store = store
        self._scheduler = scheduler
        self._config = config
        self._clock = clock

    @classmethod
    def from_env(
        cls, store: TaskStore, clock: Clock, target_arn: str | None = None, env: Mapping[str, str] | None = None
    ) -> DelayedWakeups | None:
        config = ScheduleConfig.from_env(env, target_arn=target_arn)
        if config is None:
            return None
        import boto3  # only where schedules are configured

        return cls(store, boto3.client("scheduler"), config, clock)

    def name(self, queue: str) -> str:
        return wake_schedule.schedule_name(queue)

    def ensure(self, queue: str, head_ms: int | None, record: QueueRecord | None, *, verify: bool = False) -> str:
        """Make sure the queue's schedule fires by its delayed head ``head_ms`` (``record``: the queue's record as
        the caller last read it). ``verify`` (the safety net): look at the schedule itself, not only the record.
        Returns what happened: "none", "covered", "scheduled" or "refused"."""
        now_ms = self._clock.now_ms()
        wake_at = record.wake_at_ms if record is not None else None
        step = wake_schedule.schedule_step(head_ms, None if verify else wake_at, now_ms)
        if step is ScheduleStep.NONE or (step is ScheduleStep.COVERED and not verify):
            return step.value
        assert head_ms is not None
        at_ms = wake_schedule.wake_time_ms(head_ms, now_ms)
        try:
            existing = self._existing(queue) if verify else None
            if verify and existing is not None and now_ms < existing <= at_ms:
                return ScheduleStep.COVERED.value
            if not self._store.set_wake_at(queue, at_ms, now_ms, force=verify):
                return ScheduleStep.COVERED.value  # another stop recorded an earlier one
        except TaskQueueError as exc:
            return self._refused(queue, "recording the scheduled wake-up", exc, None)
        expected = existing is not None if verify else wake_at is not None and wake_at > now_ms
        try:
            self._put(queue, at_ms, update=expected)
        except (ClientError, BotoCoreError) as exc:
            return self._refused(queue, "setting the scheduled wake-up", exc, at_ms)
        logger.info("wake-up scheduled at the delayed head",
                    extra={"queue": queue, "head_ms": head_ms, "wake_at_ms": at_ms, "schedule": self.name(queue)})
        return "scheduled"

    def _existing(self, queue: str) -> int | None:
        """When the queue's schedule fires (``None``: there is none)."""
        try:
            schedule = self._scheduler.get_schedule(Name=self.name(queue), GroupName=self._config.group)
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return None
            raise
        return wake_schedule.at_of(str(schedule.get("ScheduleExpression", "")))

    def _put(self, queue: str, at_ms: int, *, update: bool) -> None:
        """Create the schedule, or move the existing one (whichever the first try finds missing or present)."""
        args = {
            "Name": self.name(queue), "GroupName": self._config.group,
            "ScheduleExpression": wake_schedule.at_expression(at_ms), "ScheduleExpressionTimezone": "UTC",
            "FlexibleTimeWindow": {"Mode": "OFF"}, "ActionAfterCompletion": "DELETE", "State": "ENABLED",
            "Target": {"Arn": self._config.target_arn, "RoleArn": self._config.role_arn,
                       "Input": json.dumps(wake_input(queue)), "RetryPolicy": RETRY_POLICY},
            "Description": f"wake queue {queue} at its delayed head",
        }
        first, second, missing = (
            (self._scheduler.update_schedule, self._scheduler.create_schedule, "ResourceNotFoundException")
            if update else (self._scheduler.create_schedule, self._scheduler.update_schedule, "ConflictException")
        )
        try:
            first(**args)
        except ClientError as exc:
            if error_code(exc) != missing:
                raise
            second(**args)

    def _refused(self, queue: str, what: str, exc: Exception, at_ms: int | None) -> str:
        handler_metrics.count("WakeScheduleRefused", queue)
        logger.warning(f"{what} was refused; the safety net wakes the queue when its head falls due",
                       extra={"queue": queue, "error": str(exc)})
        if at_ms is not None:
            try:
                self._store.clear_wake_at(queue, at_ms)  # so the next stop tries again
            except TaskQueueError:
                pass
        return "refused"

