"""How fast the board's queues page answers with a big queue: fill queue `work` with N PENDING tasks (BatchWriteItem
through the store, the path CreateTasks takes), then time GET / of a running board (median of several requests)
and TaskStore.depth alone, and write bench/results-board.md.
Just over 400 lines: the two measurements (the page's speed, its read costs) share the fill and the board set-up.

Two engines, one run each (the page and the code are the same; only the DynamoDB behind them differs):

    .venv/bin/python bench/board_bench.py --engine local-stack --tasks 100000 --repeat 3
        `python -m local up` (the local stack, moto behind one lock) on a free port; the board found through its
        stack file, as `taskq board` finds it.
    scripts/with-dynamodb-local .venv/bin/python bench/board_bench.py --engine dynamodb-local --tasks 100000
        AWS's DynamoDB Local (in a private network namespace), the queue table as template.yaml declares it.

What the board's reads cost, before and after the bounded counts (issue 29), side by side in one run:

    scripts/with-dynamodb-local .venv/bin/python bench/board_bench.py --engine dynamodb-local --tasks 100000 --costs
        DynamoDB Local reports the ConsumedCapacity real DynamoDB would bill (moto's figures are wrong). One board
        page refreshed every 3 s for a simulated hour (the board's clock is simulated; the reads are real): "before"
        counts every partition in full at each refresh, as the board did (TaskStore.depth), "after" is the board
        as it is (counting.py: bounded counts, full counts in the background, shared). Read units per refresh as
        the page itself reports them, the hour's total from the board's meter, dollars on demand.

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
from taskq.board.counting import DOLLARS_PER_MILLION_READ_UNITS, BoardDepth, Cell, CountKeeper, ReadMeter  # noqa: E402
from taskq.board.metrics import CLOUDWATCH_EVERY_S, EmfLogMetrics, metric_queries  # noqa: E402
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


# ---- what the reads cost (--costs) ---------------------------------------------------------------------------


class SimulatedClock:
    """The board's clock for the cost run: an hour of refreshes passes in minutes (the reads are real)."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class FullCounts:
    """The board's counts as they were before the bounded counts: every partition counted in full (COUNT queries
    to the end) at every refresh (``TaskStore.depth``)."""

    cap = 0

    def __init__(self, store: TaskStore) -> None:
        self._store = store

    def depth(self, queue: str, now_ms: int) -> BoardDepth:
        d = self._store.depth(queue, now_ms)
        return BoardDepth(queue, Cell(d.ready), Cell(d.delayed), Cell(d.expired), Cell(d.taken), Cell(d.failure),
                          Cell(d.cancelled))

    def forget(self) -> None:
        return None

    def settle(self, timeout: float = 0) -> bool:
        return True


def request_units(body: bytes) -> float:
    import re

    found = re.search(rb'data-read-units="request">([0-9.]+)<', body)
    if not found:
        raise SystemExit("the page does not say its read units")
    return float(found.group(1))


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=3600) as response:
        body = response.read()
        if response.status != 200 or b'data-count="work:ready"' not in body:
            raise SystemExit(f"GET {url}: {response.status}, not the queues fragment")
        return body


def ready_cell(body: bytes) -> str:
    import re

    text = body.decode()
    found = re.search(r'data-count="work:ready"[^>]*>([^<]*)<', text)
    mark = re.search(r'data-count="work:ready"[^>]*>[^<]*</a>\s*<abbr[^>]*>([^<]*)<', text)
    return (found.group(1).strip() if found else "?") + (f" ({mark.group(1)})" if mark else "")


def measure_costs(board: Board, tasks: int, refreshes: int, before_refreshes: int) -> dict[str, Any]:
    store = board.store
    say(f"filling queue work with {tasks:,} tasks")
    fill_s = fill(store, tasks)
    every_s = 3.0
    say(f"before: {before_refreshes} refreshes counting in full")
    before = one_hour_clocked(board, FullCounts(store), before_refreshes, every_s, SimulatedClock())
    before["hour_units"] = statistics.mean(before["per_refresh"]) * 3600 / every_s  # the same every refresh
    before["dollars_per_hour"] = before["hour_units"] * DOLLARS_PER_MILLION_READ_UNITS / 1e6
    say(f"after: {refreshes} refreshes ({refreshes * every_s / 60:.0f} simulated minutes)")
    clock = SimulatedClock()
    after = one_hour_clocked(board, CountKeeper(store, SystemClock().now_ms, clock=clock), refreshes, every_s, clock)
    return {"tasks": tasks, "fill_s": fill_s, "before": before, "after": after, "every_s": every_s,
            "load": os.getloadavg()[0], "metrics_per_refresh": len(metric_queries(board.queues))}


def one_hour_clocked(board: Board, counts: Any, refreshes: int, every_s: float, clock: SimulatedClock) -> dict[str, Any]:
    """GET /fragments/queues (what an open page fetches) ``refreshes`` times, ``every_s`` simulated seconds apart;
    read units per refresh (the page's own figure), the hour's units (the board's meter: background included)."""
    meter = ReadMeter(clock)
    used = Board(board.target, True, board.metrics, None, None, board.where, counts=counts, meter=meter)
    server = serve(used)
    run_in_thread(server)
    per_refresh: list[float] = []
    cells: list[str] = []
    started = time.perf_counter()
    try:
        url = url_of(server) + "fragments/queues"
        for n in range(refreshes):
            body = fetch(url)
            per_refresh.append(request_units(body))
            counts.settle(3600)
            if n in (0, 1, refreshes - 1):
                cells.append(ready_cell(body))
            clock.t += every_s
    finally:
        server.shutdown()
        server.server_close()
    units, _ = meter.last_hour()
    hour_units = units * 3600 / (refreshes * every_s)
    return {"refreshes": refreshes, "per_refresh": per_refresh, "hour_units": hour_units,
            "dollars_per_hour": hour_units * DOLLARS_PER_MILLION_READ_UNITS / 1e6, "cells": cells,
            "wall_s": time.perf_counter() - started}


