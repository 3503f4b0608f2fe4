"""The dependencies a handler needs, built once per Lambda execution environment from the environment.

Handlers call ``Services.from_env()`` through a cache; tests build ``Services`` themselves with fakes or
moto clients.
"""

from __future__ import annotations

from dataclasses import dataclass

from taskqueue.clock import Clock, SystemClock
from taskqueue.notify import Notifier
from taskqueue.settings import Settings
from taskqueue.store import TaskStore


@dataclass(frozen=True)
class Services:
    settings: Settings
    store: TaskStore
    notifier: Notifier
    clock: Clock

    @classmethod
    def from_env(cls) -> Services:
        settings = Settings.from_env()
        clock = SystemClock()
        return cls(settings, TaskStore.from_settings(settings, clock), Notifier.from_settings(settings), clock)
