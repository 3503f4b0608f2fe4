"""What the queue metrics cost a month, per queue and per group, at rest and at 100 tasks/s: the figures of
docs/operations.md ("Queue metrics"), measured.

Run it inside ``scripts/with-dynamodb-local`` (DynamoDB Local reports each query's read units; moto's
ConsumedCapacity is wrong, so without DynamoDB Local it refuses to run)::

    scripts/with-dynamodb-local .venv/bin/python bench/queue_metrics_cost.py

Each scenario seeds a fresh queue table (one shard), then makes one safety-net run's reads
(``TaskStore.queue_gauges``) with ``ReturnConsumedCapacity`` and writes that run's EMF blobs as the safety net does:

- at rest: no task;
- 100 tasks/s, workers keeping up: 25 waiting, 100 running (a task waits ~0.25 s and runs ~1 s);
- 100 tasks/s, a backlog: 3,000 waiting, 100 running (past the 1,000-entry cap: the reads' most per partition);
- the same two with ``--groups`` groups, one of them noisy (half the tasks): the per-group figures are the
  difference from the queue without groups, divided by the groups.

Dollars a month (730 hours, a run each minute: 43,800 runs), at bench/dollars.py's list prices: read units at the
on-demand price; EMF bytes (+26 bytes an event) at the log ingestion price; each metric (name and dimensions)
published in every hour at the custom-metric fee; the alarm's two metrics at the alarm fee. Prints a Markdown table,
then one JSON object on its last line.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.dollars import MONTHLY_FEES, PRICES, USAGE_PRICES  # noqa: E402
from taskqueue.core.clock import SystemClock  # noqa: E402
from taskqueue.core.model import new_tasks, parse_create_request  # noqa: E402
from taskqueue.core.queue_gauges import groups_to_publish, records  # noqa: E402
from taskqueue.core.settings import Settings  # noqa: E402
from taskqueue.observe import queue_metrics  # noqa: E402
from taskqueue.store import FairTurn, TaskStore  # noqa: E402
from tests.support import create_queue_table  # noqa: E402

RUNS_A_MONTH = 730 * 60
EMF_EVENT_OVERHEAD = 26  # bytes CloudWatch Logs bills per event beyond its message
ALARM_METRICS = 2  # OldestTaskAgeAlarm: OldestTaskAge of "work" and of "calls"
QUEUE = "work"


# The stack's names (template.yaml's Globals), which size each EMF blob; bench.common turns metrics off.
STACK_ENVIRONMENT = {"POWERTOOLS_METRICS_DISABLED": "false", "POWERTOOLS_SERVICE_NAME": "taskqueue",
                     "POWERTOOLS_METRICS_NAMESPACE": "TaskQueues"}
# DynamoDB bills an eventually consistent query at least half a read unit (DynamoDB Local reports 0 for an empty one).
MIN_QUERY_UNITS = 0.5


class ReadUnits:
    """Sums the read units DynamoDB reports for every query of one client, each at least DynamoDB's minimum."""

    def __init__(self, client: Any) -> None:
        self.units = 0.0
        self.queries = 0
        client.meta.events.register("provide-client-params.dynamodb.Query", self._ask)
        client.meta.events.register("after-call.dynamodb.Query", self._count)

    @staticmethod
    def _ask(params: dict[str, Any], **_: Any) -> None:
        params["ReturnConsumedCapacity"] = "TOTAL"

    def _count(self, parsed: dict[str, Any], **_: Any) -> None:
        consumed = parsed.get("ConsumedCapacity")
        if consumed is None:
            raise RuntimeError("the engine reported no ConsumedCapacity: run inside scripts/with-dynamodb-local")
        self.units += max(MIN_QUERY_UNITS, float(consumed["CapacityUnits"]))
        self.queries += 1


@dataclass(frozen=True)
class Run:
    """One safety-net run's reads and what it publishes, for one queue."""

    read_units: float
    queries: int
    emf_bytes: int
    events: int
    metrics: int

    def dollars(self) -> dict[str, float]:
        return {
            "reads": self.read_units * RUNS_A_MONTH * PRICES["dynamodb_read_request_unit"],
            "logs": (self.emf_bytes + EMF_EVENT_OVERHEAD * self.events) * RUNS_A_MONTH / 1e9
            * USAGE_PRICES["cloudwatch_logs_ingestion_gb"],
            "metrics": self.metrics * MONTHLY_FEES["cloudwatch_custom_metric"],
        }


def seed(store: TaskStore, now_ms: int, count: int, group: str | None = None) -> None:
    fields: dict[str, Any] = {"group": group} if group else {}
    for made in range(0, count, 1000):  # a request creates at most 1,000
        request = {"queue": QUEUE, "count": min(1000, count - made), **fields}
        tasks = new_tasks(parse_create_request(request, store.settings), now_ms - 60_000, store.settings)
        for start in range(0, len(tasks), 25):
            store.put_tasks(tasks[start:start + 25])


