"""How many Lambda invocations a design makes per task: a small discrete-event simulation of the wiring.

Modelled, in virtual time (no emulator, no real code), for the product and for the seed LIFO demo:

- **arrivals**: Poisson at ``rate`` tasks/s (seeded), one table INSERT each;
- **the product's start for new work** (ProcessTasks' ``TaskStream`` event, template.yaml): the mapping passes the
  INSERTs of PENDING tasks; with no batching window a batch of up to ``stream_batch_size`` records goes at each of
  its polls (4 a second), up to ``stream_parallel`` (ParallelizationFactor) batches of the shard in flight, records
  older than ``stream_max_record_age_seconds`` skipped. Each batch is one ProcessTasks invocation (the worker below)
  that is handed the batch's tasks by name; the batch stays in flight until that invocation returns;
- **the seed's Trigger**: every stream record (no filter), batches of ``batch_size`` gathered until full or
  ``window_seconds`` after the first, one batch in flight; one wake-up on WorkerWakeUpTopic per batch holding an
  INSERT, and one per tail call it receives on TriggerTopic;
- **the product's Trigger**: its safety-net schedule only (every ``SafetyNetScheduleRate``): lease recovery and a
  claimable check of each queue (``SAFETY_NET_QUERIES`` queries, measured), a wake-up on WorkerWakeUpTopic for a
  queue with claimable work;
- **SNS -> ProcessTasks**: asynchronous invocations. With a reserved concurrency (the seed's 1, the product's
  ``ProcessTasksConcurrency`` when set; unset by default) a wake-up that finds every allowed worker running is
  throttled and retried after 1, 2, 4, ... s (at most 5 min apart) until it is older than the function's
  ``MaximumEventAgeInSeconds`` (product 300 s, seed 60 s), then dropped;
- **the product's worker** (``taskqueue.work.worker``, request latency ``request_seconds`` each): reads the queue's
  record (the pause check, again every PAUSE_CHECK_SECONDS while it runs); claims the tasks its batch names first,
  newest first, without a look (a named task no longer waiting costs its refused claim; a batch older than
  OLD_BATCH_SECONDS reads its tasks first, one request, and claims only those still waiting); then looks at the
  index (one query) and claims what it shows while it has a free runner slot and time before its budget; takes a
  running-limit slot (one write) the first time a claim needs one and keeps it until the invocation ends (one write
  to free it); the running limit (the template's default: ``runner_capacity``, queue-wide) is shared by every
  worker, and a run that finds every slot held by others with nothing of its own running ends; while its tasks run
  and a look finds nothing, it looks again when one ends, at least every IDLE_POLL_SECONDS; it ends at a look that
  finds nothing claimable while nothing of its own runs, or at its budget, where it checks for claimable work (one
  query) and tail-calls (one SNS publish on WorkerWakeUpTopic) if some remains; the seed reads a page of 10, starts
  one task every 200 ms, bounces a task when the runner is full, waits for the page to settle and 500 ms more,
  stops at an empty page or after 59 s (tail call);
- **the runner**: ``runner_capacity`` tasks at once, ``runner_seconds`` each (0 = a runner that keeps up); a task
  holds its runner slot from its claim's answer until its runner returns, and its outcome is written (one request)
  while the slot serves the next claim.

Every claim records its task's wait from creation (create -> first claim), in virtual seconds.

Template values (stream batch, parallelization, record age, safety net, budget, page size, concurrency, event age,
memory) come from template.yaml (``bench.common.template_values``); the worker's pauses from its modules; the
seed's from its own template as DESIGN.md and its article describe it. Durations feed Lambda GB-seconds in the
dollar model; they are the model's, not a measurement on AWS. The run also returns a *trace* (arrival times,
wake-up invocation starts, safety-net ticks, stream batches with the arrivals they name) that
``bench/lifo_runs.py`` replays with the real code to measure read and write units.

Over 400 lines: one discrete-event simulation (its events, the two designs' wiring); its parts share the event
loop's state (the pending tasks, the running limit, the invocations in flight), so they stay in one module.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.common import percentile
from taskqueue.work.record_view import PAUSE_CHECK_SECONDS
from taskqueue.work.worker import IDLE_POLL_SECONDS, LOST_ROUND_PAUSE_SECONDS

# functions/process_tasks/app.py's OLD_BATCH_SECONDS: a batch whose oldest record is older reads its tasks first.
OLD_BATCH_SECONDS = 5.0
# The safety net's run on the template's two queues: its queries on an idle stack (measured with the cost meter,
# bench/idle_cost.py: 14 a run).
SAFETY_NET_QUERIES = 14


@dataclass(frozen=True)
class DesignModel:
    name: str
    safety_net_seconds: float | None
    worker_max_event_age_seconds: float
    budget_seconds: float
    page_size: int
    runner_capacity: int
    worker_memory_mb: int
    trigger_memory_mb: int
    seed_loop: bool  # the seed: Trigger on every stream record, its page loop (200 ms stagger, 500 ms pause, bounce)
    worker_concurrency: int | None = None  # reserved concurrency of the worker function (None: none)
    # The seed's Trigger mapping (no filter: every record).
    batch_size: int = 10
    window_seconds: float = 10.0
    stagger_seconds: float = 0.2
    pause_seconds: float = 0.5
    # The product: ProcessTasks' TaskStream mapping and its queue-wide running limit.
    stream_batch_size: int = 100
    stream_parallel: int = 1  # the mapping's ParallelizationFactor: batches of the shard processed at once
    stream_max_record_age_seconds: float | None = None  # the mapping skips older records (None: never)
    running_limit: int | None = None  # slots leased until each invocation's end (None: no limit)


def product_model(values: Any) -> DesignModel:
    """The product as template.yaml configures it (``values``: bench.common.TemplateValues)."""
    return DesignModel(
        name="product",
        safety_net_seconds=values.safety_net_seconds,
        worker_max_event_age_seconds=values.worker_max_event_age_seconds,
        budget_seconds=values.time_budget_seconds,
        page_size=values.page_size,
        runner_capacity=values.runner_capacity,
        worker_memory_mb=values.worker_memory_mb,
        trigger_memory_mb=values.trigger_memory_mb,
        seed_loop=False,
        worker_concurrency=values.worker_concurrency,
        stream_batch_size=values.stream_batch_size,
        stream_parallel=values.stream_parallel,
        stream_max_record_age_seconds=values.stream_max_record_age_seconds,
        running_limit=values.runner_capacity,  # WorkRunningLimit's default (empty): RunnerCapacity, queue-wide
    )


def seed_model() -> DesignModel:
    """The seed LIFO demo's template: batch 10, window 10 s, no filter, wake-ups expire after 60 s, no
    safety net, 59 s loop, page 10, runner 3 at a time, reserved concurrency 1; SAM's default 128 MB."""
    return DesignModel(
        name="seed",
        safety_net_seconds=None,
        worker_max_event_age_seconds=60.0,
        budget_seconds=59.0,
        page_size=10,
        runner_capacity=3,
        worker_memory_mb=128,
        trigger_memory_mb=128,
        seed_loop=True,
        worker_concurrency=1,
        batch_size=10,
        window_seconds=10.0,
    )


