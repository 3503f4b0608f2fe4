"""The Matcher with 1, 4, 8 and 16 concurrent matchers: the product against the seed's matcher, same callers.

Both run on the serialized moto server (local/emulator/server.py, commit log on), each run on a fresh server
with the same call center: ``--agents`` agents with mixed profiles and ``--calls`` callers with mixed
preferences, drawn exactly as ``tests/matcher_load.make_world`` draws them (same seed, same order). The
product runs its own Matcher through ``tests/matcher_load.run_matchers`` (one invocation per matcher, all
started together); the seed port (``bench/seed_matcher.py``) runs as many threads, each with its own
client, taking callers from one FIFO list.

Per run: matches/s, requests per match (every DynamoDB request the matchers sent), calls lost per match
(the product: calls that stopped waiting between a matcher's read and its transaction, another matcher's
included; the seed has none: SQS hands each caller to one consumer), aborted transactions per match, callers given up, and double assignments (an agent in two
committed matches, counted from the server's commit log). ``--meter`` also attaches the cost meter and
reports write and read units per match.

    .venv/bin/python bench/matcher_compare.py --design both --matchers 1,4,8,16 --agents 60 --calls 150 --repeat 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common  # noqa: E402
from bench.cost_meter import CostMeter  # noqa: E402
from bench.seed_matcher import CallerQueue, SeedMatcher, SeedMatchReport, create_seed_agent_table  # noqa: E402
from local.emulator.server import Emulator  # noqa: E402
from taskqueue.matching.rules import DEFAULT_ATTRIBUTES, entry_keys, parse_profile, preferences_key, queue_key  # noqa: E402
from tests.matcher_load import GENDERS, LANGUAGES, check_final_state, make_world, replay, run_matchers  # noqa: E402


class MeteredServer:
    """The emulator as the product's World sees it, but every client it hands out is metered."""

    def __init__(self, server: Emulator, meter: CostMeter) -> None:
        self._server = server
        self._meter = meter

    def client(self, *args: Any, **kwargs: Any) -> Any:
        return self._meter.attach(self._server.client(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


def double_assignments(commits: list[dict[str, Any]]) -> int:
    """Agents made busy by more than one committed transaction (no agent ends a call in these runs)."""
    busy = Counter[str]()
    for body in commits:
        for item in body["TransactItems"]:
            update = item.get("Update")
            if update and ":busy" in (update.get("ExpressionAttributeValues") or {}):
                busy[json.dumps(update["Key"], sort_keys=True)] += 1
    return sum(n - 1 for n in busy.values() if n > 1)


def product_run(server: Emulator, matchers: int, agents: int, calls: int, seed: int, meter_on: bool) -> dict[str, Any]:
    if True:  # one server for every run of a process; each run has its own tables
        world = make_world(
            server, agents=agents, calls=calls, seed=seed, name=f"p{uuid.uuid4().hex[:6]}"
        )
        meter = CostMeter(server.client()) if meter_on else None
        if meter is not None:
            world.server = MeteredServer(server, meter)  # type: ignore[assignment]
        requests_before, cancelled_before, commits_before = server.requests, server.cancelled, len(server.commits)
        reports, elapsed = run_matchers(world, matchers)
        requests = meter.totals.request_count if meter else server.requests - requests_before
        aborted = server.cancelled - cancelled_before
        totals = meter.reset() if meter else None
        if meter:
            meter.paused = True
        commits = server.commits[commits_before:]
        checks = "passed"
        try:
            replay(world, matchers)
            check_final_state(world)
        except AssertionError as exc:
            checks = f"FAILED: {exc}"
    matched = sum(r.matched for r in reports)
    result = _result("product", matchers, agents, calls, matched, elapsed, requests, aborted,
                     lost=sum(r.lost for r in reports), gave_up=sum(r.gave_up for r in reports),
                     doubles=double_assignments(commits), checks=checks)
    # How many of the matchers wrote pairs (a helper leaves when too few agents are idle for it: not-needed), and
    # how many matches each committed transaction held.
    result.update(took_part=sum(1 for r in reports if r.stopped_by != "not-needed"),
                  matches_per_transaction=matched / max(1, sum(r.transactions for r in reports)))
    if totals is not None:
        result.update(wcu_per_match=totals.write_units / max(1, matched), rcu_per_match=totals.read_units / max(1, matched))
    return result


def seed_world(agents: int, calls: int, seed: int) -> tuple[list[tuple[str, list[str]]], list[tuple[str, str]]]:
    """The same agents and callers as tests/matcher_load.make_world (same draws, same order)."""
    rng = random.Random(seed)
    profiles = []
    for i in range(agents):
        languages = rng.sample(LANGUAGES, rng.choice([1, 1, 2, 3]))
        genders = [rng.choice(GENDERS)]
        profile = parse_profile({"agentId": f"agent-{i:03d}", "attributes": {"language": languages, "gender": genders}},
                                DEFAULT_ATTRIBUTES)
        profiles.append((profile.agent_id, entry_keys(profile)))
    callers = []
    for i in range(calls):
        preferences = {"language": rng.choice([*LANGUAGES, "pt", None]), "gender": rng.choice([*GENDERS, None, None])}
        callers.append((f"caller-{i}", preferences_key(preferences, DEFAULT_ATTRIBUTES)))
    return profiles, callers


def seed_run(server: Emulator, matchers: int, agents: int, calls: int, seed: int, meter_on: bool) -> dict[str, Any]:
    profiles, callers = seed_world(agents, calls, seed)
    keys = sorted({queue_key({"gender": g, "language": lang}) for g in [*GENDERS, "*"] for lang in [*LANGUAGES, "pt", "*"]})
    if True:  # one server for every run of a process; each run has its own table
        table = f"seed-agents-{uuid.uuid4().hex[:6]}"
        setup = server.client()
        create_seed_agent_table(setup, table)
        builder = SeedMatcher(setup, table, keys)
        builder.create_queues()
        base = int(time.time() * 1000)
        for offset, (agent_id, agent_keys) in enumerate(profiles):
            builder.enqueue(agent_id, agent_id, agent_keys, base + offset)
        meter = CostMeter(server.client()) if meter_on else None
        queue = CallerQueue(list(callers))
        requests_before, cancelled_before, commits_before = server.requests, server.cancelled, len(server.commits)
        started: list[float] = []  # the moment every matcher has its client: the product's run_matchers times from it too
        barrier = threading.Barrier(matchers, action=lambda: started.append(time.monotonic()))

        def one(index: int) -> SeedMatchReport:
            client = server.client()
            if meter:
                meter.attach(client)
            matcher = SeedMatcher(client, table, keys, rng=random.Random(index))
            report = SeedMatchReport()
            barrier.wait()
            while True:
                caller = queue.take()
                if caller is None:
                    return report
                outcome = matcher.match(caller[0], caller[1], report)
                queue.done(caller if outcome == "gave-up" else None)

        with ThreadPoolExecutor(max_workers=matchers) as pool:
            reports = list(pool.map(one, range(matchers)))
        elapsed = time.monotonic() - started[0]
        requests = meter.totals.request_count if meter else server.requests - requests_before
        aborted = server.cancelled - cancelled_before
        commits = server.commits[commits_before:]
        totals = meter.reset() if meter else None
    matched = sum(r.matched for r in reports)
    result = _result("seed", matchers, agents, calls, matched, elapsed, requests, aborted, lost=0,
                     gave_up=sum(r.gave_up for r in reports), doubles=double_assignments(commits), checks="n/a")
    if totals is not None:
        result.update(wcu_per_match=totals.write_units / max(1, matched), rcu_per_match=totals.read_units / max(1, matched))
    return result


def _result(design: str, matchers: int, agents: int, calls: int, matched: int, elapsed: float, requests: int,
            aborted: int, *, lost: int, gave_up: int, doubles: int, checks: str) -> dict[str, Any]:
    per = max(1, matched)
    return {
        "design": design,
        "matchers": matchers,
        "agents": agents,
        "calls": calls,
        "matched": matched,
        "seconds": elapsed,
        "matches_per_second": matched / elapsed if elapsed else 0.0,
        "requests": requests,
        "requests_per_match": requests / per,
        "aborted": aborted,
        "aborted_per_match": aborted / per,
        "lost": lost,
        "lost_per_match": lost / per,
        "gave_up": gave_up,
        "double_assignments": doubles,
        "checks": checks,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--design", choices=("product", "seed", "both"), required=True,
                        help="both: for each repetition and matcher count, a product run then a seed run (each design "
                        "on its own server), so that a change in the machine's load falls on both alike")
    parser.add_argument("--matchers", default="1,4,8,16", help="comma-separated matcher counts (one run each)")
    parser.add_argument("--agents", type=int, default=60)
    parser.add_argument("--calls", type=int, default=150)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--meter", action="store_true", help="one more 1-matcher run with the cost meter (units per match)")
    args = parser.parse_args(argv)
    common.quiet()
    designs = ("product", "seed") if args.design == "both" else (args.design,)
    runs = {"product": product_run, "seed": seed_run}
    with contextlib.ExitStack() as stack:
        servers = {d: Emulator(record_transactions=True) for d in designs}
        for server in servers.values():
            server.start(timeout=common.EMULATOR_START_SECONDS)
            stack.callback(server.stop)
        for repetition in range(args.repeat):
            for count in (int(n) for n in args.matchers.split(",")):
                for design in designs:
                    result = runs[design](servers[design], count, args.agents, args.calls, args.seed, False)
                    print(json.dumps({**result, "repetition": repetition}), flush=True)
        if args.meter:  # the meter's own reads slow the run down: its rate is not a figure
            for design in designs:
                result = runs[design](servers[design], 1, args.agents, args.calls, args.seed, True)
                print(json.dumps({**result, "repetition": "metered"}), flush=True)


if __name__ == "__main__":
    main()
