"""python -m local demo|invoke|up|down — the local engine's command line (see docs/local-engine.md)."""

from __future__ import annotations

import argparse
import base64
import json
import logging
import random
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from local.engine import stack
from local.engine.engine import REPO, Engine
from local.faults.faults import Faults, FaultsError
from local.reports import run_report as reports
from local.scenarios import callcenter, tenants
from local.scenarios.demo_defaults import DEMO, LOCAL_STACK
from local.template.template import TemplateError

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


def parse_overrides(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        for part in item.split():
            name, sep, value = part.partition("=")
            if not sep:
                raise SystemExit(f"--param-overrides takes Name=Value pairs, got {part!r}")
            out[name] = value
    return out


def load_scenario(name: str) -> dict[str, Any]:
    path = Path(name) if name.endswith(".json") else SCENARIOS / f"{name}.json"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in SCENARIOS.glob("*.json")))
        raise SystemExit(f"no scenario {name!r}; known: {known}")
    scenario = json.loads(path.read_text())
    scenario.setdefault("name", path.stem)
    return scenario


def scenario_parameters(s: dict[str, Any]) -> dict[str, Any]:
    """A scenario's numbers as template parameters: the schedule turned on (``local.scenarios.demo_defaults``), CreateTasks
    running every minute of scaled time and making arrival x period tasks; the runner and the TTL go to their
    parameters."""
    period = 60 * s["time_scale"]
    runner = s.get("runner", {})
    params: dict[str, Any] = {
        **DEMO,
        "CreateTasksScheduleRate": "rate(1 minute)",
        "CreateTasksCount": max(1, round(s.get("arrival_per_second", 0) * period)),
        "RunnerCapacity": runner.get("capacity", 3),
        "FakeRunnerDurationSeconds": runner.get("duration_seconds", 1),
        "FakeRunnerFailureRate": runner.get("failure_rate", 0),
        "DefaultTtlSeconds": s.get("ttl_seconds", 3600),
    }
    params.update(s.get("parameters", {}))
    return params


def progress(engine: Engine, t: float) -> str:
    c = engine.observer.counts()
    inv = " ".join(f"{name.removesuffix('Function')} {pool.stats['invocations']}" for name, pool in engine.pools.items())
    tails = sum(1 for i in engine.invocations if i.get("result") and i["result"].get("work_remains"))
    return (f"t={t:5.0f}s created {c['created']:5d}  pending {c['PENDING']:4d}  taken {c['TAKEN']:2d}  "
            f"succeeded {c['SUCCESS']:5d}  failed {c['FAILURE']:3d}  shed {c['shed']:4d} | invocations {inv} | tail calls {tails}")


def sample(engine: Engine, t: float) -> dict[str, Any]:
    c = engine.observer.counts()
    return {"t": round(t, 2), "created": c["created"], "pending": c["PENDING"], "taken": c["TAKEN"],
            "succeeded": c["SUCCESS"], "failed": c["FAILURE"], "shed": c["shed"]}


