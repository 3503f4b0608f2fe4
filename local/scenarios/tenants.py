"""The tenants scenario on the local engine (``make demo SCENARIO=tenants``; issue 30): several arrival groups, each
with its own rate (``"groups"`` in the scenario; ``local/reports/tenants_report.py`` generates their arrivals), sent
with their group, then the same arrivals without it (``"compare_without_groups"``). Each pass is a fresh engine; the
report shows per group the share done, the create -> first claim p95 (platform time) and the share shed, and the
runner's busy share, side by side."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from local.engine.engine import Engine
from local.reports import tenants_report as figures


def records(engine: Engine, end_ms: int) -> list[figures.TaskRecord]:
    out = []
    with engine.observer.lock:
        for t in engine.observer.tasks.values():
            if t.removed == "shed" or t.status == "SHED" or (t.status == "PENDING" and t.ttl * 1000 <= end_ms):
                outcome = figures.SHED
            elif t.status in ("SUCCESS", "FAILURE"):
                outcome = figures.DONE
            else:
                outcome = figures.WAITING
            out.append(figures.TaskRecord(t.tenant or "default", t.created_ms,
                                          t.claimed_ms[0] if t.claimed_ms else None, outcome))
    return out


def one_pass(args: Any, scenario: dict[str, Any], params: dict[str, Any], grouped: bool, say: Any) -> dict[str, Any]:
    label = "with groups" if grouped else "without groups"
    out = Path(args.out)
    name = f"{scenario['name']}-{'groups' if grouped else 'plain'}-{time.strftime('%Y%m%d-%H%M%S')}"
    engine = Engine(args.template, params, endpoint_url=args.endpoint_url, time_scale=scenario["time_scale"],
                    log_file=out / f"{name}.functions.log", ttl_lateness=scenario.get("ttl_lateness_seconds", 2.0))
    arrivals = figures.arrivals(scenario)
    duration, ttl = float(scenario["duration_seconds"]), int(scenario["ttl_seconds"])
    runner = scenario["runner"]
    late = 0.0
    try:
        engine.start()
        # Warm environments before the first arrival: a deployed stack serving traffic has them, and ten cold starts
        # at once on a 2-core laptop took 4-9 s each (Lambda starts each in under a second), idling the runner.
        for function, count in scenario.get("warm_sandboxes", {}).items():
            engine.prewarm(function, int(count))
        start = time.monotonic()
        start_ms = int(time.time() * 1000)
        last = 0.0
        for when, group, count in arrivals:
            wait = when - (time.monotonic() - start)
            if wait > 0:
                time.sleep(wait)
            late = max(late, (time.monotonic() - start) - when)
            event: dict[str, Any] = {"queue": "work", "count": count, "ttlSeconds": ttl, "payload": {"tenant": group}}
            if grouped:
                event["group"] = group
            engine.invoke_async("CreateTasksFunction", event)
            if when - last >= 10:
                c = engine.observer.counts()
                say(f"  {label}: t={when:4.0f}s created {c['created']} pending {c['PENDING']} succeeded {c['SUCCESS']} shed {c['shed']}")
                last = when
        # The drain: until nothing waits or runs, every task left being past its TTL (then shed) or done.
        deadline = time.monotonic() + ttl + scenario.get("drain_timeout_seconds", 30)
        while time.monotonic() < deadline:
            c = engine.observer.counts()
            if c["PENDING"] == c["expired_waiting"] and c["TAKEN"] == 0 and not engine.busy():
                break
            time.sleep(0.5)
        end_ms = int(time.time() * 1000)
        recs = records(engine, end_ms)
        with engine.observer.lock:
            runs = [(ms, ms + int(runner["duration_seconds"] * 1000))
                    for t in engine.observer.tasks.values() for ms in t.claimed_ms]
        result = figures.figures(recs, runs, (start_ms, start_ms + int(duration * 1000)), int(runner["capacity"]),
                                 scenario["noisy"])
        result["arrival_lateness_max_s"] = round(late, 2)
        result["wall_seconds"] = round(time.monotonic() - start, 1)
        result["invocations"] = {k.removesuffix("Function"): v["invocations"] for k, v in engine.stats()["functions"].items()}
    finally:
        engine.stop()
    return result


def demo(args: Any, scenario: dict[str, Any], params: dict[str, Any], say: Any) -> int:
    figures.validate(scenario)
    rates = dict(figures.arrival_groups(scenario))
    columns: dict[str, Any] = {}
    columns["with groups"] = {**one_pass(args, scenario, params, True, say), "rates": rates}
    if scenario.get("compare_without_groups", True):
        columns["without groups"] = {**one_pass(args, scenario, params, False, say), "rates": rates}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{scenario['name']}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"scenario": scenario, "parameters": params, "runs": columns}, indent=1, default=str))
    print()
    print(figures.table(columns))
    print()
    print(f"Report: {path}")
    return 0
