"""Create -> first claim in real seconds, on the local stack without time scaling: what a user of `make up` waits.

Over 400 lines: one command for every real-time pickup figure; the cases share the stack, its clients and the
summary, each a few lines of its own.
Starts `python -m local up` (exactly what `make up` runs: the template's defaults, real time, streams, SNS,
schedules and TTL live; ProcessTasks reserves no concurrency, so the table's stream starts the worker as on a
default deploy) on a free port with its own discovery file, with the CreateTasks schedule off and a fake runner of
1 s, and talks to it as a user's system would: the Lambda Invoke API for CreateTasks and AgentEvents, DynamoDB reads
to see when a task was claimed (its item leaves PENDING; read every 20 ms, strongly consistent). Each case starts
from an idle queue (the tasks this command made are finished and no invocation of the queue's function has ended
for a moment) unless it says otherwise:

- ``task``: one task on an idle queue `work`;
- ``call``: a call on queue `calls` whose preferences an available agent fits (the agent logged in beforehand);
- ``agent``: an agent becoming available (logs in) while a call it fits waits;
- ``steady``: one task a second for ``--steady-seconds`` on `work` (the p50/p95 of all of them); ``--fast RATE``
  alone (a stack whose runner takes 0.02 s a task: it keeps up): RATE tasks a second, evenly spaced;
- ``redrive``, ``redrive-client``, ``retry-all``, ``resume``: from the operator's ``taskq`` command (or the
  producer client's redrive) to the claim of the task(s) it brings back (a cancelled task redriven, two retried, a
  paused queue resumed with a task waiting);
- ``delayed``: tasks created together on an idle `work` with ``delaySeconds`` of each of ``--delays`` (default
  25,150,600; 600 is past the safety net's 60 s period and any worker's budget): claim - due for each (from its
  ``claimedAt``); no worker stays awake while they wait, the queue's scheduled wake-up at its delayed head
  (EventBridge Scheduler, fired by the local engine) wakes it. ``--delays ''`` skips it;
- ``busy`` (a second stack: ``TaskRunner=bench_runner:run``, ``RunnerCapacity=8``; one task first, so that the
  worker function has started once): 3 tasks a second for 40 s, each running 0.2-3.0 s (about 5 of the 8 slots
  busy), create -> claim of every task;
- ``killed`` (the same stack): a task whose runner kills its process (as a Timeout or OOM does) is claimed; 3 s
  later a task is created: how long until it is claimed;
- ``killed-at-limit`` (``--limit`` alone, a third stack: ``WorkRunningLimit=3``, ``ProcessTasksConcurrency=3``): one
  worker holds every slot of the running limit (two long tasks and one that kills its process) and is killed; 3 s
  later a task is created: how long until it is claimed.

Invocations per function come from the stack's own lines (one per invocation). Prints one JSON line per case
and, with ``--out``, writes bench/results-pickup.md (bench/run.py carries its rows into bench/results.md).

    .venv/bin/python bench/pickup_realtime.py --repeat 5 --out bench/results-pickup.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "taskqueue")]

from bench.common import percentile  # noqa: E402
from bench.local_stack import LocalStack  # noqa: E402

OVERRIDES = ["CreateTasksScheduleState=DISABLED", "FakeRunnerDurationSeconds=1"]
INVOCATION_LINE = re.compile(r"^\d\d:\d\d:\d\d (\w+) \((\w+)\) ")
POLL_SECONDS = 0.02
# The function that works each queue, and how long none of its invocations must have ended for the queue to count as
# idle (a worker ends at its first look that finds nothing claimable while nothing of its own runs).
QUEUE_FUNCTIONS = {"work": "ProcessTasksFunction", "calls": "MatcherFunction"}
QUIET_SECONDS = 1.0
RUNNING = "TAKEN"


class Stack(LocalStack):
    """The local stack, counting the invocations it prints."""

    def __init__(self, overrides: list[str]) -> None:
        self.invocations: Counter[str] = Counter()
        self.sources: Counter[str] = Counter()  # "<function> (<source>)"
        self.last_line: dict[str, float] = {}  # function -> time.monotonic() its last invocation line was read
        self.tracked: dict[str, set[str]] = {}  # queue -> tasks this command made that were not seen finished yet
        super().__init__(overrides, prefix="pickup-")

    def on_line(self, line: str) -> None:
        found = INVOCATION_LINE.match(line)
        if found:
            self.invocations[found.group(1)] += 1
            self.last_line[found.group(1)] = time.monotonic()
            self.sources[f"{found.group(1)} ({found.group(2)})"] += 1

    def item(self, key: str) -> dict[str, Any]:
        return self.ddb.get_item(TableName=self.table, Key={"taskId": {"S": key}}, ConsistentRead=True).get("Item", {})

    def track(self, queue: str, task_id: str) -> None:
        self.tracked.setdefault(queue, set()).add(task_id)

    def wait_idle(self, queue: str, timeout: float = 60.0, *, pending_ok: bool = False) -> float:
        """Until no task this command made on ``queue`` runs (nor waits, unless ``pending_ok``: a call no agent fits, a
        paused queue's task) and no invocation of the queue's function has ended for QUIET_SECONDS; seconds waited."""
        started = time.monotonic()
        function = QUEUE_FUNCTIONS[queue]
        while time.monotonic() - started < timeout:
            if self._settled(queue, pending_ok) and time.monotonic() - self.last_line.get(function, 0.0) >= QUIET_SECONDS:
                return time.monotonic() - started
            time.sleep(0.1)
        raise RuntimeError(f"queue {queue!r} never went idle")

    def _settled(self, queue: str, pending_ok: bool) -> bool:
        tracked = self.tracked.get(queue, set())
        for task_id in sorted(tracked):
            status = self.item(task_id).get("taskStatus", {}).get("S")
            if status == RUNNING or (status == "PENDING" and not pending_ok):
                return False
            if status != "PENDING":
                tracked.discard(task_id)
        return True

    def claimed_after(self, task_id: str, created_ms: int, timeout: float = 120.0) -> float:
        """Seconds from ``created_ms`` until the task left PENDING (seen by polling its item)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.item(task_id).get("taskStatus", {}).get("S")
            if status and status != "PENDING":
                return (time.time_ns() // 1_000_000 - created_ms) / 1000
            time.sleep(POLL_SECONDS)
        raise RuntimeError(f"task {task_id} was not claimed within {timeout:.0f} s")


def create(stack: Stack, body: dict[str, Any], *, track: bool = True) -> tuple[str, int]:
    """A task made through CreateTasks; ``track``: its end is awaited before the next case (not a task that kills its
    worker: it runs again once its lease has passed)."""
    created = stack.invoke("CreateTasksFunctionName", body)
    task_id = created["taskIds"][0]
    if track:
        stack.track(body["queue"], task_id)
    return task_id, int(stack.item(task_id)["taskCreated"]["N"])


def one_task(stack: Stack) -> float:
    stack.wait_idle("work")
    task_id, created_ms = create(stack, {"queue": "work"})
    return stack.claimed_after(task_id, created_ms)


def agent(stack: Stack, agent_id: str) -> dict[str, Any]:
    return {"agentId": agent_id, "name": agent_id, "attributes": {"language": ["en"], "gender": ["f"]}}


def call_with_agent_available(stack: Stack) -> float:
    agent_id = f"agent-{uuid.uuid4().hex[:6]}"
    stack.invoke("AgentEventsFunctionName", {"action": "agentAvailable", "agent": agent(stack, agent_id)})
    stack.wait_idle("calls", pending_ok=True)
    task_id, created_ms = create(stack, {"queue": "calls", "payload": {"preferences": {"language": "en"}}, "ttlSeconds": 300})
    waited = stack.claimed_after(task_id, created_ms)
    stack.invoke("AgentEventsFunctionName", {"action": "agentOffline", "agentId": agent_id})
    return waited


def agent_freeing_up(stack: Stack) -> float:
    language = f"x{uuid.uuid4().hex[:4]}"  # no agent speaks it yet: the call waits
    task_id, _ = create(stack, {"queue": "calls", "payload": {"preferences": {"language": language}}, "ttlSeconds": 300})
    stack.wait_idle("calls", pending_ok=True)  # the Matcher found no agent and stopped
    agent_id = f"agent-{uuid.uuid4().hex[:6]}"
    freed_ms = time.time_ns() // 1_000_000
    stack.invoke("AgentEventsFunctionName", {"action": "agentAvailable", "agent": {
        "agentId": agent_id, "name": agent_id, "attributes": {"language": [language], "gender": ["f"]}}})
    waited = stack.claimed_after(task_id, freed_ms)
    stack.invoke("AgentEventsFunctionName", {"action": "agentOffline", "agentId": agent_id})
    return waited


def steady(stack: Stack, seconds: int, rate: float = 1.0, payload: dict[str, Any] | None = None,
           ) -> tuple[list[float], Counter[str]]:
    stack.wait_idle("work")
    before = Counter(stack.invocations)
    created: list[tuple[str, int]] = []
    start = time.monotonic()
    for n in range(int(seconds * rate)):
        time.sleep(max(0.0, start + n / rate - time.monotonic()))
        created.append(create(stack, {"queue": "work"} | ({"payload": payload} if payload else {})))
    stack.wait_idle("work")
    waits = [_claim_time(stack, task_id, created_ms) for task_id, created_ms in created]
    return waits, Counter({k: v - before.get(k, 0) for k, v in stack.invocations.items() if v - before.get(k, 0)})


def busy(stack: Stack, seconds: int = 40, rate: float = 3.0) -> tuple[list[float], Counter[str]]:
    import random

    rng = random.Random(28)
    stack.wait_idle("work")
    before = Counter(stack.invocations)
    created: list[tuple[str, int]] = []
    start = time.monotonic()
    for n in range(int(seconds * rate)):
        time.sleep(max(0.0, start + n / rate - time.monotonic()))
        created.append(create(stack, {"queue": "work", "payload": {"seconds": round(rng.uniform(0.2, 3.0), 2)}}))
    stack.wait_idle("work")
    waits = [_claim_time(stack, task_id, created_ms) for task_id, created_ms in created]
    return waits, Counter({k: v - before.get(k, 0) for k, v in stack.invocations.items() if v - before.get(k, 0)})


def killed(stack: Stack) -> float:
    stack.wait_idle("work", timeout=120)
    task_id, created_ms = create(stack, {"queue": "work", "payload": {"die": True}}, track=False)
    stack.claimed_after(task_id, created_ms)
    time.sleep(3.0)
    task_id, created_ms = create(stack, {"queue": "work", "payload": {"seconds": 0.2}})
    return stack.claimed_after(task_id, created_ms)


def killed_at_limit(stack: Stack, limit: int = 3) -> float:
    """Every slot of the running limit (WorkRunningLimit, 3 by default) held by one worker when it is killed: two
    long tasks and one that kills the process; then, 3 s later, a task. Seconds until that task is claimed."""
    stack.wait_idle("work", timeout=120)
    sleepers = [create(stack, {"queue": "work", "payload": {"seconds": 60}}, track=False) for _ in range(limit - 1)]
    for task_id, created_ms in sleepers:
        stack.claimed_after(task_id, created_ms)
    task_id, created_ms = create(stack, {"queue": "work", "payload": {"die": True}}, track=False)
    stack.claimed_after(task_id, created_ms)
    time.sleep(3.0)
    task_id, created_ms = create(stack, {"queue": "work", "payload": {"seconds": 0.2}})
    return stack.claimed_after(task_id, created_ms)


def taskq(stack: Stack, *args: str) -> None:
    """The operator's command against this stack (the CLI finds it by its stack file)."""
    env = {**os.environ, "TASKQ_LOCAL_STACK_FILE": str(stack.discovery)}
    subprocess.run([sys.executable, "-m", "taskq", *args, "--local"], cwd=ROOT, env=env, check=True,
                   capture_output=True, text=True)


def _cancelled(stack: Stack, count: int) -> list[str]:
    """``count`` tasks made and cancelled while the queue is paused (no worker takes them), the queue resumed, and
    every worker gone: dead letters for the operator to bring back."""
    taskq(stack, "pause", "work")
    ids = [create(stack, {"queue": "work"})[0] for _ in range(count)]
    for task_id in ids:
        taskq(stack, "cancel", task_id)
    taskq(stack, "resume", "work")
    stack.wait_idle("work")
    return ids


def operator_actions(stack: Stack) -> dict[str, float]:
    """Seconds from the operator's command (issued) to the claim: redrive of a cancelled task, retry-all of two,
    resume of a queue paused with a task waiting."""
    waited: dict[str, float] = {}
    (task_id,) = _cancelled(stack, 1)
    issued_ms = time.time_ns() // 1_000_000
    taskq(stack, "redrive", task_id)
    waited["redrive"] = stack.claimed_after(task_id, issued_ms)
    # The same redrive from an application's process (the producer client): the action without a process start.
    from taskqueue.client import TaskQueueClient

    client = TaskQueueClient.connect(local=True, env={"TASKQ_LOCAL_STACK_FILE": str(stack.discovery)})
    (task_id,) = _cancelled(stack, 1)
    issued_ms = time.time_ns() // 1_000_000
    client.redrive(task_id)
    waited["redrive-client"] = stack.claimed_after(task_id, issued_ms)
    ids = _cancelled(stack, 2)
    issued_ms = time.time_ns() // 1_000_000
    taskq(stack, "retry-all", "--state", "CANCELLED", "--queue", "work")
    waited["retry-all"] = max(stack.claimed_after(task_id, issued_ms) for task_id in ids)
    stack.wait_idle("work")
    taskq(stack, "pause", "work")
    task_id, _ = create(stack, {"queue": "work"})
    stack.wait_idle("work", pending_ok=True)
    issued_ms = time.time_ns() // 1_000_000
    taskq(stack, "resume", "work")
    waited["resume"] = stack.claimed_after(task_id, issued_ms)
    return waited


def _claim_time(stack: Stack, task_id: str, created_ms: int) -> float:
    """Seconds from creation to the claim, both read off the item (``claimedAt`` is written by the claim)."""
    item = stack.item(task_id)
    claimed = item.get("claimedAt", {}).get("N")
    if claimed is None:
        raise RuntimeError(f"task {task_id} has no claimedAt: {sorted(item)}")
    return (int(claimed) - created_ms) / 1000


def delayed(stack: Stack, delays: list[int]) -> dict[str, Any]:
    """Tasks delayed by each of ``delays``, created together on an idle queue: claim - due (s) per delay, and the
    invocations (by function and source) from their creation to the last claim."""
    stack.wait_idle("work")
    before = Counter(stack.sources)
    tasks = [(d, *create(stack, {"queue": "work", "delaySeconds": d, "ttlSeconds": d + 900})) for d in delays]
    late: dict[str, float] = {}
    for delay, task_id, created_ms in sorted(tasks):
        due_ms = created_ms + delay * 1000
        time.sleep(max(0.0, (due_ms - 3000) / 1000 - time.time()))  # nothing to see before: poll from 3 s ahead
        stack.claimed_after(task_id, created_ms, timeout=delay + 180)
        late[str(delay)] = round(_claim_time(stack, task_id, due_ms), 3)
        print(json.dumps({"case": "delayed", "delay": delay, "claim_minus_due": late[str(delay)]}), flush=True)
    used = {k: v - before.get(k, 0) for k, v in stack.sources.items() if v - before.get(k, 0)}
    return {"late": late, "invocations": used}


def summary(values: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(values), 2), "p95": round(percentile(values, 95), 2),
            "max": round(max(values), 2), "n": len(values)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="times each single case runs (default 5)")
    parser.add_argument("--steady-seconds", type=int, default=40)
    parser.add_argument("--delays", default="25,150,600",
                        help="delaySeconds of the delayed case's tasks, comma-separated ('' skips the case)")
    parser.add_argument("--only-delayed", action="store_true", help="run the delayed case alone (it writes no --out)")
    parser.add_argument("--out", help="write the results here (markdown), e.g. bench/results-pickup.md")
    parser.add_argument("--busy", action="store_true", help="only the busy and killed cases (their own stack)")
    parser.add_argument("--operator", action="store_true",
                        help="only the operator's redrive, retry-all and resume (their own stack)")
    parser.add_argument("--limit", action="store_true",
                        help="only the killed-at-the-limit case (its own stack: WorkRunningLimit 3, 3 workers)")
    parser.add_argument("--fast", type=float, metavar="RATE",
                        help="only the steady case at RATE tasks/s for --steady-seconds")
    args = parser.parse_args(argv)
    if args.fast:
        fast(args.fast, args.steady_seconds)
        return
    if args.busy:
        results = busy_and_killed(args.repeat)
        if args.out:
            replace_rows(Path(args.out), results, f"--busy --repeat {args.repeat}")
        return
    if args.limit:
        killed_at_the_limit(args.repeat)
        return
    if args.operator:
        operator_cases(args.repeat)
        return
    started = time.monotonic()
    stack = Stack(OVERRIDES)
    results: dict[str, Any] = {}
    delays = [int(d) for d in args.delays.split(",") if d.strip()]
    try:
        if args.only_delayed:
            print(json.dumps({"case": "delayed", **delayed(stack, delays)}), flush=True)
            return
        for name, case in (("task", one_task), ("call", call_with_agent_available), ("agent", agent_freeing_up)):
            before = Counter(stack.invocations)
            waits = [case(stack) for _ in range(args.repeat)]
            used = {k: v - before.get(k, 0) for k, v in stack.invocations.items() if v - before.get(k, 0)}
            results[name] = {**summary(waits), "waits": [round(w, 3) for w in waits], "invocations": used}
            print(json.dumps({"case": name, **results[name]}), flush=True)
        waits, used = steady(stack, args.steady_seconds)
        results["steady"] = {**summary(waits), "invocations": dict(used)}
        print(json.dumps({"case": "steady", **results["steady"]}), flush=True)
        results.update(operator_results(stack, args.repeat))
        if delays:
            results["delayed"] = delayed(stack, delays)
            print(json.dumps({"case": "delayed", **results["delayed"]}), flush=True)
    finally:
        stack.stop()
    results.update(busy_and_killed(args.repeat))
    if args.out:
        write(Path(args.out), results, args, time.monotonic() - started)


BUSY_OVERRIDES = [*OVERRIDES, "TaskRunner=bench_runner:run", "RunnerCapacity=8"]
FAST_OVERRIDES = [*OVERRIDES, "TaskRunner=bench_runner:run"]  # each task runs its payload's seconds
# Several workers may run (3 reserved), so the queue-wide running limit holds: 3 slots.
LIMIT_OVERRIDES = [*BUSY_OVERRIDES, "ProcessTasksConcurrency=3", "WorkRunningLimit=3"]


def fast(rate: float, seconds: int) -> None:
    stack = Stack(FAST_OVERRIDES)
    try:
        waits, used = steady(stack, seconds, rate, {"seconds": 0.02})  # a runner that keeps up (RunnerCapacity 3)
        print(json.dumps({"case": f"steady at {rate:g} tasks/s", **summary(waits), "invocations": dict(used)}), flush=True)
    finally:
        stack.stop()


def operator_results(stack: Stack, repeat: int) -> dict[str, Any]:
    before = Counter(stack.invocations)
    runs = [operator_actions(stack) for _ in range(repeat)]
    used = {k: v - before.get(k, 0) for k, v in stack.invocations.items() if v - before.get(k, 0)}
    out: dict[str, Any] = {}
    for case in ("redrive", "redrive-client", "retry-all", "resume"):
        waits = [run[case] for run in runs]
        out[case] = {**summary(waits), "waits": [round(w, 2) for w in waits], "invocations": used}
        print(json.dumps({"case": case, **out[case]}), flush=True)
    return out


def operator_cases(repeat: int) -> None:
    stack = Stack(OVERRIDES)
    try:
        operator_results(stack, repeat)
    finally:
        stack.stop()


def killed_at_the_limit(repeat: int) -> None:
    stack = Stack(LIMIT_OVERRIDES)
    try:
        waits = [killed_at_limit(stack) for _ in range(repeat)]
        print(json.dumps({"case": "killed-at-limit", **summary(waits), "waits": [round(w, 2) for w in waits]}),
              flush=True)
    finally:
        stack.stop()


def busy_and_killed(repeat: int) -> dict[str, Any]:
    stack = Stack(BUSY_OVERRIDES)
    out: dict[str, Any] = {}
    try:
        # One task first: the worker function's first start on a new stack (its imports, the runner's load) took 13 s
        # at a load average of 15, and every task arriving meanwhile waited for it (then LIFO served the newest first).
        # The cold start is the one-task case's first figure; this case measures a busy queue.
        one_task(stack)
        waits, used = busy(stack)
        out["busy"] = {**summary(waits), "invocations": dict(used)}
        print(json.dumps({"case": "busy", **out["busy"]}), flush=True)
        before = Counter(stack.invocations)
        waits = [killed(stack) for _ in range(repeat)]
        used = {k: v - before.get(k, 0) for k, v in stack.invocations.items() if v - before.get(k, 0)}
        out["killed"] = {**summary(waits), "waits": [round(w, 2) for w in waits], "invocations": used}
        print(json.dumps({"case": "killed", **out["killed"]}), flush=True)
    finally:
        stack.stop()
    return out


LABELS = {"busy": "busy: 3 tasks/s for 40 s, 0.2-3.0 s each, RunnerCapacity 8 (second stack)",
          "killed": "a task 3 s after a task killed its worker (second stack)"}


def _row(label: str, r: dict[str, Any], note: str = "") -> str:
    used = ", ".join(f"{k} {v}" for k, v in sorted(r["invocations"].items())) + note
    return f"| {label} | {r['p50']:.2f} | {r['p95']:.2f} | {r['max']:.2f} | {r['n']} | {used} |"


def replace_rows(path: Path, results: dict[str, Any], command: str) -> None:
    """A later run of some cases (``--busy``) in place of their rows in a written file, said with its date and load."""
    lines = path.read_text().splitlines()
    for key, r in results.items():
        label = LABELS[key]
        lines = [_row(label, r) if line.startswith(f"| {label} |") else line for line in lines]
    load = os.getloadavg()
    fact = (f"- The rows {', '.join(results)}: `bench/pickup_realtime.py {command}`, "
            f"{dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}, load average {load[0]:.1f} / {load[1]:.1f} / "
            f"{load[2]:.1f}")
    last_fact = max(i for i, line in enumerate(lines) if line.startswith("- "))
    lines.insert(last_fact + 1, fact)
    path.write_text("\n".join(lines) + "\n")


def write(path: Path, results: dict[str, Any], args: argparse.Namespace, wall: float) -> None:
    labels = {"task": "one task on an idle queue (work)", "call": "a call, a fitting agent already available",
              "agent": "an agent freeing up for a waiting call", "steady": f"1 task/s for {args.steady_seconds} s (work)",
              "redrive": "taskq redrive of a cancelled task (from the command)",
              "redrive-client": "the client's redrive of a cancelled task",
              "retry-all": "taskq retry-all of two cancelled tasks (the later claim)",
              "resume": "taskq resume of a paused queue, a task waiting",
              **LABELS}
    rows = ["| case | p50 (s) | p95 (s) | max (s) | n | invocations (function: count) |", "|---|---:|---:|---:|---:|---|"]
    for key, label in labels.items():
        if key not in results:
            continue
        r = results[key]
        shared = " (the four operator cases together)" if key in ("redrive", "redrive-client", "retry-all", "resume") else ""
        rows.append(_row(label, r, shared))
    if "delayed" in results:
        r = results["delayed"]
        used = ", ".join(f"{k} {v}" for k, v in sorted(r["invocations"].items()))
        rows += ["", "Delayed tasks, created together on an idle queue (claim - due, from `claimedAt`; invocations from "
                 f"their creation to the last claim: {used}):", "", "| delaySeconds | claim - due (s) |", "|---:|---:|",
                 *(f"| {d} | {v:.2f} |" for d, v in r["late"].items())]
    load = os.getloadavg()
    path.write_text("\n".join([
        "# Create -> first claim in real seconds on the local stack (no time scaling)",
        "",
        f"Command: `.venv/bin/python bench/pickup_realtime.py --repeat {args.repeat} --steady-seconds {args.steady_seconds} "
        f"--delays '{args.delays}' "
        f"--out {path.relative_to(ROOT) if path.is_absolute() and ROOT in path.parents else path}` — generated, do not edit by hand.",
        "",
        f"- Date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}; wall time {wall / 60:.1f} min; load average "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min) on {os.cpu_count()} cores",
        f"- The stack: `python -m local up --param-overrides {' '.join(OVERRIDES)}` (what `make up` runs; every other "
        "parameter at its template default), real time; the busy and killed cases on a second stack with "
        f"`{' '.join(BUSY_OVERRIDES[len(OVERRIDES):])}` as well.",
        "- A wait: from the task's creation (its `taskCreated`) to the moment it was seen claimed (its item read every "
        f"{POLL_SECONDS * 1000:.0f} ms), or, for an agent freeing up, from the AgentEvents call; steady: from "
        "`taskCreated` to `claimedAt` (written by the claim).",
        "",
        *rows,
        "",
    ]))


if __name__ == "__main__":
    main()