def claim(store: TaskStore, running: int) -> None:
    """``running`` tasks TAKEN, in the order a worker claims them (fair share's turn across groups)."""
    claimed = 0
    while claimed < running:
        batch = store.candidates(QUEUE, min(100, running - claimed), fair=FairTurn())
        if not batch:
            raise RuntimeError(f"only {claimed} of {running} tasks could be claimed")
        claimed += sum(1 for candidate in batch if store.claim(candidate, "bench") is not None)


def one_run(endpoint: str, waiting: int, running: int, groups: int) -> Run:
    """A fresh table seeded with ``waiting + running`` tasks (spread over ``groups`` groups, the first noisy with half
    of them), ``running`` of them claimed, then one run's reads and EMF."""
    from bench.common import client_for

    client, admin = client_for(endpoint), client_for(endpoint)
    table = f"gauges-{uuid.uuid4().hex[:8]}"
    create_queue_table(admin, table)
    try:
        store = TaskStore(client, Settings(queue_table_name=table), SystemClock())
        now_ms = SystemClock().now_ms()
        total = waiting + running
        if groups:
            seed(store, now_ms, total // 2, "noisy-0")
            for n in range(1, groups):
                seed(store, now_ms, total // 2 // (groups - 1), f"quiet-{n}")
        else:
            seed(store, now_ms, total)
        claim(store, running)
        units = ReadUnits(client)
        gauges = store.queue_gauges(QUEUE)
        published = records(gauges, groups_to_publish(gauges.noisy(), set(), store.settings.noisy_group_metrics))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            for record in published:
                queue_metrics.emf(record)
        blobs = [line for line in out.getvalue().splitlines() if line.strip()]
        metrics = sum(len(record.values) for record in published)
        return Run(units.units, units.queries, sum(len(line.encode()) for line in blobs), len(blobs), metrics)
    finally:
        admin.delete_table(TableName=table)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=10, help="groups of the scenarios with groups (default 10)")
    args = parser.parse_args(argv)
    from bench import common  # sets the benchmarks' environment on import: not at this module's import (its tests)

    common.quiet()
    os.environ.update(STACK_ENVIRONMENT)
    endpoint = os.environ.get("DYNAMODB_LOCAL_ENDPOINT", "").strip()
    if not endpoint:
        raise SystemExit("DYNAMODB_LOCAL_ENDPOINT is not set: run inside scripts/with-dynamodb-local")
    scenarios = {
        "at rest": (0, 0),
        "100 tasks/s, keeping up": (25, 100),
        "100 tasks/s, backlog": (3000, 100),
    }
    rows: dict[str, Any] = {}
    for name, (waiting, running) in scenarios.items():
        plain = one_run(endpoint, waiting, running, 0)
        row: dict[str, Any] = {"waiting": waiting, "running": running, "queue": plain.__dict__,
                               "queue_dollars": plain.dollars()}
        if waiting or running:
            grouped = one_run(endpoint, waiting, running, args.groups)
            row["with_groups"] = grouped.__dict__
            row["per_group_read_units"] = (grouped.read_units - plain.read_units) / args.groups
            row["per_group_read_dollars"] = row["per_group_read_units"] * RUNS_A_MONTH * PRICES[
                "dynamodb_read_request_unit"]
            row["with_groups_dollars"] = grouped.dollars()
        rows[name] = row
    alarm = ALARM_METRICS * MONTHLY_FEES["cloudwatch_alarm_metric"]
    print(f"| Per month, one queue, one shard ({args.groups} groups where grouped) | reads | EMF logs | "
          "metrics | per group (reads) |")
    print("|---|---:|---:|---:|---:|")
    for name, row in rows.items():
        dollars = row["queue_dollars"]
        # At rest nothing is published: an idle queue costs no metric-hour and writes no EMF.
        published = bool(row["waiting"] or row["running"])
        print(f"| {name} ({row['queue']['read_units']:.1f} read units, {row['queue']['queries']} queries a run) | ${dollars['reads']:.3f} | "
              f"${dollars['logs'] if published else 0:.3f} | ${dollars['metrics'] if published else 0:.2f} | "
              + (f"{row['per_group_read_units']:.2f} units: ${row['per_group_read_dollars']:.3f}" if published
                 else "-") + " |")
        if "with_groups" in row:
            grouped = row["with_groups_dollars"]
            print(f"| {name}, with groups ({row['with_groups']['read_units']:.1f} units, {row['with_groups']['queries']} queries, "
                  f"{row['with_groups']['metrics']} metrics) | ${grouped['reads']:.3f} | ${grouped['logs']:.3f} | "
                  f"${grouped['metrics']:.2f} | |")
    print(f"| the alarm (OldestTaskAgeAlarm, {ALARM_METRICS} metrics), whatever the load | | | ${alarm:.2f} | |")
    print(json.dumps({"runs_a_month": RUNS_A_MONTH, "alarm_dollars": alarm, "scenarios": rows}))


if __name__ == "__main__":
    main()
