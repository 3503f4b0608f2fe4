"""What `make bench` runs: the rates, shard counts and run sizes (``Plan``), shared by bench/run.py and bench/report.py."""

from __future__ import annotations

RATES = (1.0, 10.0, 100.0)
SHARDS = (1, 4, 16, 24, 32, 64)
TARGET_RATE = 10_000
# The figures of this project's last full `make bench` before one way to start work (the producers' handshake, a
# watcher that lingered, claim lanes): $ per million tasks, held beside this run's.
REFERENCE_RUN = "make bench of 2026-12-04 21:38 UTC, results in commit 15a755f"
REFERENCE = {"on-demand@1": 4.77, "on-demand@10": 3.65, "on-demand@100": 3.25, "provisioned@1": 2.13,
             "provisioned@10": 1.66, "provisioned@100": 1.36}


class Plan:
    def __init__(self, quick: bool) -> None:
        self.quick = quick
        self.model_tasks = 600 if quick else 3000
        self.model_seeds = [1] if quick else [1, 2, 3]
        self.idle_tasks = 40 if quick else 120
        self.seeds = [1] if quick else [1, 2, 3]
        self.overload_seconds = 180.0 if quick else 600.0
        self.overload_ttl = 120
        self.scale = 1 / 15
        self.agents, self.calls = (20, 50) if quick else (60, 150)
        self.matcher_repeat = 1 if quick else 3
        # Enough idle agents that helpers take part (MATCH_HELPER_MIN_AGENTS, 100): the shared plan at 8 matchers.
        self.shared_agents, self.shared_calls = (120, 300) if quick else (300, 750)
        self.local_tasks, self.local_repeat = (30, 1) if quick else (100, 3)
        self.worker_tasks = 60 if quick else 150

    def describe(self) -> list[str]:
        return [
            f"invocation model: {self.model_tasks} Poisson arrivals per run, seeds {self.model_seeds}",
            f"units, runner keeping up: {self.idle_tasks} tasks per run at {', '.join(f'{r:g}' for r in RATES)} tasks/s, seeds {self.seeds}",
            f"overload: {self.overload_seconds:.0f} virtual s of arrivals at 3x the runner's capacity, TTL "
            f"{self.overload_ttl} s, clock scaled {self.scale:.4f} (15 virtual s = 1 real s), seeds {self.seeds}",
            f"matcher: {self.agents} agents, {self.calls} callers, 1/4/8/16 matchers, {self.matcher_repeat} repetitions, "
            f"product and seed runs alternating; with helpers taking part: {self.shared_agents} agents, "
            f"{self.shared_calls} callers, 8 matchers, {self.matcher_repeat} repetitions",
            f"concurrent workers: a backlog of {self.worker_tasks} tasks, 1 and 8 worker invocations, seeds {self.seeds}",
            f"overhead: {self.local_tasks} tasks per run, {self.local_repeat} runs (after a warm-up run)",
        ]