@dataclass(frozen=True)
class Platform:
    """What AWS does, as the model assumes it (documented behaviour; latencies are assumptions)."""

    poll_seconds: float = 0.25  # the stream poller reads a shard 4 times a second
    sns_delivery_seconds: float = 0.05
    request_seconds: float = 0.005  # one DynamoDB request
    publish_seconds: float = 0.02  # one SNS Publish from inside a function
    trigger_base_seconds: float = 0.01  # Trigger's own work per invocation
    worker_base_seconds: float = 0.01
    throttle_first_retry_seconds: float = 1.0
    throttle_max_retry_seconds: float = 300.0


@dataclass
class ModelResult:
    design: str
    rate: float
    tasks: int
    completed: int
    bounces: int
    seconds: float  # virtual time until the last task finished
    invocations: Counter = field(default_factory=Counter)  # function -> count
    trigger_sources: Counter = field(default_factory=Counter)  # stream / tail-call / safety-net
    throttles: int = 0
    dropped_wakeups: int = 0
    publishes: Counter = field(default_factory=Counter)  # topic -> count
    gb_seconds: Counter = field(default_factory=Counter)  # function -> GB-s (per-invocation ms rounded up)
    stream_records: int = 0
    delivered_records: int = 0
    worker_starts: list[float] = field(default_factory=list)  # wake-up (SNS) invocations of the worker
    safety_net_ticks: list[float] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)
    claim_waits: list[float] = field(default_factory=list)  # create -> first claim of every task (virtual s)
    intervals: list[tuple[float, float]] = field(default_factory=list)  # every invocation's (start, end), any function
    # Stream batches: (virtual time the invocation starts, 0-based indices in ``arrivals`` of the tasks it names).
    stream_starts: list[tuple[float, list[int]]] = field(default_factory=list)
    # What each ProcessTasks invocation was: "stream batch" or "wake-up" (SNS: a tail call, the safety net's).
    worker_sources: Counter = field(default_factory=Counter)
    # How product invocations ended (empty / budget / limit) and their claims: named ones, refused named ones.
    worker_ends: Counter = field(default_factory=Counter)
    claims: Counter = field(default_factory=Counter)
    skipped_stream_records: int = 0  # records the mapping skipped for their age, never delivered

    def per_thousand(self, function: str) -> float:
        return 1000.0 * self.invocations[function] / self.tasks

    def summary(self) -> dict[str, Any]:
        return {
            "design": self.design,
            "rate": self.rate,
            "tasks": self.tasks,
            "completed": self.completed,
            "seconds": self.seconds,
            "trigger_per_1000": self.per_thousand("Trigger"),
            "worker_per_1000": self.per_thousand("ProcessTasks"),
            "total_per_1000": 1000.0 * sum(self.invocations.values()) / self.tasks,
            "trigger_sources": dict(self.trigger_sources),
            "throttles_per_1000": 1000.0 * self.throttles / self.tasks,
            "dropped_wakeups": self.dropped_wakeups,
            "publishes_per_1000": 1000.0 * sum(self.publishes.values()) / self.tasks,
            "gb_seconds_per_1000": {k: 1000.0 * v / self.tasks for k, v in self.gb_seconds.items()},
            "bounces_per_1000": 1000.0 * self.bounces / self.tasks,
            "stream_records_per_task": self.stream_records / self.tasks,
            # How long the last task took to finish, over how long the tasks took to arrive: ~1 when the
            # design keeps up, more when its own loop is the bottleneck.
            "finish_over_arrival": self.seconds / self.arrivals[-1] if self.arrivals else float("nan"),
            "claim_wait_p50": percentile(self.claim_waits, 50),
            "claim_wait_p95": percentile(self.claim_waits, 95),
            "claim_wait_max": max(self.claim_waits, default=float("nan")),
            "peak_concurrency": peak_concurrency(self.intervals),
            "worker_sources_per_1000": {k: 1000.0 * v / self.tasks for k, v in self.worker_sources.items()},
            "worker_ends_per_1000": {k: 1000.0 * v / self.tasks for k, v in self.worker_ends.items()},
            "claims_per_task": {k: v / self.tasks for k, v in self.claims.items()},
        }


