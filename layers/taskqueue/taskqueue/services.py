"""The dependencies a handler needs (wiring), built once per Lambda execution environment from the environment.

Handlers call ``Services.from_env()`` / ``MatcherServices.from_env()`` through a cache; tests build them
themselves with fakes or moto clients. This is the one module that reads the environment for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from taskqueue.core.clock import Clock, SystemClock
from taskqueue.core.settings import Settings
from taskqueue.matching.agents import AgentStore
from taskqueue.matching.rules import MatchSettings
from taskqueue.store import TaskStore
from taskqueue.wakeups.notify import Notifier
from taskqueue.wakeups.producer import ProducerHandshake


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

    @property
    def handshake(self) -> ProducerHandshake:
        """The producers' side of the wake-up handshake, on this store and notifier."""
        return ProducerHandshake(self.store, self.notifier, self.clock)


@dataclass(frozen=True)
class MatcherServices:
    """What the Matcher and AgentEvents handlers need: the queue core's services plus the agent store."""

    base: Services
    match_settings: MatchSettings
    agents: AgentStore

    @classmethod
    def from_env(cls) -> MatcherServices:
        base = Services.from_env()
        settings = MatchSettings.from_env()
        return cls(base, settings, AgentStore.from_settings(settings, base.store, base.clock))

    @classmethod
    def of(cls, base: Services, settings: MatchSettings, client: Any) -> MatcherServices:
        """For tests and local runs: the agent store on a given DynamoDB client."""
        return cls(base, settings, AgentStore(client, settings, base.store, base.clock))
