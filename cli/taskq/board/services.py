"""What the board works with, built once from taskq's own connection (``taskq.connection.Target``): the queue
table's store, the agent table's store, FailedEventsQueue and the metrics. Nothing here talks to AWS itself:
every read and action goes through the same adapters and functions as the ``taskq`` commands."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskq.board.background import BackgroundValue
from taskq.board.counting import CountKeeper, ReadMeter
from taskq.board.metrics import CachedMetrics, CloudWatchMetrics, EmfLogMetrics, MetricsSource
from taskq.connection import Target
from taskq.failed_events import FailedEventsTarget
from taskqueue.core.errors import ConfigError
from taskqueue.matching import rules as matching
from taskqueue.matching.agents import AgentStore

# The agent table is scanned (the matching page) in the background, at most this often.
AGENTS_EVERY_S = 30.0
# The groups page's view of a queue (taskqueue.store.group_views: about a read unit per group and shard) is read in
# the background, at most this often, once a page has asked for it.
GROUPS_EVERY_S = 15.0
# The queue metrics' figures (taskqueue.store.gauges: what the safety net publishes each minute; about 1.5 read units
# per queue idle, at most ~18 per partition past its cap) are read in the background, at most this often.
GAUGES_EVERY_S = 15.0

# The local stack writes every function's output here, beside its stack file (local/engine/stack.py FUNCTION_LOG; a test
# checks the two names agree).
LOCAL_FUNCTION_LOG = "local-stack.functions.log"


@dataclass
class Board:
    """The board's connections. ``agents`` is None without an agent table, ``failed_events`` None without
    FailedEventsQueue: their pages then say what to pass."""

    target: Target
    read_only: bool
    metrics: MetricsSource
    agents: AgentStore | None
    failed_events: FailedEventsTarget | None
    where: str  # the stack, for the page's title
    counts: CountKeeper = field(default=None)  # type: ignore[assignment] - made in __post_init__ when not given
    meter: ReadMeter = field(default_factory=ReadMeter)
    agents_seen: BackgroundValue[Any] | None = None
    groups_every_s: float = GROUPS_EVERY_S
    groups_background: bool = True
    groups_seen: dict[str, BackgroundValue[Any]] = field(default_factory=dict)
    gauges_every_s: float = GAUGES_EVERY_S
    gauges_background: bool = True
    gauges_seen: dict[str, BackgroundValue[Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Every DynamoDB read of the board is metered; the counts and the agent table's scan are shared by every
        tab and request (counting.py)."""
        self.meter.attach(getattr(self.target.store, "_db", None))
        if self.agents is not None:
            self.meter.attach(getattr(self.agents, "_db", None))
            if self.agents_seen is None:
                self.agents_seen = BackgroundValue(self.agents.agents, AGENTS_EVERY_S, "agents")
        if self.counts is None:
            self.counts = CountKeeper(self.target.store, self.target.clock.now_ms)

    def groups_of(self, queue: str) -> BackgroundValue[Any]:
        """The queue's groups view (``TaskStore.group_views``), read in the background and shared by every tab."""
        if queue not in self.groups_seen:
            self.groups_seen[queue] = BackgroundValue(lambda: self.store.group_views(queue), self.groups_every_s,
                                                      f"groups-{queue}", background=self.groups_background)
        return self.groups_seen[queue]

    def gauges_of(self, queue: str) -> BackgroundValue[Any]:
        """The queue's metric figures (``TaskStore.queue_gauges``, as the safety net reads them), in the background."""
        if queue not in self.gauges_seen:
            self.gauges_seen[queue] = BackgroundValue(lambda: self.store.queue_gauges(queue), self.gauges_every_s,
                                                      f"gauges-{queue}", background=self.gauges_background)
        return self.gauges_seen[queue]

    @property
    def store(self):  # noqa: ANN201 - TaskStore; property kept untyped to avoid importing the store only for it
        return self.target.store

    @property
    def queues(self) -> list[str]:
        return sorted(self.target.settings.queue_orders)


def build(t: Target, *, read_only: bool, agent_table_name: str | None = None,
          failed_events_url: str | None = None, function_log: Path | None = None) -> Board:
    """The board of a connected ``taskq`` target (the flags as ``taskq agents`` and ``taskq failed-events`` read them)."""
    stack = t.connection.stack
    where = f"{stack.name} ({'local stack' if stack.local else 'AWS'})" if stack else t.settings.queue_table_name
    return Board(
        target=t,
        read_only=read_only,
        metrics=metrics_source(t, function_log),
        agents=agent_store(t, agent_table_name),
        failed_events=failed_events_target(t, failed_events_url),
        where=where,
    )


def metrics_source(t: Target, function_log: Path | None = None) -> MetricsSource:
    """CloudWatch on AWS; the local stack's function log locally (its EMF lines are what CloudWatch would get)."""
    stack = t.connection.stack
    if function_log is None and stack is not None and stack.local and stack.source:
        function_log = Path(stack.source).parent / LOCAL_FUNCTION_LOG
    if function_log is not None:
        return EmfLogMetrics(function_log)
    return CachedMetrics(CloudWatchMetrics(t.client("cloudwatch")))


def agent_store(t: Target, agent_table_name: str | None) -> AgentStore | None:
    env = dict(t.env)
    if agent_table_name:
        env["AGENT_TABLE_NAME"] = agent_table_name
    if not env.get("AGENT_TABLE_NAME", "").strip():
        return None
    try:
        settings = matching.MatchSettings.from_env(env)
    except ConfigError:
        return None
    return AgentStore(t.client("dynamodb"), settings, t.store, t.clock)


def failed_events_target(t: Target, queue_url: str | None) -> FailedEventsTarget | None:
    """FailedEventsQueue as ``taskq failed-events`` finds it: the flag, the stack's output, or the environment."""
    stack = t.connection.stack
    outputs = stack.outputs if stack is not None else {}
    url = queue_url or outputs.get("FailedEventsQueueUrl") or os.environ.get("FAILED_EVENTS_QUEUE_URL", "").strip()
    if not url:
        return None
    conn = t.connection
    return FailedEventsTarget(conn.session, conn.endpoint_url, url, outputs.get("CreateTasksFunctionName"))
