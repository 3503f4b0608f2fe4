"""What a workflow's tasks cost beside plain tasks: DynamoDB write and read units per task, from creation to the
last task's end, and the dollars they make per million tasks (on demand, bench/dollars.py's prices).

Each case's tasks are created through CreateTasks' path (``create_tasks``) and run by the product's own worker loop
(``Worker.run``, RunnerCapacity 4, a runner that returns at once) until none is left, every request metered by the
cost meter (bench/cost_meter.py: DynamoDB's billing rules, checked against DynamoDB Local's own figures) on moto in
process. The cases, side by side in one run:

- ``plain``: N tasks, no edges (CreateTasks requests of 100);
- ``fan-in``: 1 parent waiting for N - 1 children (N - 1 edges);
- ``diamonds``: N / 4 diamonds a -> b, a -> c, (b, c) -> d (4 edges each).

Lambda's and the wake-ups' dollars are left out: a workflow task is claimed and run as a plain one is.

    .venv/bin/python bench/workflow_cost.py --tasks 1000 [--out bench/results-workflows-cost.md]
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "taskqueue")]

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from bench.cost_meter import CostMeter  # noqa: E402
from bench.dollars import PRICES  # noqa: E402
from taskqueue.client.create import create_tasks  # noqa: E402
from taskqueue.core.clock import SystemClock  # noqa: E402
from taskqueue.core.model import parse_create_request  # noqa: E402
from taskqueue.core.settings import Settings  # noqa: E402
from taskqueue.store import TaskStore  # noqa: E402
from taskqueue.work.worker import Worker  # noqa: E402
from tests.support import create_queue_table  # noqa: E402

QUEUE = "work"
CAPACITY = 4
OPEN = ("PENDING", "WAITING", "TAKEN")


def plain(tasks: int) -> tuple[list[dict[str, Any]], int]:
    return [{"queue": QUEUE, "count": min(100, tasks - start)} for start in range(0, tasks, 100)], 0


def fan_in(tasks: int) -> tuple[list[dict[str, Any]], int]:
    children = [{"key": f"c{i}"} for i in range(tasks - 1)]
    parent = {"key": "parent", "dependsOn": [c["key"] for c in children]}
    return [{"queue": QUEUE, "workflow": {"id": f"fan-in-{uuid.uuid4().hex[:8]}", "tasks": [*children, parent]}}], tasks - 1


def diamonds(tasks: int) -> tuple[list[dict[str, Any]], int]:
    bodies = [{"queue": QUEUE, "workflow": {"id": f"diamond-{n}-{uuid.uuid4().hex[:6]}", "tasks": [
        {"key": "a"}, {"key": "b", "dependsOn": ["a"]}, {"key": "c", "dependsOn": ["a"]},
        {"key": "d", "dependsOn": ["b", "c"]}]}} for n in range(tasks // 4)]
    return bodies, 4 * (tasks // 4)


CASES: dict[str, Callable[[int], tuple[list[dict[str, Any]], int]]] = {"plain": plain, "fan-in": fan_in, "diamonds": diamonds}


def open_tasks(admin: Any, table: str) -> int:
    count, start = 0, None
    while True:
        page = admin.scan(TableName=table, ProjectionExpression="taskStatus", **({"ExclusiveStartKey": start} if start else {}))
        count += sum(1 for item in page["Items"] if item.get("taskStatus", {}).get("S") in OPEN)
        start = page.get("LastEvaluatedKey")
        if start is None:
            return count


def measure(case: str, tasks: int) -> dict[str, Any]:
    """One case on a table of its own: units from the first CreateTasks request to the last task's end."""
    table = f"wf-cost-{case}-{uuid.uuid4().hex[:6]}"
    admin = boto3.client("dynamodb", region_name="us-east-1")
    create_queue_table(admin, table)
    settings = Settings(queue_table_name=table)
    meter = CostMeter(admin)
    clock = SystemClock()
    store = TaskStore(meter.attach(boto3.client("dynamodb", region_name="us-east-1")), settings, clock)
    bodies, edges = CASES[case](tasks)
    created = 0
    for body in bodies:
        created += len(create_tasks(parse_create_request(body, settings), store, clock.now_ms(), None).task_ids)
    runs = 0
    while open_tasks(admin, table):
        runs += 1
        if runs > 200:
            raise RuntimeError(f"{case}: tasks still open after 200 worker runs")
        Worker(store, lambda task: {"ok": True}, capacity=CAPACITY, owner=f"w{runs}", clock=clock).run(QUEUE, 5.0)
    totals = meter.snapshot()
    wcu, rcu = totals.write_units / created, totals.read_units / created
    dollars = 1e6 * (wcu * PRICES["dynamodb_write_request_unit"] + rcu * PRICES["dynamodb_read_request_unit"])
    return {"case": case, "tasks": created, "edges": edges, "worker_runs": runs, "write_units": totals.write_units,
            "read_units": totals.read_units, "wcu_per_task": wcu, "rcu_per_task": rcu, "dynamodb_dollars_per_million": dollars}


