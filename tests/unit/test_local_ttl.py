"""The TTL sweeper's pace (local/delivery/ttl.py): a sweep of a big table is followed by a pause proportional to it, so
sweeping never holds the one-request-at-a-time emulator more than 1 / (1 + pace) of the time; a small table is
swept every interval as before."""

from __future__ import annotations

from typing import Any

from local.delivery.ttl import TtlRegistry, TtlSweeper, pause_after


def test_a_sweep_longer_than_the_interval_is_followed_by_pace_times_its_length() -> None:
    assert pause_after(0.01, interval=1.0, pace=4.0) == 1.0
    assert pause_after(0.5, interval=1.0, pace=4.0) == 2.0
    assert pause_after(3.0, interval=1.0, pace=4.0) == 12.0


class SlowScan:
    """A DynamoDB client whose Scan takes ``seconds`` of the fake clock and finds nothing expired."""

    def __init__(self, clock: list[float], seconds: float) -> None:
        self.clock, self.seconds = clock, seconds

    def scan(self, **_: Any) -> dict[str, Any]:
        self.clock[0] += self.seconds
        return {"Items": []}


class Pauses:
    """The sweeper's stop event: records each pause and stops it after ``sweeps`` of them."""

    def __init__(self, sweeps: int) -> None:
        self.sweeps, self.pauses = sweeps, []

    def wait(self, timeout: float) -> bool:
        self.pauses.append(timeout)
        return len(self.pauses) > self.sweeps

    def is_set(self) -> bool:
        return len(self.pauses) > self.sweeps


def test_the_sweeper_paces_itself_by_what_its_sweeps_take() -> None:
    now = [0.0]
    sweeper = TtlSweeper(SlowScan(now, 0.75), "t", ["taskId"], "ttl", TtlRegistry(), interval=1.0, pace=4.0,
                         clock=lambda: now[0])
    sweeper._stop = Pauses(sweeps=3)  # type: ignore[assignment]
    sweeper._loop()
    assert sweeper._stop.pauses == [1.0, 3.0, 3.0, 3.0]  # type: ignore[attr-defined]
    assert sweeper.sweeps == 3 and sweeper.last_sweep_seconds == 0.75


def test_a_quick_sweep_keeps_the_interval() -> None:
    now = [0.0]
    sweeper = TtlSweeper(SlowScan(now, 0.01), "t", ["taskId"], "ttl", TtlRegistry(), interval=1.0,
                         clock=lambda: now[0])
    sweeper._stop = Pauses(sweeps=2)  # type: ignore[assignment]
    sweeper._loop()
    assert sweeper._stop.pauses == [1.0, 1.0, 1.0]  # type: ignore[attr-defined]