def peak_concurrency(intervals: list[tuple[float, float]]) -> int:
    """The most invocations (of any function) running at one instant: what Lambda's account concurrency must allow."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals], key=lambda e: (e[0], e[1]))
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


class _Sim:
    def __init__(self, model: DesignModel, platform: Platform, rate: float, tasks: int, runner_seconds: float,
                 seed: int) -> None:
        self.m = model
        self.p = platform
        self.rate = rate
        self.n = tasks
        self.runner_seconds = runner_seconds
        self.rng = random.Random(seed)
        self.events: list[tuple[float, int, Callable[[], None]]] = []
        self.seq = itertools.count()
        self.now = 0.0
        self.pending: list[float] = []  # creation times of PENDING tasks (LIFO: newest last)
        self.pending_set: set[float] = set()
        self.created = 0
        self.completed = 0
        self.last_done = 0.0
        self.workers = 0  # worker invocations running (any source)
        # The seed: Trigger's stream records waiting for a batch, its one batch in flight; its runner's tasks.
        self.buffer: list[str] = []
        self.first_at: float | None = None
        self.esm_busy = False
        self.seed_claimed: set[float] = set()  # creation times of the seed's tasks claimed at least once
        # The product: TaskStream's records (arrival indices) waiting for a batch and its batches in flight; the
        # running limit's slots held (by any invocation) and the runs waiting for a slot or a task's end.
        self.stream_buffer: list[int] = []
        self.stream_in_flight = 0
        self.slots_held = 0
        self.result = ModelResult(model.name, rate, tasks, 0, 0, 0.0)

    # ---- plumbing ---------------------------------------------------------------------------------

    def at(self, t: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self.events, (t, next(self.seq), fn))

    def done(self) -> bool:
        return self.created == self.n and self.completed == self.n

    def run(self) -> ModelResult:
        t = 0.0
        for _ in range(self.n):
            t += self.rng.expovariate(self.rate)
            self.at(t, self.arrive)
        if self.m.seed_loop:
            self.at(self.p.poll_seconds, self.poll)
        else:
            self.at(self.p.poll_seconds * 1.5, self.poll_stream)
        if self.m.safety_net_seconds:
            self.at(self.m.safety_net_seconds, self.safety_net)
        limit = t + 24 * 3600
        while self.events:
            self.now, _, fn = heapq.heappop(self.events)
            if self.now > limit:
                raise RuntimeError(f"{self.m.name}: the model did not drain within a day of virtual time")
            fn()
            idle = not (self.workers or self.esm_busy or self.stream_in_flight or self.stream_buffer)
            if self.done() and idle:
                break
        self.result.completed = self.completed
        self.result.seconds = self.last_done
        return self.result

    def record(self, kind: str) -> None:
        """A stream record of a task write; the seed's Trigger sees every one."""
        self.result.stream_records += 1
        if self.m.seed_loop:
            if not self.buffer:
                self.first_at = self.now
            self.buffer.append(kind)

    def invoked(self, function: str, seconds: float, memory_mb: int, source: str | None = None,
                start: float | None = None) -> None:
        """An invocation of ``seconds`` from ``start`` (default now: the callers that know its length as it begins)."""
        begun = self.now if start is None else start
        self.result.intervals.append((begun, begun + seconds))
        self.result.invocations[function] += 1
        if source:
            self.result.trigger_sources[source] += 1
        self.result.gb_seconds[function] += math.ceil(seconds * 1000) / 1000 * memory_mb / 1024

    def now_plus(self, seconds: float) -> None:
        """Time the current handler spends on requests (the handler runs on, nothing else happens meanwhile)."""
        self.now += seconds

    # ---- arrivals, the seed's stream and Trigger, the product's safety net ------------------------------------

    def arrive(self) -> None:
        if not self.m.seed_loop:
            self.stream_buffer.append(self.created)  # TaskStream passes INSERTs of PENDING tasks
        self.created += 1
        self.pending.append(self.now)
        self.pending_set.add(self.now)
        self.result.arrivals.append(self.now)
        self.record("INSERT")

    def poll(self) -> None:
        """The seed's Trigger mapping at a poll: a batch when full or its window has passed, one in flight."""
        if not self.done():
            self.at(self.now + self.p.poll_seconds, self.poll)
        if self.esm_busy or not self.buffer:
            return
        assert self.first_at is not None
        if len(self.buffer) < self.m.batch_size and self.now - self.first_at < self.m.window_seconds:
            return
        batch, self.buffer = self.buffer[: self.m.batch_size], self.buffer[self.m.batch_size:]
        self.first_at = self.now if self.buffer else None
        self.result.delivered_records += len(batch)
        self.esm_busy = True
        wakes = "INSERT" in batch
        duration = self.p.trigger_base_seconds + (self.p.publish_seconds if wakes else 0.0)
        self.invoked("Trigger", duration, self.m.trigger_memory_mb, "stream")

        def finish() -> None:
            self.esm_busy = False
            if wakes:
                self.wake()

        self.at(self.now + duration, finish)

    def wake(self) -> None:
        """A wake-up on WorkerWakeUpTopic: SNS invokes the worker asynchronously."""
        self.result.publishes["WorkerWakeUpTopic"] += 1
        received = self.now + self.p.sns_delivery_seconds
        self.at(received, lambda: self.attempt(received, 0))

    def seed_tail_call(self) -> None:
        """The seed's worker publishes on TriggerTopic; Trigger runs and wakes the worker."""
        self.result.publishes["TriggerTopic"] += 1

        def trigger() -> None:
            duration = self.p.trigger_base_seconds + self.p.publish_seconds
            self.invoked("Trigger", duration, self.m.trigger_memory_mb, "tail-call")
            self.at(self.now + duration, self.wake)

        self.at(self.now + self.p.sns_delivery_seconds, trigger)

    def safety_net(self) -> None:
        """The product's schedule: recovery and a claimable check of each queue; a wake-up if work is claimable."""
        if not self.done():
            self.at(self.now + (self.m.safety_net_seconds or 60.0), self.safety_net)
        self.result.safety_net_ticks.append(self.now)
        wakes = bool(self.pending)
        duration = self.p.trigger_base_seconds + SAFETY_NET_QUERIES * self.p.request_seconds + (
            self.p.publish_seconds if wakes else 0.0)
        self.invoked("Trigger", duration, self.m.trigger_memory_mb, "safety-net")
        if wakes:
            self.at(self.now + duration, self.wake)

    # ---- the worker's asynchronous invocations ------------------------------------------------------

    def attempt(self, received: float, throttles: int) -> None:
        limit = self.m.worker_concurrency
        if limit is not None and self.workers >= limit:
            self.result.throttles += 1
            delay = min(self.p.throttle_first_retry_seconds * 2 ** throttles, self.p.throttle_max_retry_seconds)
            if self.now + delay - received > self.m.worker_max_event_age_seconds:
                self.result.dropped_wakeups += 1
                return
            self.at(self.now + delay, lambda: self.attempt(received, throttles + 1))
            return
        self.workers += 1
        self.result.worker_starts.append(self.now)
        self.result.worker_sources["wake-up"] += 1
        if self.m.seed_loop:
            self.seed_invocation(self.now)
        else:
            _Run(self, self.now, []).begin()

    def take(self, created: float) -> None:
        self.pending.remove(created)
        self.pending_set.discard(created)
        self.result.claim_waits.append(self.now - created)

    # ---- the product's stream batches ----------------------------------------------------------------

    def poll_stream(self) -> None:
        """TaskStream at a poll: no window, so whatever waits goes (up to a batch), ``stream_parallel`` in flight."""
        if not self.done() or self.stream_buffer or self.stream_in_flight:
            self.at(self.now + self.p.poll_seconds, self.poll_stream)
        age = self.m.stream_max_record_age_seconds
        if age is not None:
            while self.stream_buffer and self.result.arrivals[self.stream_buffer[0]] < self.now - age:
                self.stream_buffer.pop(0)
                self.result.skipped_stream_records += 1
        while self.stream_buffer and self.stream_in_flight < self.m.stream_parallel:
            limit = self.m.worker_concurrency
            if limit is not None and self.workers >= limit:
                return  # throttled: the mapping tries the batch again at a later poll
            size = self.m.stream_batch_size
            batch, self.stream_buffer = self.stream_buffer[:size], self.stream_buffer[size:]
            self.result.delivered_records += len(batch)
            self.stream_in_flight += 1
            self.workers += 1
            self.result.stream_starts.append((self.now, list(batch)))
            self.result.worker_sources["stream batch"] += 1
            _Run(self, self.now, batch).begin()


    def end_seed_invocation(self, start: float, tail: bool) -> None:
        self.invoked("ProcessTasks", self.now - start + self.p.worker_base_seconds, self.m.worker_memory_mb, start=start)
        self.workers -= 1
        if tail:
            self.seed_tail_call()

    # The seed's processTasks: while under 59 s, a page of 10 newest PENDING; task i starts 200*i ms later:
    # claim, runner (bounce if full), finish; the page waits for all of its tasks, then 500 ms.
    def seed_invocation(self, start: float) -> None:
        req = self.p.request_seconds
        active = [0]
        claimed = self.seed_claimed

        def page() -> None:
            reached = self.now - start >= self.m.budget_seconds
            self.now_plus(req)
            if not self.pending:
                return self.end_seed_invocation(start, tail=False)
            if reached:
                return self.end_seed_invocation(start, tail=True)
            batch = min(self.m.page_size, len(self.pending))
            taken = [self.pending.pop() for _ in range(batch)]  # newest first
            settled = [0]
            longest = [0.0]
            for i, created in enumerate(taken, start=1):
                t = self.now + i * self.m.stagger_seconds
                self.at(t, lambda created=created: one(created, settled, batch, longest))

        def one(created: float, settled: list[int], batch: int, longest: list[float]) -> None:
            self.now_plus(req)
            self.record("MODIFY")  # PENDING -> TAKEN
            if created not in claimed:  # create -> first claim (a bounced task is claimed again later)
                claimed.add(created)
                self.result.claim_waits.append(self.now - created)
            if active[0] >= self.m.runner_capacity:
                self.now_plus(req)
                self.record("MODIFY")  # TAKEN -> PENDING: the bounce
                self.result.bounces += 1
                # Back in place: it keeps its creation time, so it is among the newest again.
                self.pending.append(created)
                self.pending.sort()
                return settle(settled, batch)
            active[0] += 1

            def finished() -> None:
                active[0] -= 1
                self.now_plus(req)
                self.record("MODIFY")  # TAKEN -> SUCCESS
                self.completed += 1
                self.last_done = self.now
                settle(settled, batch)

            self.at(self.now + self.runner_seconds, finished)

        def settle(settled: list[int], batch: int) -> None:
            settled[0] += 1
            if settled[0] == batch:
                self.at(self.now + self.m.pause_seconds, page)

        page()


