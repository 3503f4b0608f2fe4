"""What an idle local stack asks of its emulator, and the CPU it burns, with the change feed and without it.

    .venv/bin/python bench/local_idle.py              # 20 s idle each way, the e2e tests' settings
    .venv/bin/python bench/local_idle.py --seconds 60

Starts the local engine (the template's defaults, the e2e tests' fast settings and time scale), lets it settle, then
counts the emulator's requests and the CPU of the engine's process and of its children (the emulator, the function
sandboxes) over the idle period: once with the pollers following the emulator's changes
(local/delivery/change_feed.py) and once asking at their cadence, as before (``Engine(change_feed=False)``).
CPU from ``ps`` has a resolution of 1 s per process.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from local.engine.engine import REPO, Engine  # noqa: E402
from tests.e2e.conftest import FAST, TIME_SCALE  # noqa: E402


def children_cpu_seconds() -> int:
    """CPU seconds (user + system) of every process below this one, from ps."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,cputimes="], capture_output=True, text=True, check=True).stdout
    below: dict[str, list[tuple[str, int]]] = {}
    for line in out.splitlines():
        pid, ppid, seconds = line.split()
        below.setdefault(ppid, []).append((pid, int(seconds)))
    total, todo = 0, [str(os.getpid())]
    while todo:
        for pid, seconds in below.get(todo.pop(), []):
            total += seconds
            todo.append(pid)
    return total


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def idle(seconds: float, change_feed: bool) -> dict[str, float]:
    engine = Engine(REPO / "template.yaml", dict(FAST), time_scale=TIME_SCALE, schedules=False, ttl_lateness=1.0,
                    ttl_interval=0.5, change_feed=change_feed).start()
    try:
        engine.wait_for(lambda: not engine.busy(), timeout=10)
        time.sleep(2.0)
        requests, children, own = engine.emulator.requests, children_cpu_seconds(), own_cpu_seconds()
        time.sleep(seconds)
        return {"requests_per_second": (engine.emulator.requests - requests) / seconds,
                "children_cpu_s": children_cpu_seconds() - children, "engine_cpu_s": own_cpu_seconds() - own}
    finally:
        engine.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    print(f"| {args.seconds:.0f} s idle | requests/s | CPU of the emulator and sandboxes (s) | CPU of the engine (s) |")
    print("|---|---|---|---|")
    for label, feed in (("pollers ask at their cadence (before)", False), ("pollers follow the change feed", True)):
        figures = idle(args.seconds, feed)
        print(f"| {label} | {figures['requests_per_second']:.1f} | {figures['children_cpu_s']:.0f} | "
              f"{figures['engine_cpu_s']:.1f} |")


if __name__ == "__main__":
    main()