def with_edges(rows: list[dict[str, Any]]) -> None:
    """Each workflow case's write units per edge beyond the plain tasks' per task."""
    base = next(r for r in rows if r["case"] == "plain")["wcu_per_task"]
    for row in rows:
        row["extra_wcu_per_edge"] = (row["write_units"] - base * row["tasks"]) / row["edges"] if row["edges"] else None


def write(path: Path, rows: list[dict[str, Any]], tasks: int) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    lines = [
        "# Workflow tasks beside plain tasks: DynamoDB units and dollars per task (bench/workflow_cost.py)", "",
        "For whoever weighs a workflow against plain tasks. Generated by bench/workflow_cost.py on "
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, commit `{commit}`, on moto in process, cost meter "
        "(DynamoDB's billing rules). Command:", "",
        f"    .venv/bin/python bench/workflow_cost.py --tasks {tasks} --out {path.relative_to(ROOT)}", "",
        "Each case from its first CreateTasks request to its last task's end, run by the product's worker loop "
        "(RunnerCapacity 4, a runner that returns at once). DynamoDB only, on demand "
        f"(${PRICES['dynamodb_write_request_unit'] * 1e6:.3f} a million write units, "
        f"${PRICES['dynamodb_read_request_unit'] * 1e6:.3f} read units); Lambda and wake-ups as for plain tasks.", "",
        "| case | tasks | edges | write units / task | read units / task | extra write units / edge | DynamoDB $ / million tasks |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        edge = "—" if r["extra_wcu_per_edge"] is None else f"{r['extra_wcu_per_edge']:.2f}"
        lines.append(f"| {r['case']} | {r['tasks']} | {r['edges']} | {r['wcu_per_task']:.2f} | {r['rcu_per_task']:.2f} | "
                     f"{edge} | {r['dynamodb_dollars_per_million']:.2f} |")
    path.write_text("\n".join(lines) + "\n")


def bench(tasks: int) -> list[dict[str, Any]]:
    """``make bench``'s part: every case, side by side, on moto in process."""
    with mock_aws():
        rows = [measure(case, tasks) for case in CASES]
    with_edges(rows)
    return rows


def section(table: Any, rows: list[dict[str, Any]]) -> None:
    """``make bench``'s rows (bench/report.py's Table): each workflow case beside the plain tasks of the same run."""
    base = next(r for r in rows if r["case"] == "plain")
    same_run = f"plain tasks, same run ({base['tasks']} tasks)"
    table.section("Workflow tasks beside plain tasks: DynamoDB per task, creation to end (bench/workflow_cost.py, cost "
                  "meter, moto in process, a runner that returns at once)")
    for row in rows:
        if row["case"] == "plain":
            continue
        what = f"{row['case']} ({row['tasks']} tasks, {row['edges']} edges)"
        table.add(f"write units per task, {what}", row["wcu_per_task"], base["wcu_per_task"], same_run)
        table.add(f"read units per task, {what}", row["rcu_per_task"], base["rcu_per_task"], same_run)
        table.add(f"extra write units per edge, {what}", row["extra_wcu_per_edge"], float("nan"), "—")
        table.add(f"DynamoDB $ per million tasks, {what}", row["dynamodb_dollars_per_million"],
                  base["dynamodb_dollars_per_million"], same_run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000, help="tasks per case (a multiple of 4)")
    parser.add_argument("--out", help="write the results here (markdown)")
    args = parser.parse_args(argv)
    rows = bench(args.tasks)
    for row in rows:
        print(row)
    if args.out:
        write(Path(args.out).resolve(), rows, args.tasks)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
