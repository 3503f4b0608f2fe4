"""How fast the board's queues page answers with a big queue: fill queue `work` with N PENDING tasks (BatchWriteItem
through the store, the path CreateTasks takes), then time GET / of a running board (median of several requests)
and TaskStore.depth alone, and write bench/results-board.md.

Two engines, one run each (the page and the code are the same; only the DynamoDB behind them differs):

    .venv/bin/python bench/board_bench.py --engine local-stack --tasks 100000 --repeat 3
        `python -m local up` (the local stack, moto behind one lock) on a free port; the board found through its
        stack file, as `taskq board` finds it.
    scripts/with-dynamodb-local .venv/bin/python bench/board_bench.py --engine dynamodb-local --tasks 100000
        AWS's DynamoDB Local (in a private network namespace), the queue table as template.yaml declares it.

Each run adds its section to bench/results-board.md (a section of the same engine and size is replaced), so the
file holds the figures of every engine and size measured. `make bench` (bench/run.py) links the file from
bench/results.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "layers" / "taskqueue"), str(ROOT / "cli"), str(ROOT)]

import boto3  # noqa: E402

from taskq import connection  # noqa: E402
from taskq.board.metrics import EmfLogMetrics  # noqa: E402
from taskq.board.server import run_in_thread, serve, url_of  # noqa: E402
from taskq.board.services import Board, build  # noqa: E402
from taskq.main import build_parser  # noqa: E402
from taskqueue.core.clock import SystemClock  # noqa: E402
from taskqueue.core.model import new_tasks, parse_create_request  # noqa: E402
from taskqueue.core.settings import Settings  # noqa: E402
from taskqueue.store import TaskStore  # noqa: E402

RESULTS = ROOT / "bench" / "results-board.md"
PARAMS = ["CreateTasksScheduleState=DISABLED", "FakeRunnerDurationSeconds=0"]


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def local_stack(workdir: Path) -> Iterator[Board]:
    """A local stack in its own process, and the board taskq builds for it (through the stack file)."""
    discovery = workdir / "local-stack.json"
    log_path = workdir / "up.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    with log_path.open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "local", "up", "--port", str(free_port()), "--discovery",
                                 str(discovery), "--param-overrides", *PARAMS], cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while not discovery.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the local stack did not start:\n{log_path.read_text()}")
                time.sleep(0.2)
            os.environ["TASKQ_LOCAL_STACK_FILE"] = str(discovery)
            args = build_parser().parse_args(["board"])
            yield build(connection.connect(args), read_only=False)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()


@contextmanager
def dynamodb_local(workdir: Path) -> Iterator[Board]:
    """The queue table on DynamoDB Local (run under scripts/with-dynamodb-local), and a board over it."""
    from tests.support import create_queue_table

    endpoint = os.environ.get("DYNAMODB_LOCAL_ENDPOINT")
    if not endpoint:
        raise SystemExit("no DYNAMODB_LOCAL_ENDPOINT: run this under scripts/with-dynamodb-local "
                         f"({os.environ.get('DYNAMODB_LOCAL_UNAVAILABLE', 'see docs/testing.md')})")
    session = boto3.session.Session(region_name="us-east-1", aws_access_key_id="bench", aws_secret_access_key="bench")
    client = session.client("dynamodb", endpoint_url=endpoint)
    table = f"board-bench-{int(time.time())}"
    create_queue_table(client, table)
    settings = Settings(queue_table_name=table)
    clock = SystemClock()
    conn = connection.Connection(session, endpoint, None, {})
    target = connection.Target(conn, settings, TaskStore(client, settings, clock), clock)
    try:
        yield Board(target, False, EmfLogMetrics(workdir / "no-functions.log"), None, None, f"DynamoDB Local {table}")
    finally:
        client.delete_table(TableName=table)


def fill(store: TaskStore, n: int) -> float:
    """``n`` PENDING tasks in queue `work` (paused first, so no worker takes any), 1,000 per request; seconds taken."""
    store.pause("work")
    request = parse_create_request({"queue": "work", "count": 1000, "payload": {"bench": "board"}}, store.settings)
    started = time.monotonic()
    done = 0
    while done < n:
        tasks = new_tasks(request, int(time.time() * 1000), store.settings)[: n - done]
        store.put_tasks(tasks)
        done += len(tasks)
        if done % 10_000 == 0 or done == n:
            say(f"  filled {done:,} tasks in {time.monotonic() - started:.0f} s")
    return time.monotonic() - started


def timed(action: Callable[[], Any], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return times


def get(url: str) -> None:
    with urllib.request.urlopen(url, timeout=3600) as response:
        body = response.read()
        if response.status != 200 or b'data-count="work:ready"' not in body:
            raise SystemExit(f"GET {url}: {response.status}, not the queues page")


def measure(board: Board, tasks: int, repeat: int) -> dict[str, Any]:
    store = board.store
    say(f"filling queue work with {tasks:,} tasks")
    fill_s = fill(store, tasks)
    depth = store.depth("work")
    if depth.pending < tasks:
        raise SystemExit(f"the queue holds {depth.pending:,} PENDING tasks, not {tasks:,}")
    server = serve(board)
    run_in_thread(server)
    try:
        url = url_of(server)
        say(f"timing GET {url} ({repeat} requests after one to warm up)")
        get(url)
        load = os.getloadavg()[0]
        page = timed(lambda: get(url), repeat)
        counts = timed(lambda: store.depth("work"), repeat)
        load = max(load, os.getloadavg()[0])
    finally:
        server.shutdown()
        server.server_close()
    return {"tasks": tasks, "pending": depth.pending, "fill_s": fill_s, "page_s": page, "depth_s": counts,
            "load": load}


def section(engine: str, result: dict[str, Any], command: str) -> str:
    page, depth = result["page_s"], result["depth_s"]
    return "\n".join([
        f"## {engine}, {result['tasks']:,} tasks",
        "",
        f"Command: `{command}`; {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}; {machine()}.",
        "",
        "| | median | min | max |",
        "|---|---:|---:|---:|",
        f"| GET / (the queues page: both queues' counts, controls, charts), s | {statistics.median(page):.3f} | "
        f"{min(page):.3f} | {max(page):.3f} |",
        f"| of which TaskStore.depth('work') (COUNT queries), s | {statistics.median(depth):.3f} | {min(depth):.3f} | "
        f"{max(depth):.3f} |",
        "",
        f"{len(page)} requests each, after one to warm up; queue `work` held {result['pending']:,} PENDING tasks "
        f"(filled in {result['fill_s']:.0f} s through TaskStore.put_tasks, BatchWriteItem of 25). The machine's load "
        f"average (1 min) while timing: {result['load']:.1f} on {os.cpu_count()} cores (shared machine).",
        "",
    ])


def machine() -> str:
    return f"{os.cpu_count()} cores, Python {platform.python_version()}"


def write(engine: str, tasks: int, text: str) -> None:
    """Replace the section of this engine and size in bench/results-board.md, keep the others."""
    header = ("# The queue board's queues page with a big queue\n\n"
              "Generated by bench/board_bench.py (one section per engine and size; rerun the command shown to refresh "
              "one). What is timed: docs/benchmarks.md#the-queue-board.\n\n")
    sections: dict[str, str] = {}
    if RESULTS.exists():
        for block in RESULTS.read_text().split("\n## ")[1:]:
            title = block.split("\n", 1)[0]
            sections[title] = "## " + block.rstrip("\n") + "\n"
    sections[f"{engine}, {tasks:,} tasks"] = text
    RESULTS.write_text(header + "\n".join(sections[k] for k in sorted(sections)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("local-stack", "dynamodb-local"), default="local-stack")
    parser.add_argument("--tasks", type=int, default=100_000, help="PENDING tasks in queue work (default 100,000)")
    parser.add_argument("--repeat", type=int, default=5, help="timed requests (default 5)")
    args = parser.parse_args(argv)
    command = " ".join(["scripts/with-dynamodb-local"] * (args.engine == "dynamodb-local") +
                       [".venv/bin/python", "bench/board_bench.py", "--engine", args.engine, "--tasks", str(args.tasks),
                        "--repeat", str(args.repeat)])
    with tempfile.TemporaryDirectory(prefix="board-bench-") as workdir:
        context = local_stack if args.engine == "local-stack" else dynamodb_local
        with context(Path(workdir)) as board:
            result = measure(board, args.tasks, args.repeat)
    text = section(args.engine, result, command)
    write(args.engine, args.tasks, text)
    print(text)
    print(json.dumps({k: v for k, v in result.items()}, indent=1), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
