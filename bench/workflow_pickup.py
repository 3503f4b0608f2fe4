"""Workflows in real seconds on the local stack (what `make up` runs): how long after its last dependency ended a
dependent becomes ready (WAITING -> PENDING) and is claimed, and that none runs before its dependencies ended.

Starts `python -m local up` (the template's defaults, real time, the table's stream starting ProcessTasks) on a free
port with its own discovery file, the CreateTasks schedule off and the runner ``workflow_bench_runner:run``
(runner/workflow_bench_runner.py: it sleeps 10 ms and returns what it saw of its dependencies). Then, one workflow at
a time, each created through CreateTasks' Lambda Invoke API as a user's system would:

- ``fan-in``: 1 parent that waits for 1,000 children (``--children``), ``--fan-ins`` times;
- ``diamond``: a -> b, a -> c, (b, c) -> d, ``--diamonds`` times (b and c each wait for a; d for the last of b, c).

For each dependent, from the items as the stack left them (strongly consistent reads after the workflow ended):
``ready`` = its ``enqueued`` (written by the write that made it PENDING) - the latest ``taskUpdated`` of its
dependencies (their terminal writes); ``claimed`` = its ``claimedAt`` - the same. Early: a dependent claimed before
that time, or whose runner saw a dependency not ended. Prints one JSON line per workflow and a summary; with
``--out`` writes the results file.

    .venv/bin/python bench/workflow_pickup.py --fan-ins 3 --diamonds 30 --out bench/results-workflows.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "taskqueue")]

from bench.common import percentile  # noqa: E402
from bench.local_stack import LocalStack  # noqa: E402

OVERRIDES = ["CreateTasksScheduleState=DISABLED", "TaskRunner=workflow_bench_runner:run"]
POLL_SECONDS = 0.2


class Stack(LocalStack):
    def __init__(self, overrides: list[str]) -> None:
        super().__init__(overrides, prefix="workflows-")

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.invoke("CreateTasksFunctionName", body)

    def items(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(ids), 100):
            request = {self.table: {"Keys": [{"taskId": {"S": i}} for i in ids[start:start + 100]], "ConsistentRead": True}}
            while request:
                answer = self.ddb.batch_get_item(RequestItems=request)
                for item in answer["Responses"].get(self.table, []):
                    found[item["taskId"]["S"]] = item
                request = answer.get("UnprocessedKeys") or {}
        return found

    def wait_ended(self, task_id: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            item = self.ddb.get_item(TableName=self.table, Key={"taskId": {"S": task_id}}, ConsistentRead=True).get("Item", {})
            status = item.get("taskStatus", {}).get("S")
            if status in ("SUCCESS", "FAILURE", "CANCELLED", "SHED"):
                return status
            time.sleep(POLL_SECONDS)
        raise RuntimeError(f"task {task_id} did not end within {timeout:.0f} s")


def number(item: dict[str, Any], name: str) -> int:
    return int(item[name]["N"])


def measure(stack: Stack, workflow: dict[str, Any], sink: str, timeout: float) -> dict[str, Any]:
    """Create ``workflow``, wait for ``sink`` (its last task) to end, and time each dependent from its dependencies'
    ends."""
    started = time.monotonic()
    answer = stack.create({"queue": "work", "workflow": workflow})
    workflow_id = workflow["id"]
    status = stack.wait_ended(f"{workflow_id}/{sink}", timeout)
    took = time.monotonic() - started
    items = stack.items(answer["taskIds"])
    samples: list[dict[str, Any]] = []
    for task in workflow["tasks"]:
        if not task.get("dependsOn"):
            continue
        task_id = f"{workflow_id}/{task['key']}"
        item = items[task_id]
        last_end = max(number(items[f"{workflow_id}/{d}"], "taskUpdated") for d in task["dependsOn"])
        result = json.loads(item.get("result", {}).get("S", "{}"))
        ready_s = (number(item, "enqueued") - last_end) / 1000
        claimed_s = (number(item, "claimedAt") - last_end) / 1000
        samples.append({"key": task["key"], "ready_s": ready_s, "claimed_s": claimed_s,
                        "early": claimed_s < 0 or bool(result.get("early")) or item["taskStatus"]["S"] != "SUCCESS"})
    return {"workflow": workflow_id, "tasks": len(workflow["tasks"]), "sink": status, "seconds": round(took, 1),
            "samples": samples}


def fan_in(children: int) -> dict[str, Any]:
    tasks: list[dict[str, Any]] = [{"key": f"c{i:04d}"} for i in range(children)]
    tasks.append({"key": "parent", "dependsOn": [t["key"] for t in tasks]})
    return {"id": f"fan-in-{uuid.uuid4().hex[:8]}", "tasks": tasks}


def diamond() -> dict[str, Any]:
    return {"id": f"diamond-{uuid.uuid4().hex[:8]}", "tasks": [
        {"key": "a"}, {"key": "b", "dependsOn": ["a"]}, {"key": "c", "dependsOn": ["a"]},
        {"key": "d", "dependsOn": ["b", "c"]}]}


def summary(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    samples = [s for run in runs for s in run["samples"]]
    ready = sorted(s["ready_s"] for s in samples)
    claimed = sorted(s["claimed_s"] for s in samples)
    return {
        "case": name, "workflows": len(runs), "dependents": len(samples),
        "ready_p50_s": round(percentile(ready, 50), 3), "ready_p95_s": round(percentile(ready, 95), 3),
        "ready_max_s": round(max(ready), 3),
        "claimed_p50_s": round(percentile(claimed, 50), 3), "claimed_p95_s": round(percentile(claimed, 95), 3),
        "claimed_max_s": round(max(claimed), 3),
        "early": sum(s["early"] for s in samples), "workflow_seconds": [run["seconds"] for run in runs],
    }


def write_results(path: Path, rows: list[dict[str, Any]], args: argparse.Namespace, commit: str) -> None:
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Workflows: a dependent's pickup after its last dependency ends (real time, local stack)",
        "",
        "For whoever wants to know how soon a workflow's dependent runs once its dependencies ended. Measured by",
        f"`bench/workflow_pickup.py` on {when}, commit `{commit}`, on the local stack as `make up` starts it (the",
        "template's defaults; the table's stream starts ProcessTasks) with the runner `workflow_bench_runner:run` (10 ms a",
        "task), on this 2-core machine shared with other work. Command:",
        "",
        f"    .venv/bin/python bench/workflow_pickup.py --fan-ins {args.fan_ins} --children {args.children} "
        f"--diamonds {args.diamonds} --out {args.out}",
        "",
        "*ready*: the dependent's write WAITING -> PENDING (its `enqueued`) after the latest terminal write of its",
        "dependencies (their `taskUpdated`); *claimed*: its claim (`claimedAt`) after the same. *early*: dependents",
        "claimed before that, or whose runner saw a dependency not ended (must be 0).",
        "",
        "| case | workflows | dependents | ready p50 / p95 / max (s) | claimed p50 / p95 / max (s) | early | seconds per workflow |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['case']} | {row['workflows']} | {row['dependents']} | {row['ready_p50_s']} / {row['ready_p95_s']} / "
            f"{row['ready_max_s']} | {row['claimed_p50_s']} / {row['claimed_p95_s']} / {row['claimed_max_s']} | "
            f"{row['early']} | {', '.join(str(s) for s in row['workflow_seconds'])} |")
    lines += [
        "",
        "A fan-in's parent is made ready by the completion of its last child (the write that empties its counter tree",
        "readies it, in the same worker's fan-out); its claim comes from the table's stream (the MODIFY into PENDING)",
        "or from a worker already running, whichever is first. Seconds per workflow: from the CreateTasks invoke to",
        "its last task's end (1,000 children through the one-request-at-a-time emulator).",
        "",
        "## What an edge costs (not measured by this script)",
        "",
        "Write units per dependency edge as DynamoDB bills them, measured by the cost meter in",
        "`tests/integration/test_workflow_fan_in.py::test_write_units_per_dependency_edge_of_a_fan_in_and_a_fan_out` (both",
        "engines) against the same tasks without edges: a fan-in of N = 120, 4 + 4/N; a fan-out of N = 120, 2 + 3/N. At",
        "on-demand $0.625 per million write units (bench/dollars.py's price), a million fan-in edges cost about $2.50 and a",
        "million fan-out edges about $1.25, on top of the tasks themselves (a task that waits costs one task write more",
        "than a plain task: its WAITING put, then the write that makes it PENDING with its ReadyIndex entry). `make bench`",
        "does not report workflows yet (docs/workflows.md, \"What it costs\").",
        "",
    ]
    path.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fan-ins", type=int, default=3)
    parser.add_argument("--children", type=int, default=1000)
    parser.add_argument("--diamonds", type=int, default=30)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a workflow may take")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    stack = Stack(OVERRIDES)
    try:
        rows = []
        for name, count, build, sink in (("diamond", args.diamonds, diamond, "d"),
                                         (f"fan-in of {args.children}", args.fan_ins, lambda: fan_in(args.children), "parent")):
            runs = []
            for _ in range(count):
                run = measure(stack, build(), sink, args.timeout)
                print(json.dumps({k: v for k, v in run.items() if k != "samples"} | {
                    "ready_s": [s["ready_s"] for s in run["samples"]][:4],
                    "claimed_s": [s["claimed_s"] for s in run["samples"]][:4]}), flush=True)
                runs.append(run)
            if runs:
                rows.append(summary(name, runs))
                print(json.dumps(rows[-1]), flush=True)
    finally:
        stack.stop()
    if args.out is not None:
        write_results(args.out, rows, args, commit)
    return 1 if any(row["early"] for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
