"""The local engine fires EventBridge Scheduler one-time schedules (moto stores them, never fires them):
local/delivery/one_time_schedules.py."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local.delivery.one_time_schedules import OneTimeSchedules, at_seconds

TRIGGER = "arn:aws:lambda:us-east-1:123456789012:function:stack-Trigger"
NOW = 1_795_348_800.0  # 2026-11-22T12:00:00Z


@pytest.fixture
def scheduler() -> Any:
    with mock_aws():
        yield boto3.client("scheduler", region_name="us-east-1")


def schedule(client: Any, name: str, at: str, *, after: str = "DELETE", state: str = "ENABLED", target: str = TRIGGER) -> None:
    client.create_schedule(
        Name=name, ScheduleExpression=f"at({at})", FlexibleTimeWindow={"Mode": "OFF"}, ActionAfterCompletion=after,
        State=state, Target={"Arn": target, "RoleArn": "arn:aws:iam::123456789012:role/r", "Input": json.dumps({"wakeQueue": name})},
    )


def test_a_due_schedule_invokes_its_target_with_its_input_then_is_deleted_and_a_later_one_waits(scheduler):
    sent: list[tuple[str, Any]] = []
    clock = [NOW]
    poller = OneTimeSchedules(scheduler, lambda arn, event: sent.append((arn, event)) or True, lambda: clock[0])
    schedule(scheduler, "due", "2026-11-22T12:00:00")
    schedule(scheduler, "later", "2026-11-22T12:00:05")
    schedule(scheduler, "off", "2026-11-22T11:59:00", state="DISABLED")
    assert poller.fire_due() == 1
    assert sent == [(TRIGGER, {"wakeQueue": "due"})]
    assert poller.next_due == NOW + 5  # the change feed's poller waits for it (or a schedule written), not asking
    assert sorted(s["Name"] for s in scheduler.list_schedules()["Schedules"]) == ["later", "off"]  # DELETE after
    clock[0] = NOW + 4.9
    assert poller.fire_due() == 0  # on the engine's clock, not before its time
    clock[0] = NOW + 5
    assert poller.fire_due() == 1 and sent[-1] == (TRIGGER, {"wakeQueue": "later"})
    assert poller.next_due is None
    assert [f["name"] for f in poller.fired] == ["due", "later"]


def test_a_kept_schedule_fires_once_and_a_target_of_no_function_is_not_fired(scheduler):
    sent: list[Any] = []
    poller = OneTimeSchedules(scheduler, lambda arn, event: arn == TRIGGER and (sent.append(event) or True), lambda: NOW)
    schedule(scheduler, "kept", "2026-11-22T11:00:00", after="NONE")
    schedule(scheduler, "elsewhere", "2026-11-22T11:00:00", target="arn:aws:lambda:us-east-1:1:function:other")
    assert poller.fire_due() == 1 and poller.fire_due() == 0
    assert sent == [{"wakeQueue": "kept"}]
    assert [s["Name"] for s in scheduler.list_schedules()["Schedules"]] == ["kept"]


def test_at_expressions_are_read_in_utc():
    assert at_seconds("at(2026-11-22T12:00:00)") == NOW
    assert at_seconds("rate(1 minute)") is None and at_seconds("at(tomorrow)") is None
