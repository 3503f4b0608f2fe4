"""The reliability suite's harness: a ledger of what actually ran, fleets of workers on the serialized moto server,
and the figures each scenario records (written to reports/reliability-figures.json; docs/reliability.md).

Everything of concurrency runs on the serialized moto server (local/emulator/server.py: one request at a time, so
conditional writes are atomic as in DynamoDB), each worker thread with its own boto3 client.
"""

from __future__ import annotations

import fcntl
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from local.emulator.server import Emulator
from taskqueue.core.clock import SystemClock
from taskqueue.core.model import Task, new_tasks, parse_create_request
from taskqueue.core.settings import Settings
from taskqueue.store import TaskStore
from taskqueue.work.worker import Worker, WorkerReport

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ROOT / "reports" / "reliability-figures.json"
INJECTED = "injected by the local engine's faults"


def record_figures(scenario: str, figures: dict[str, Any]) -> None:
    """Keep a scenario's figures of this run (merged into reports/reliability-figures.json) and print them."""
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    # Scenarios run in parallel test processes (pytest-xdist): one read-merge-write at a time, or one is lost.
    with open(FIGURES.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            everything = json.loads(FIGURES.read_text())
        except (OSError, ValueError):
            everything = {}
        everything[scenario] = {**figures, "recorded_at": time.strftime("%Y-%m-%d %H:%M:%S")}
        FIGURES.write_text(json.dumps(everything, indent=1, sort_keys=True, default=str))
    print(f"\n{scenario}: {json.dumps(figures, default=str)}")


class Killed(BaseException):
    """Stands for the worker's process dying: not an Exception, so nothing catches it and nothing is recorded."""


# --------------------------------------------------------------------------- what ran


class Ledger:
    """What actually ran (every runner call: task, attempt, worker invocation) and what was recorded done (every
    completion the table accepted). Thread-safe."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, int, str]] = []
        self.completions: list[tuple[str, int, str]] = []
        self._lock = threading.Lock()

    def ran(self, task: Task, owner: str) -> None:
        with self._lock:
            self.runs.append((task.task_id, task.attempts, owner))

    def completed(self, task: Task, owner: str) -> None:
        with self._lock:
            self.completions.append((task.task_id, task.attempts, owner))

    def runs_per_attempt(self) -> Counter[tuple[str, int]]:
        return Counter((task_id, attempt) for task_id, attempt, _ in self.runs)

    def completions_per_task(self) -> Counter[str]:
        return Counter(task_id for task_id, _, _ in self.completions)


class LedgerStore(TaskStore):
    """The real store; a completion the table accepted is written in the ledger."""

    def __init__(self, client: Any, settings: Settings, ledger: Ledger) -> None:
        super().__init__(client, settings, SystemClock())
        self._ledger = ledger

    def complete(self, task: Task, owner: str, result: Any = None, now_ms: int | None = None) -> bool:
        done = super().complete(task, owner, result, now_ms)
        if done:
            self._ledger.completed(task, owner)
        return done


class DyingClient:
    """One worker invocation's view of its boto3 client: once the invocation is killed, every request it would
    still make raises Killed (a dead process sends nothing: no outcome, no heartbeat, no claim)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.dead = False

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._client, name)
        if not callable(real):
            return real

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.dead:
                raise Killed()
            return real(*args, **kwargs)

        return call


