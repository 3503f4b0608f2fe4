"""A fake of boto3's EventBridge Scheduler client for what ``taskqueue.wakeups.delayed_wakeup`` sends:
``create_schedule``, ``update_schedule``, ``get_schedule``, ``delete_schedule``, with Scheduler's answers
(ConflictException for a name taken, ResourceNotFoundException for one missing).

Each request is a kernel yield point (``sim.faults.FakeService``: throttling, lost answers, slowness). The harness
fires schedules: ``due(now_ms)`` returns the one-time ``at(...)`` schedules whose time has come (and deletes those
whose ``ActionAfterCompletion`` is DELETE, as Scheduler does after it invoked the target); ``input_of`` reads the
target's Input.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sim.faults import FakeService, FaultHook, aws_error, unknown_parameters
from sim.kernel import Kernel

_FIELDS = frozenset({"Name", "GroupName", "ScheduleExpression", "ScheduleExpressionTimezone", "FlexibleTimeWindow",
                     "ActionAfterCompletion", "State", "Target", "Description", "StartDate", "EndDate", "KmsKeyArn",
                     "ClientToken"})
_REQUIRED = ("Name", "ScheduleExpression", "FlexibleTimeWindow", "Target")
ACCOUNT_ARN = "arn:aws:scheduler:us-east-1:123456789012"


@dataclass
class Schedule:
    name: str
    group: str
    fields: dict[str, Any]
    created_ms: int
    modified_ms: int

    @property
    def at_ms(self) -> int | None:
        """When a one-time ``at(yyyy-mm-ddThh:mm:ss)`` schedule (UTC) fires; None for any other expression."""
        text = str(self.fields.get("ScheduleExpression", "")).strip()
        if not (text.startswith("at(") and text.endswith(")")):
            return None
        when = dt.datetime.strptime(text[3:-1], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.UTC)
        return int(when.timestamp() * 1000)

    def description(self) -> dict[str, Any]:
        return {**{k: v for k, v in self.fields.items() if k != "ClientToken"}, "Name": self.name,
                "GroupName": self.group, "Arn": f"{ACCOUNT_ARN}:schedule/{self.group}/{self.name}",
                "CreationDate": dt.datetime.fromtimestamp(self.created_ms / 1000, dt.UTC),
                "LastModificationDate": dt.datetime.fromtimestamp(self.modified_ms / 1000, dt.UTC)}


class FakeScheduler(FakeService):
    service = "scheduler"

    def __init__(self, kernel: Kernel | None = None, *, faults: FaultHook | None = None, rng: Any = None) -> None:
        super().__init__(kernel, faults=faults, rng=rng)
        self.schedules: dict[tuple[str, str], Schedule] = {}
        self.fired: list[tuple[int, Schedule]] = []

    def _now_ms(self) -> int:
        return self.kernel.clock.now_ms() if self.kernel is not None else 0

    def create_schedule(self, **params: Any) -> dict[str, Any]:
        unknown_parameters("CreateSchedule", params, _FIELDS, _REQUIRED)

        def run(fault: Any) -> dict[str, Any]:
            key = (params.get("GroupName") or "default", params["Name"])
            if key in self.schedules:
                raise aws_error("ConflictException", f"Schedule {key[1]} already exists.", "CreateSchedule", status=409)
            self._check(params, "CreateSchedule")
            now = self._now_ms()
            self.schedules[key] = Schedule(key[1], key[0], _fields(params), now, now)
            return {"ScheduleArn": f"{ACCOUNT_ARN}:schedule/{key[0]}/{key[1]}"}

        return self.serve("CreateSchedule", params, run)

    def update_schedule(self, **params: Any) -> dict[str, Any]:
        unknown_parameters("UpdateSchedule", params, _FIELDS, _REQUIRED)

        def run(fault: Any) -> dict[str, Any]:
            key = (params.get("GroupName") or "default", params["Name"])
            found = self.schedules.get(key)
            if found is None:
                raise aws_error("ResourceNotFoundException", f"Schedule {key[1]} does not exist.", "UpdateSchedule",
                                status=404)
            self._check(params, "UpdateSchedule")
            found.fields = _fields(params)  # an update replaces every field, as Scheduler's does
            found.modified_ms = self._now_ms()
            return {"ScheduleArn": f"{ACCOUNT_ARN}:schedule/{key[0]}/{key[1]}"}

        return self.serve("UpdateSchedule", params, run)

    def get_schedule(self, **params: Any) -> dict[str, Any]:
        unknown_parameters("GetSchedule", params, frozenset({"Name", "GroupName"}), ("Name",))

        def run(fault: Any) -> dict[str, Any]:
            found = self.schedules.get((params.get("GroupName") or "default", params["Name"]))
            if found is None:
                raise aws_error("ResourceNotFoundException", f"Schedule {params['Name']} does not exist.",
                                "GetSchedule", status=404)
            return found.description()

        return self.serve("GetSchedule", params, run)

    def delete_schedule(self, **params: Any) -> dict[str, Any]:
        unknown_parameters("DeleteSchedule", params, frozenset({"Name", "GroupName", "ClientToken"}), ("Name",))

        def run(fault: Any) -> dict[str, Any]:
            if self.schedules.pop((params.get("GroupName") or "default", params["Name"]), None) is None:
                raise aws_error("ResourceNotFoundException", f"Schedule {params['Name']} does not exist.",
                                "DeleteSchedule", status=404)
            return {}

        return self.serve("DeleteSchedule", params, run)

    @staticmethod
    def _check(params: Mapping[str, Any], operation: str) -> None:
        name = str(params["Name"])
        if not 1 <= len(name) <= 64 or any(not (c.isalnum() or c in "-_.") for c in name):
            raise aws_error("ValidationException", f"1 validation error detected: Value '{name}' at 'name' failed to "
                            "satisfy constraint: Member must satisfy regular expression pattern: [0-9a-zA-Z-_.]+, "
                            "Member must have length less than or equal to 64", operation)
        target = params.get("Target") or {}
        if not target.get("Arn") or not target.get("RoleArn"):
            raise aws_error("ValidationException", "Target Arn and RoleArn are required", operation)

    def due(self, now_ms: int | None = None) -> list[Schedule]:
        """The enabled one-time schedules whose time has come (by ``now_ms``, default the virtual now), oldest first;
        those with ActionAfterCompletion DELETE are deleted, as after Scheduler invoked their target."""
        now = self._now_ms() if now_ms is None else now_ms
        ready = sorted((s for s in self.schedules.values()
                        if s.fields.get("State", "ENABLED") == "ENABLED" and s.at_ms is not None and s.at_ms <= now),
                       key=lambda s: (s.at_ms, s.group, s.name))
        for schedule in ready:
            self.fired.append((now, schedule))
            if schedule.fields.get("ActionAfterCompletion") == "DELETE":
                del self.schedules[(schedule.group, schedule.name)]
            else:
                schedule.fields["State"] = "DISABLED"
        return ready

    def next_at_ms(self) -> int | None:
        """When the next enabled one-time schedule fires (None: none is set)."""
        times = [s.at_ms for s in self.schedules.values()
                 if s.at_ms is not None and s.fields.get("State", "ENABLED") == "ENABLED"]
        return min(times) if times else None


def input_of(schedule: Schedule) -> Any:
    """The JSON Input the schedule hands its target (the event the harness invokes the target with)."""
    return json.loads(schedule.fields["Target"].get("Input") or "{}")


def _fields(params: Mapping[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps({k: v for k, v in params.items() if k not in ("Name", "GroupName")}, default=str))
