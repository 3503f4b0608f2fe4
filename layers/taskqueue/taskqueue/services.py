"""The dependencies a handler needs (wiring), built once per Lambda execution environment from the environment.

Handlers call ``Services.from_env()`` / ``MatcherServices.from_env()`` through a cache; tests build them
themselves with fakes or moto clients. This is the one module that reads the environment for them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from taskqueue.core.clock import Clock, SystemClock
from taskqueue.core.errors import InvalidField
from taskqueue.core.model import CreateRequest
from taskqueue.core.settings import Settings
from taskqueue.matching.agents import AgentStore
from taskqueue.matching.rules import DEFAULT_ATTRIBUTES, MatchSettings, attributes_from_env, check_call_payload
from taskqueue.store import TaskStore
from taskqueue.wakeups.delayed_wakeup import DelayedWakeups
from taskqueue.wakeups.notify import Notifier
from taskqueue.work.lease_marks import MarkChoice


@dataclass(frozen=True)
class Services:
    settings: Settings
    store: TaskStore
    notifier: Notifier | None  # the wake-up topic (a worker's tail call, Trigger's wake-ups); None for a producer
    clock: Clock
    # The matching queue and its attributes (MATCH_QUEUE, MATCH_ATTRIBUTES): a call is checked at creation.
    call_queue: str = "calls"
    call_attributes: tuple[str, ...] = DEFAULT_ATTRIBUTES
    # The scheduled wake-up at a queue's delayed head (WAKE_SCHEDULE_*, WAKE_TARGET_ARN); None: not configured.
    wakeups: DelayedWakeups | None = None
    # How this execution environment's tasks ended lately (its workers' lease marks, taskqueue.work.lease_marks).
    marks: MarkChoice = field(default_factory=MarkChoice)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Services:
        env = os.environ if env is None else env
        settings = Settings.from_env(env)
        clock = SystemClock()
        store = TaskStore.from_settings(settings, clock)
        return cls(settings, store, Notifier.from_settings(settings), clock, *calls_of(env),
                   wakeups=DelayedWakeups.from_env(store, clock, env=env))

    def check_request(self, request: CreateRequest) -> None:
        """What creation checks beyond the request's own rules: a call's preferences must be able to match an
        agent (``InvalidField`` on ``payload.preferences``), so none waits PENDING for nothing until its TTL."""
        if request.queue == self.call_queue:
            if request.group is not None:
                raise InvalidField(
                    f"queue {request.queue!r} is the matching queue: each call gets the longest-waiting matching agent, "
                    "in the order callers arrived, so calls take no group (docs/fairness.md); leave 'group' out",
                    "group",
                )
            check_call_payload(request.payload, self.call_attributes)


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


def calls_of(env: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """The matching queue's name and attributes as the environment (or a stack's parameters) gives them."""
    return env.get("MATCH_QUEUE", "calls") or "calls", attributes_from_env(env)