def demo(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    if scenario.get("kind") == "callcenter":
        return callcenter_demo(args, scenario)
    params = {**scenario_parameters(scenario), **parse_overrides(args.param_overrides)}
    if scenario.get("kind") == "tenants":  # several arrival groups, each at its own rate (local/scenarios/tenants.py)
        print(f"Scenario {scenario['name']!r}: {scenario.get('description', '')}")
        return tenants.demo(args, scenario, params, print)
    # "arrivals": "poisson": one task per CreateTasks invocation at Poisson times (the scenario's rate), as a
    # user's system would send them, instead of the schedule's batch every scaled minute (the scenario turns it off).
    poisson = random.Random(scenario.get("seed", 1)) if scenario.get("arrivals") == "poisson" else None
    if poisson and params.get("CreateTasksScheduleState") != "DISABLED":
        raise SystemExit(f"scenario {scenario['name']!r} makes its own arrivals: set CreateTasksScheduleState DISABLED in its parameters")
    out = Path(args.out)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = f"{scenario['name']}-{stamp}"
    arrivals = {"CreateTasksFunction"}
    print(f"Scenario {scenario['name']!r}: {scenario.get('description', '')}")
    print(f"Parameters: {' '.join(f'{k}={v}' for k, v in params.items())}; time scale {scenario['time_scale']}")
    faults = scenario_faults(args, scenario)
    wall = time.monotonic()
    engine = Engine(args.template, params, endpoint_url=args.endpoint_url, time_scale=scenario["time_scale"],
                    log_file=out / f"{name}.functions.log", ttl_lateness=scenario.get("ttl_lateness_seconds", 2.0),
                    faults=faults)
    timeline: list[dict[str, Any]] = []
    tty = sys.stdout.isatty()
    try:
        engine.start()
        print(f"Emulator {engine.endpoint_url}; functions {', '.join(engine.functions)}"
              + (f"; skipped {', '.join(engine.skipped)}" if engine.skipped else ""))
        start = time.monotonic()
        bursts = sorted(scenario.get("bursts", []), key=lambda b: b["at_seconds"])
        next_arrival = poisson.expovariate(scenario["arrival_per_second"]) if poisson else float("inf")
        last_print = 0.0
        draining = False
        drain_started = 0.0
        while True:
            t = time.monotonic() - start
            while bursts and t >= bursts[0]["at_seconds"]:
                burst = bursts.pop(0)
                engine.invoke_async("CreateTasksFunction", {"queue": "work", "count": burst["count"]})
            while poisson and not draining and t >= next_arrival:
                engine.invoke_async("CreateTasksFunction", {"queue": "work"})
                next_arrival += poisson.expovariate(scenario["arrival_per_second"])
            if not draining and t >= scenario["duration_seconds"]:
                draining, drain_started = True, t
                for schedule in engine.schedules:
                    if schedule.function in arrivals:
                        schedule.stop()
                _line(f"{progress(engine, t)}  (arrivals stopped; draining)", tty, final=True)
            timeline.append(sample(engine, t))
            if t - last_print >= (1.0 if tty else 10.0):
                _line(progress(engine, t), tty)
                last_print = t
            if poisson and not draining:
                time.sleep(max(0.0, min(0.5, next_arrival - (time.monotonic() - start))))
                continue
            if draining:
                c = engine.observer.counts()
                if (c["PENDING"] == 0 and c["TAKEN"] == 0 and not any(m.pending() for m in engine.mappings)) or t - drain_started > scenario.get("drain_timeout_seconds", 60):
                    break
            time.sleep(0.5)
        _line(progress(engine, time.monotonic() - start), tty, final=True)
        report = reports.build(engine, scenario, timeline, time.monotonic() - wall)
        report["faults"] = engine.fault_report()
    finally:
        engine.stop()
    json_path, png_path = reports.write(report, out, name)
    print()
    print(reports.summary_table(report))
    print_faults(report["faults"])
    print()
    print(f"Report: {json_path}")
    print(f"Chart:  {png_path}")
    print(f"Function logs: {out / f'{name}.functions.log'}")
    return 0


def callcenter_demo(args: argparse.Namespace, scenario: dict[str, Any]) -> int:
    """The call-center scenario (local/scenarios/callcenter.py): agents, callers with preferences and patience, hang-ups."""
    params = {**callcenter.scenario_parameters(scenario), **parse_overrides(args.param_overrides)}
    out = Path(args.out)
    name = f"{scenario['name']}-{time.strftime('%Y%m%d-%H%M%S')}"
    print(f"Scenario {scenario['name']!r}: {scenario.get('description', '')}")
    print(f"Parameters: {' '.join(f'{k}={v}' for k, v in params.items())}; time scale {scenario['time_scale']}")
    faults = scenario_faults(args, scenario)
    wall = time.monotonic()
    engine = Engine(args.template, params, endpoint_url=args.endpoint_url, time_scale=scenario["time_scale"],
                    log_file=out / f"{name}.functions.log", ttl_lateness=scenario.get("ttl_lateness_seconds", 2.0),
                    faults=faults)
    tty = sys.stdout.isatty()
    try:
        engine.start()
        print(f"Emulator {engine.endpoint_url}; functions {', '.join(engine.functions)}"
              + (f"; skipped {', '.join(engine.skipped)}" if engine.skipped else ""))
        center = callcenter.CallCenter(engine, scenario)
        report = center.run(lambda text, final: _line(text, tty, final), print_every=1.0 if tty else 10.0)
        report["wall_seconds"] = round(time.monotonic() - wall, 1)
        report["faults"] = engine.fault_report()
    finally:
        engine.stop()
    json_path, png_path = callcenter.write(report, out, name)
    print()
    print(callcenter.summary_table(report))
    print_faults(report["faults"])
    print()
    print(f"Report: {json_path}")
    print(f"Chart:  {png_path}")
    print(f"Function logs: {out / f'{name}.functions.log'}")
    return 0


def scenario_faults(args: argparse.Namespace, scenario: dict[str, Any]) -> Faults:
    """``--faults`` (a JSON object or file), else the scenario's ``"faults"`` object, else none."""
    if getattr(args, "faults", None):
        faults = Faults.parse(args.faults)
    else:
        faults = Faults.from_dict(scenario.get("faults") or {})
    if faults != Faults():
        print(f"Faults: {faults.describe()}")
    return faults


def print_faults(report: dict[str, Any]) -> None:
    """One line per fault that acted: what the emulator refused or delayed, TTL deletions, Lambda 429s."""
    if report["setting"] == Faults().to_dict():
        return
    print(f"Faults: {report['description']}")
    emulator = report.get("emulator") or {}
    for name, counts in (emulator.get("errors") or {}).items():
        if counts and name != "requests_seen":
            print(f"  {name}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for part in ("item_size", "index_lag"):
        if emulator.get(part):
            print(f"  {part}: " + ", ".join(f"{k} {v}" for k, v in sorted(emulator[part].items())))
    throttles = ", ".join(f"{k} {v}" for k, v in report["lambda_throttles"].items() if v) or "none"
    print(f"  TTL deletions: {report['ttl']['deleted']}; Lambda 429s: {throttles}")


def _line(text: str, tty: bool, final: bool = False) -> None:
    if tty:
        sys.stdout.write("\r\033[K" + text + ("\n" if final else ""))
    else:
        sys.stdout.write(text + "\n")
    sys.stdout.flush()


def invoke(args: argparse.Namespace) -> int:
    event = json.loads(Path(args.event).read_text()) if args.event != "-" else json.load(sys.stdin)
    running = None if args.one_shot else stack.read_discovery()
    if running and (args.param_overrides or args.faults or args.endpoint_url):
        print(f"note: a local stack runs at {running['endpoint_url']}, but --param-overrides/--faults/--endpoint-url "
              "ask for a one-shot engine: using one", file=sys.stderr)
    elif running:
        return invoke_running(running, args.function, event)
    engine = Engine(args.template, parse_overrides(args.param_overrides), endpoint_url=args.endpoint_url,
                    schedules=False, faults=Faults.parse(args.faults) if args.faults else None)
    try:
        engine.start()
        try:
            logical = engine.resolve_function(args.function)
        except KeyError as exc:
            print(exc.args[0], file=sys.stderr)
            return 2
        inv = engine.invoke(logical, event)
        limit = engine.pools[logical].limit
    finally:
        engine.stop()
    if inv.throttled:
        # What `aws lambda invoke` reports: nothing ran; the caller may retry later.
        kind = "reserved concurrency" if engine.functions[logical].reserved_concurrency is not None else \
            "local concurrency cap (unreserved functions)"
        print(f"--- throttled: HTTP 429 TooManyRequestsException: {logical} is at its {kind} ({limit}), "
              "so the synchronous invocation was refused at once, as Lambda refuses it; nothing ran. Retry later, "
              "or invoke it asynchronously (queued and retried by Lambda).", file=sys.stderr)
        print(json.dumps(inv.error, indent=2, default=str))
        return 1
    print(f"--- logs of {logical} (request {inv.request_id}, {inv.duration * 1000:.0f} ms"
          f"{', cold start' if inv.cold_start else ''})")
    for line in inv.logs:
        print(line)
    print("--- result" if inv.ok else "--- error")
    print(json.dumps(inv.result if inv.ok else inv.error, indent=2, default=str))
    return 0 if inv.ok else 1


def invoke_running(running: dict[str, Any], function: str, event: Any) -> int:
    """Invoke through the running stack's Lambda API: the function sees the stack's tables as they are now."""
    url = f"{running['endpoint_url']}/2015-03-31/functions/{function}/invocations"
    request = urllib.request.Request(url, data=json.dumps(event).encode(), method="POST", headers={
        "Content-Type": "application/json", "X-Amz-Invocation-Type": "RequestResponse", "X-Local-Full-Logs": "1"})
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=960) as response:
            body, headers = response.read(), response.headers
    except urllib.error.HTTPError as exc:
        answer = json.loads(exc.read() or b"{}")
        if exc.code == 429:
            print(f"--- throttled: HTTP 429 TooManyRequestsException: {function} is at its reserved concurrency in the "
                  f"running stack ({answer.get('Reason')}); nothing ran. Retry later.", file=sys.stderr)
        else:
            print(f"--- HTTP {exc.code} {exc.headers.get('x-amzn-ErrorType')}: {answer.get('message')}", file=sys.stderr)
        return 1 if exc.code == 429 else 2
    except urllib.error.URLError as exc:
        print(f"the local stack at {running['endpoint_url']} did not answer ({exc.reason}); is it still up?", file=sys.stderr)
        return 2
    print(f"--- logs of {function} in the local stack at {running['endpoint_url']} (request "
          f"{headers.get('x-amzn-RequestId')}, {(time.monotonic() - started) * 1000:.0f} ms)")
    logs = base64.b64decode(headers.get("X-Amz-Log-Result") or "").decode(errors="replace")
    if logs:
        print(logs)
    failed = headers.get("X-Amz-Function-Error")
    print("--- error" if failed else "--- result")
    print(json.dumps(json.loads(body or b"null"), indent=2, default=str))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local", description="Run the SAM app on the local engine.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--template", default=str(REPO / "template.yaml"))
    common.add_argument("--param-overrides", nargs="*", default=[], metavar="Name=Value")
    common.add_argument("--endpoint-url", default=None, help="use this AWS endpoint instead of the embedded emulator")
    common.add_argument("--faults", default=None, metavar="JSON|FILE",
                        help='faults to inject, e.g. \'{"seed": 7, "sns_publish_errors": {"share": 0.2}}\' '
                             "(docs/local-engine.md#faults)")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", parents=[common], help="run a scenario end to end and write a report and a chart")
    d.add_argument("--scenario", default="steady", help="steady, overload, burst, callcenter, or a path to a scenario .json")
    d.add_argument("--out", default="reports")
    i = sub.add_parser("invoke", parents=[common], help="invoke one function once with an event file")
    i.add_argument("function", help="logical id (ProcessTasksFunction), code directory (process_tasks) or name")
    i.add_argument("event", help="event JSON file, or - for stdin")
    i.add_argument("--one-shot", action="store_true",
                   help="always start a fresh engine, even when a local stack is up (the default is to use it)")
    u = sub.add_parser("up", parents=[common], help="start the local stack and keep it running (Ctrl-C stops it)")
    u.add_argument("--port", type=int, default=stack.DEFAULT_PORT, help=f"the endpoint's port (default {stack.DEFAULT_PORT})")
    u.add_argument("--persist", default=None, metavar="DIR",
                   help="keep the tables' items and the queues' messages in DIR between runs (docs/local-engine.md)")
    u.add_argument("--discovery", default=None, metavar="FILE",
                   help=f"where to write the discovery record (default ${stack.DISCOVERY_ENV}, else .taskq/local-stack.json)")
    sub.add_parser("down", help="stop the running local stack (it saves its state first)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "up":
            if args.endpoint_url:
                raise SystemExit("up runs its own emulator: --endpoint-url does not apply")
            # The local stack keeps its demo behaviour (the schedule on, one worker): local/scenarios/demo_defaults.py.
            return stack.up(args.template, {**LOCAL_STACK, **parse_overrides(args.param_overrides)}, args.port, args.persist,
                            Faults.parse(args.faults) if args.faults else None,
                            Path(args.discovery) if args.discovery else None)
        if args.command == "down":
            return stack.down()
        return demo(args) if args.command == "demo" else invoke(args)
    except TemplateError as exc:
        print(f"template error: {exc}", file=sys.stderr)
        return 2
    except FaultsError as exc:
        print(f"faults: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