class CountingClient:
    """Counts every error botocore raised to the code (after its own retries), by operation and code."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.raised: Counter[str] = Counter()
        self.injected: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._client, name)
        if not callable(real):
            return real

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return real(*args, **kwargs)
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                with self._lock:
                    self.raised[f"{name}:{code}"] += 1
                    message = str(exc.response.get("Error", {}).get("Message", ""))
                    reasons = " ".join(str(r.get("Message", "")) for r in exc.response.get("CancellationReasons", []))
                    if INJECTED in message or INJECTED in reasons:
                        self.injected[f"{name}:{code}"] += 1
                raise

        return call


# --------------------------------------------------------------------------- tasks and tables


def create_tasks(server: Emulator, settings: Settings, count: int, *, max_attempts: int = 10, queue: str = "work") -> list[str]:
    """``count`` PENDING tasks written by a client the faults leave alone; their ids."""
    store = TaskStore(server.client(faults=False), settings, SystemClock())
    ids: list[str] = []
    while len(ids) < count:
        n = min(1000, count - len(ids))
        request = parse_create_request({"queue": queue, "count": n, "maxAttempts": max_attempts}, settings)
        tasks = new_tasks(request, SystemClock().now_ms(), settings)
        store.put_tasks(tasks)
        ids += [t.task_id for t in tasks]
    return ids


def scan_table(server: Emulator, table: str) -> dict[str, dict[str, Any]]:
    client = server.client(faults=False)
    items: dict[str, dict[str, Any]] = {}
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = client.scan(**kwargs)
        for item in page["Items"]:
            if "taskStatus" in item:  # not the queue's control items (claim lanes, running-limit slots, pause)
                items[item["taskId"]["S"]] = item
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def statuses(server: Emulator, table: str) -> Counter[str]:
    return Counter(item["taskStatus"]["S"] for item in scan_table(server, table).values())


# --------------------------------------------------------------------------- a fleet of workers


@dataclass
class FleetResult:
    reports: list[WorkerReport] = field(default_factory=list)
    invocations: int = 0
    killed: list[str] = field(default_factory=list)  # owners of the killed invocations
    failed: list[str] = field(default_factory=list)  # invocations that raised (Lambda would retry them)
    clients: list[CountingClient] = field(default_factory=list)
    seconds: float = 0.0
    finished: bool = False

    def total(self, name: str) -> int:
        return sum(getattr(r, name) for r in self.reports)

    def raised(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for client in self.clients:
            out.update(client.raised)
        return out

    def injected(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for client in self.clients:
            out.update(client.injected)
        return out


def run_fleet(
    server: Emulator,
    settings: Settings,
    ledger: Ledger,
    done: Callable[[], bool],
    *,
    workers: int = 8,
    capacity: int = 4,
    budget_seconds: float = 3.0,
    kill_share: float = 0.0,
    runner_seconds: tuple[float, float] = (0.0, 0.01),
    max_attempts: int = 6,
    seed: int = 1,
    timeout: float = 300.0,
    poll_seconds: float = 1.0,
) -> FleetResult:
    """``workers`` threads, each with its own client, run Worker invocations (each a ProcessTasks invocation: its
    own owner id, ``budget_seconds`` of claiming) until ``done()`` holds. A ``kill_share`` of the invocations dies
    at one of its claimed tasks, between claim and finish: the runner records the run in the ledger and the
    invocation's client goes dead (Killed), so it records nothing more and renews no lease."""
    result = FleetResult()
    stop = threading.Event()
    lock = threading.Lock()

    def one_thread(index: int) -> None:
        rng = random.Random(f"{seed}:{index}")
        client = CountingClient(server.client(max_attempts=max_attempts, pool=capacity + 2))
        with lock:
            result.clients.append(client)
        invocation = 0
        while not stop.is_set():
            invocation += 1
            owner = f"worker-{index}-{invocation}"
            dying = DyingClient(client)
            # A doomed invocation dies at one of its first ``capacity`` tasks: an invocation that claims fewer
            # survives (most claim a full slot's worth while work remains).
            die_at = rng.randint(1, capacity) if rng.random() < kill_share else None
            started = [0]
            run_lock = threading.Lock()

            def runner(task: Task, owner: str = owner, dying: DyingClient = dying, die_at: int | None = die_at,
                       started: list[int] = started, run_lock: threading.Lock = run_lock) -> dict[str, Any]:
                if dying.dead:
                    raise Killed()
                ledger.ran(task, owner)
                with run_lock:
                    started[0] += 1
                    dies = die_at is not None and started[0] == die_at
                if dies:
                    dying.dead = True  # the process dies here: claimed, started, nothing recorded
                    raise Killed()
                time.sleep(random.uniform(*runner_seconds))
                return {"by": owner}

            worker = Worker(LedgerStore(dying, settings, ledger), runner, capacity=capacity, owner=owner,
                            rng=random.Random(f"{seed}:{index}:{invocation}"))
            with lock:
                result.invocations += 1
            try:
                report = worker.run("work", budget_seconds)
            except Killed:
                with lock:
                    result.killed.append(owner)
                continue
            except Exception as exc:  # the invocation fails; Lambda would retry it, the safety net re-wakes
                with lock:
                    result.failed.append(f"{type(exc).__name__}: {exc}")
                continue
            with lock:
                result.reports.append(report)
            if report.stopped_by == "empty" and not report.work_remains:
                stop.wait(0.2)  # nothing to do: wait for the next wake-up

    started = time.monotonic()
    threads = [threading.Thread(target=one_thread, args=(i,), name=f"fleet-{i}", daemon=True) for i in range(workers)]
    for thread in threads:
        thread.start()
    deadline = started + timeout
    while time.monotonic() < deadline:
        if done():
            result.finished = True
            break
        time.sleep(poll_seconds)
    stop.set()
    for thread in threads:
        thread.join(60)
    result.seconds = time.monotonic() - started
    return result