class _Run:
    """One invocation of the product's worker (``Worker.run``): ``named`` are the arrival indices its stream batch
    names (none for a wake-up)."""

    def __init__(self, sim: _Sim, start: float, named: list[int]) -> None:
        self.s = sim
        self.start = start
        self.from_stream = bool(named)
        self.deadline = start + sim.m.budget_seconds
        arrivals = sim.result.arrivals
        old = bool(named) and start - arrivals[min(named)] > OLD_BATCH_SECONDS
        self.named_read_first = old
        self.named = sorted((arrivals[i] for i in named), reverse=True)  # newest first
        self.first_round = True
        self.slots = 0  # running-limit slots this run holds (until it ends)
        self.running = 0  # its tasks whose runner has not returned
        self.recording = 0  # its tasks whose outcome is being written
        self.waiter: tuple[int, Callable[[], None]] | None = None
        self.next_pause_check = 0.0

    def begin(self) -> None:
        s, req = self.s, self.s.p.request_seconds
        s.now_plus(req)  # the queue's record (the pause check), strongly consistent
        self.next_pause_check = s.now + PAUSE_CHECK_SECONDS
        if self.named and self.named_read_first:  # an old batch: its tasks read first (one BatchGetItem)
            s.now_plus(req)
            self.named = [c for c in self.named if c in s.pending_set]
        self.step()

    def step(self) -> None:
        s, m, req = self.s, self.s.m, self.s.p.request_seconds
        if s.now >= self.deadline:
            return self.drain("budget")
        free = m.runner_capacity - self.running
        if free <= 0:
            return self.wait(self.step, IDLE_POLL_SECONDS)  # the first of its tasks to end
        if s.now >= self.next_pause_check:
            s.now_plus(req)
            self.next_pause_check = s.now + PAUSE_CHECK_SECONDS
        if self.first_round and self.named:
            candidates = self.named[:free]
        else:
            s.now_plus(req)  # a look: one query of the ready partition
            shown = list(reversed(s.pending[-max(m.page_size, free):]))  # newest first
            seen = set(shown)
            # Named tasks not tried yet are merged in: one no longer waiting is claimed anyway (and refused).
            candidates = sorted(shown + [c for c in self.named if c not in seen], reverse=True)
        self.first_round = False
        if not candidates:
            if self.running or self.recording:
                return self.wait(self.step, IDLE_POLL_SECONDS)
            return self.drain("empty")
        wanted = min(free, len(candidates))
        if m.running_limit is not None:
            spare = self.slots - self.running
            new = max(0, wanted - spare)
            if new:
                got = min(new, m.running_limit - s.slots_held)
                s.now_plus(req * max(1, new))  # a write per slot tried (and a read of the slots when short)
                self.slots += got
                s.slots_held += got
            free = min(free, self.slots - self.running)
            if free <= 0:
                if self.running or self.recording:
                    return self.wait(self.step, IDLE_POLL_SECONDS)
                return self.drain("limit")
        claimed = 0
        for created in candidates:
            if free == 0:
                break
            s.now_plus(req)  # one conditional claim
            if created in self.named:
                self.named.remove(created)
                s.result.claims["named"] += 1
            if created not in s.pending_set:
                s.result.claims["refused"] += 1
                continue
            s.take(created)
            s.record("MODIFY")
            free -= 1
            claimed += 1
            self.run_task()
        if claimed == 0 and not self.named and not self.running:
            return s.at(s.now + 0.75 * LOST_ROUND_PAUSE_SECONDS, self.step)
        s.at(s.now, self.step)

    def run_task(self) -> None:
        """A claimed task: it holds a runner slot until its runner returns, then its outcome is written (one request)
        while the slot serves the next claim."""
        s = self.s
        self.running += 1
        self.recording += 1

        def ran() -> None:
            self.running -= 1
            self.wake()
            s.at(s.now + s.p.request_seconds, recorded)

        def recorded() -> None:
            self.recording -= 1
            s.completed += 1
            s.last_done = s.now
            s.record("MODIFY")
            self.wake()

        s.at(s.now + self.runner_seconds(), ran)

    def runner_seconds(self) -> float:
        return self.s.runner_seconds

    def wake(self) -> None:
        if self.waiter is not None:
            _, then = self.waiter
            self.waiter = None
            self.s.at(self.s.now, then)

    def wait(self, then: Callable[[], None], at_most: float) -> None:
        """``then`` once one of its tasks ends (or after ``at_most`` s)."""
        token = next(self.s.seq)
        self.waiter = (token, then)

        def timeout() -> None:
            if self.waiter is not None and self.waiter[0] == token:
                self.waiter = None
                then()

        self.s.at(self.s.now + at_most, timeout)

    def drain(self, why: str) -> None:
        """Claiming is over: its tasks finish, then its slots go back (a write each); at the budget, a check for work
        left (one query) and a tail call if some is claimable."""
        s, req = self.s, self.s.p.request_seconds
        if self.running or self.recording:
            return self.wait(lambda: self.drain(why), IDLE_POLL_SECONDS)
        s.now_plus(req * self.slots)
        s.slots_held -= self.slots
        self.slots = 0
        tail = False
        if why == "budget":
            s.now_plus(req)
            tail = bool(s.pending)
            if tail:
                s.now_plus(s.p.publish_seconds)
        s.result.worker_ends[why] += 1
        s.invoked("ProcessTasks", s.now - self.start + s.p.worker_base_seconds, s.m.worker_memory_mb, start=self.start)
        s.workers -= 1
        if self.from_stream:
            s.stream_in_flight -= 1  # the mapping's batch returns: the next may go
        if tail:
            s.wake()


def simulate(model: DesignModel, rate: float, tasks: int, *, runner_seconds: float = 0.0, seed: int = 1,
             platform: Platform | None = None) -> ModelResult:
    """Run the model for ``tasks`` Poisson arrivals at ``rate`` tasks/s until every task is done."""
    return _Sim(model, platform or Platform(), rate, tasks, runner_seconds, seed).run()
