"""Matcher benchmark: matches per second and aborted transactions with 1, 4 and 8 concurrent matchers.

Runs on the serialized moto server (the local engine's emulator, local/emulator/server.py: one global request lock, so
conditional writes and transactions are atomic), with a fresh call center per run: AGENTS agents with mixed profiles (1-3 of 4
languages, one of 2 genders), CALLS callers with mixed preferences (some asking for a language nobody speaks).
Every run is checked as the concurrency test checks it (replayed commit log, final state).

    .venv/bin/python bench/matcher_bench.py [--agents 200] [--calls 500] [--matchers 1,4,8] [--seed 11]

The serialized engine does one request at a time, so absolute rates say nothing about DynamoDB; the ratios
between runs and the counts (aborted transactions, lost claims, requests per match) are what to read.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "layers" / "taskqueue"), str(ROOT)]
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "matcher-bench")

from local.emulator.server import Emulator  # noqa: E402
from tests.matcher_load import check_final_state, make_world, replay, run_matchers  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--matchers", default="1,4,8")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    logging.getLogger("taskqueue").setLevel(logging.WARNING)
    print(f"agents={args.agents} calls={args.calls} seed={args.seed} (serialized moto server)")
    header = f"{'matchers':>8} {'matched':>7} {'seconds':>7} {'matches/s':>9} {'aborted tx':>10} {'lost claims':>11} {'requests':>8} {'req/match':>9}"
    print(header)
    rows = []
    for count in (int(n) for n in args.matchers.split(",")):
        with Emulator(record_transactions=True) as server:
            world = make_world(server, agents=args.agents, calls=args.calls, seed=args.seed, name=f"bench{count}")
            requests_before, cancelled_before = server.requests, server.cancelled
            reports, elapsed = run_matchers(world, count)
            requests = server.requests - requests_before
            aborted = server.cancelled - cancelled_before
            replay(world, count)
            check_final_state(world)
        matched = sum(r.matched for r in reports)
        assert aborted == sum(r.conflicts for r in reports), "every aborted transaction is a counted conflict"
        lost = sum(r.lost for r in reports)
        row = (count, matched, elapsed, matched / elapsed, aborted, lost, requests, requests / max(1, matched))
        rows.append(row)
        print(f"{row[0]:>8} {row[1]:>7} {row[2]:>7.1f} {row[3]:>9.1f} {row[4]:>10} {row[5]:>11} {row[6]:>8} {row[7]:>9.1f}", flush=True)
    print("checks passed: no agent given twice, every match the head of its queue, no orphan entry, no stranded call")


if __name__ == "__main__":
    started = time.monotonic()
    main()
    print(f"total {time.monotonic() - started:.0f} s")