def costs_section(engine: str, result: dict[str, Any], command: str) -> str:
    before, after = result["before"], result["after"]
    metrics = result["metrics_per_refresh"]
    per_hour = 3600 / result["every_s"]
    cw_before = metrics * per_hour
    cw_after = metrics * 3600 / CLOUDWATCH_EVERY_S

    def stats(values: list[float]) -> str:
        return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"

    minutes = after["refreshes"] * result["every_s"] / 60
    return "\n".join([
        f"## {engine}, {result['tasks']:,} tasks: what one open page costs",
        "",
        f"Command: `{command}`; {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}; {machine()}.",
        "",
        f"Queue `work` held {result['tasks']:,} PENDING tasks (queue `calls` none); one page open, refreshed every "
        f"{result['every_s']:.0f} s (GET /fragments/queues, what htmx fetches), on a simulated clock: the reads are real "
        "and billed by DynamoDB Local's ConsumedCapacity. Read units per refresh are what the page itself reports for "
        "its request; units per hour come from the board's meter (background counts included). Dollars: on-demand "
        "read request units at $0.125 per million.",
        "",
        "| | before: full COUNT queries each refresh | after: bounded counts, full counts in the background |",
        "|---|---:|---:|",
        f"| refreshes measured | {before['refreshes']} | {after['refreshes']} ({minutes:.0f} simulated minutes) |",
        f"| read units per refresh, in the request: median (min-max) | {stats(before['per_refresh'])} | "
        f"{stats(after['per_refresh'])} |",
        f"| read units per hour, one page open | {before['hour_units']:,.0f} | {after['hour_units']:,.0f} |",
        f"| DynamoDB $ per hour, one page open | {before['dollars_per_hour']:.4f} | {after['dollars_per_hour']:.4f} |",
        f"| `work` ready as the page shows it (first, second, last refresh) | {' / '.join(before['cells'])} | "
        f"{' / '.join(after['cells'])} |",
        f"| wall time of the run, s | {before['wall_s']:.0f} | {after['wall_s']:.0f} |",
        f"| on AWS, CloudWatch GetMetricData: metrics asked per hour (not measured: {metrics} per read x reads) | "
        f"{cw_before:,.0f} (${cw_before * 0.01 / 1000:.3f}) | {cw_after:,.0f} (${cw_after * 0.01 / 1000:.3f}) |",
        "",
        f"Before, the hour is {per_hour:.0f} refreshes x the median refresh. Filled in {result['fill_s']:.0f} s; "
        f"load average (1 min) {result['load']:.1f} on {os.cpu_count()} cores (shared machine).",
        "",
    ])


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


def write(engine: str, tasks: int, text: str, title: str | None = None) -> None:
    """Replace the section of this engine and size in bench/results-board.md, keep the others."""
    header = ("# The queue board's queues page with a big queue\n\n"
              "Generated by bench/board_bench.py (one section per engine and size; rerun the command shown to refresh "
              "one). What is timed: docs/benchmarks.md#the-queue-board.\n\n")
    sections: dict[str, str] = {}
    if RESULTS.exists():
        for block in RESULTS.read_text().split("\n## ")[1:]:
            sections[block.split("\n", 1)[0]] = "## " + block.rstrip("\n") + "\n"
    sections[title or f"{engine}, {tasks:,} tasks"] = text
    RESULTS.write_text(header + "\n".join(sections[k] for k in sorted(sections)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("local-stack", "dynamodb-local"), default="local-stack")
    parser.add_argument("--tasks", type=int, default=100_000, help="PENDING tasks in queue work (default 100,000)")
    parser.add_argument("--repeat", type=int, default=5, help="timed requests (default 5)")
    parser.add_argument("--costs", action="store_true",
                        help="measure read units and dollars per hour of one open page, before and after")
    parser.add_argument("--refreshes", type=int, default=1200, help="--costs: refreshes after (default 1200: an hour)")
    parser.add_argument("--before-refreshes", type=int, default=3, help="--costs: refreshes before (default 3)")
    args = parser.parse_args(argv)
    extra = (["--costs"] + (["--refreshes", str(args.refreshes)] if args.refreshes != 1200 else [])
             + (["--before-refreshes", str(args.before_refreshes)] if args.before_refreshes != 3 else [])
             if args.costs else ["--repeat", str(args.repeat)])
    command = " ".join(["scripts/with-dynamodb-local"] * (args.engine == "dynamodb-local") +
                       [".venv/bin/python", "bench/board_bench.py", "--engine", args.engine, "--tasks", str(args.tasks),
                        *extra])
    with tempfile.TemporaryDirectory(prefix="board-bench-") as workdir:
        context = local_stack if args.engine == "local-stack" else dynamodb_local
        with context(Path(workdir)) as board:
            if args.costs:
                result = measure_costs(board, args.tasks, args.refreshes, args.before_refreshes)
            else:
                result = measure(board, args.tasks, args.repeat)
    if args.costs:
        text = costs_section(args.engine, result, command)
        write(args.engine, args.tasks, text, f"{args.engine}, {args.tasks:,} tasks: what one open page costs")
    else:
        text = section(args.engine, result, command)
        write(args.engine, args.tasks, text)
    print(text)
    print(json.dumps({k: v for k, v in result.items()}, indent=1), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
