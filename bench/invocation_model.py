"""How many Lambda invocations a design makes per task: a small discrete-event simulation of the wiring.

Modelled, in virtual time (no emulator, no real code), for the product and for the seed LIFO demo:

- **arrivals**: Poisson at ``rate`` tasks/s (seeded), one table INSERT each;
- **the table's stream and its event source mapping**: every write of a task is a stream record; the
  mapping's filter drops what it does not pass *before* batching (the product passes INSERTs only, the seed
  passes everything: its Trigger filters in code); records are gathered until ``BatchSize`` or until
  ``MaximumBatchingWindowInSeconds`` after the first one, read by a poller 4 times a second, one batch in
  flight per shard (one shard: these rates never split a stream);
- **Trigger**: one invocation per batch. The seed publishes one wake-up on WorkerWakeUpTopic when the batch holds
  an INSERT, and one per tail call it receives on TriggerTopic. In the product the stream is a backstop of the
  wake-up handshake: Trigger wakes the worker only when no worker watches the queue and no wake-up is in flight
  (one consistent read); so does its safety-net schedule (every ``SafetyNetScheduleRate``);
- **the product's producers** (the wake-up handshake, docs/wakeups.md): after writing its task a producer touches
  the queue's record (one request); if no worker watches and no wake-up is in flight it claims the wake-up (one
  request) and publishes it on WorkerWakeUpTopic; a wake-up is in flight until a worker starts watching, or 10 s.
  With **stream starts** (issue 29, ``stream_starts``: ProcessTasksFunction has a DynamoDB event on the table's
  stream) producers do no handshake at all;
- **stream starts** (only with ``stream_starts``): a second mapping on the same stream invokes ProcessTasks itself:
  its own buffer of INSERTs, batch ``stream_batch_size`` (100), no window (a batch at each of its polls: 4 a second,
  half a poll out of phase with Trigger's poller, the mean of two independent pollers' phases), up to
  ParallelizationFactor (10) batches in flight, Trigger's filter passing none of these INSERTs, records older than ``stream_max_record_age_seconds`` skipped. Each batch is a ProcessTasks invocation
  (taskqueue.work.stream_start) that reads the queue's record (one request) and notes the batch in its arrival
  history (one per execution environment: the mapping's batches run one after another, so one history); it ends if
  a worker watches and is not stopping or a wake-up is in flight; when the history shows the queue busy
  (``BUSY_TASKS`` in ``BUSY_SECONDS``) and no watcher is stopping, or the running limit is full, it runs the regular
  worker invocation below (unless one runs already: then it ends); otherwise (the fast path) it takes running-limit
  slots (one request each), claims the batch's tasks by key, newest first (one request each, a lost claim too), runs
  them ``runner_capacity`` at a time, writes each outcome, frees its slots (one request each) and ends: no watch, no
  linger, no tail call. The running limit (the template's default: ``runner_capacity``, queue-wide) is shared with
  the watcher;
- **SNS -> ProcessTasks**: asynchronous invocations of a function with reserved concurrency 1: a wake-up
  that finds the worker (the watcher, begun by SNS or by a stream start) running is throttled and retried after 1,
  2, 4, ... s (at most 5 min apart) until it is older than the function's ``MaximumEventAgeInSeconds`` (product
  300 s, seed 60 s), then dropped;
- **the worker**, as each design's code behaves (request latency ``request_seconds`` each): the product
  starts watching its queue (one request), recovers leases, reads the ready and delayed partitions, claims while
  the runner has a free slot, completes; on an empty queue it lingers ``WorkerLingerSeconds``, reading the record
  every 0.5 s, and takes whatever arrives meanwhile; then stops (one conditional request, not before the index's
  lag allowance after the last write); at its budget it stops watching and tail-calls straight to
  WorkerWakeUpTopic if work remains (claiming the wake-up as a producer does); the seed reads a page of
  10, starts one task every 200 ms, bounces a task when the runner is full, waits for the page to settle and
  500 ms more, stops at an empty page or after 59 s (tail call);
- **the runner**: ``runner_capacity`` tasks at once, ``runner_seconds`` each (0 = a runner that keeps up).

Every claim records its task's wait from creation (create -> first claim), in virtual seconds.

Template values (batch size, window, safety net, budget, page size, concurrency, event age, memory, linger) come
from template.yaml (``bench.common.template_values``); the seed's from its own template as DESIGN.md and
its article describe it. Durations feed Lambda GB-seconds in the dollar model; they are the model's, not a
measurement on AWS. The run also returns a *trace* (arrival times, worker invocation starts, safety-net
ticks, stream starts with the arrivals their batch names) that ``bench/lifo_runs.py`` replays with the real code to
measure read and write units.

Over 400 lines: one discrete-event simulation (its events, the two designs' wiring, the wake-up handshake, the
stream starts); its parts share the event loop's state (the pending tasks, the watcher's flags, the running limit),
so they stay in one module.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.common import percentile
from taskqueue.core.record import poll_seconds
from taskqueue.work.worker import LEFTOVER_SECONDS

# A stream start's busy test: at least BUSY_TASKS tasks noted in its arrival history over the last BUSY_SECONDS
# make it run the regular worker. The product's own constants live in taskqueue/work/stream_start.py (issue 29).
BUSY_TASKS = 12
BUSY_SECONDS = 4.0


@dataclass(frozen=True)
class DesignModel:
    name: str
    passes_all_records: bool  # no filter on the stream mapping (the seed)
    batch_size: int
    window_seconds: float
    safety_net_seconds: float | None
    worker_max_event_age_seconds: float
    budget_seconds: float
    page_size: int
    runner_capacity: int
    worker_memory_mb: int
    trigger_memory_mb: int
    seed_loop: bool  # the seed's page loop (200 ms stagger, 500 ms pause, bounce when full)
    stagger_seconds: float = 0.2
    pause_seconds: float = 0.5
    # The product's wake-up handshake (False: the stream is the wake-up path, as before it).
    handshake: bool = False
    linger_seconds: float = 0.0
    linger_poll_seconds: float = 0.5
    index_lag_allowance_seconds: float = 1.0
    wake_in_flight_seconds: float = 10.0
    # Issue 29: producers skip their touch while the watcher looks at the index itself, so it stops in two steps
    # (``stopping`` set, then a last look the index's lag allowance later, then the conditional stop).
    two_phase_stop: bool = False
    # A look's tasks that its round could not claim (the run was full) serve the next claims for this long without a
    # new look (taskqueue.work.worker.LEFTOVER_SECONDS; 0: every claim round looks).
    leftover_seconds: float = 0.0
    # The linger's polls come sooner on a fast queue (taskqueue.core.handshake.poll_seconds); else every
    # ``linger_poll_seconds``.
    paced_polls: bool = False
    # Issue 29: the table's stream invokes ProcessTasks (a stream start per batch of INSERTs, no window) and producers
    # skip the wake-up handshake (bench.common.TemplateValues.stream_starts). The product only.
    stream_starts: bool = False
    stream_batch_size: int = 100
    stream_parallel: int = 1  # the mapping's ParallelizationFactor: batches of the shard processed at once
    stream_max_record_age_seconds: float | None = None  # the mapping skips older records (None: never)


def product_model(values: Any) -> DesignModel:
    """The product as template.yaml configures it (``values``: bench.common.TemplateValues)."""
    return DesignModel(
        name="product",
        passes_all_records=not values.insert_only_filter,
        batch_size=values.trigger_batch_size,
        window_seconds=values.trigger_window_seconds,
        safety_net_seconds=values.safety_net_seconds,
        worker_max_event_age_seconds=values.worker_max_event_age_seconds,
        budget_seconds=values.time_budget_seconds,
        page_size=values.page_size,
        runner_capacity=values.runner_capacity,
        worker_memory_mb=values.worker_memory_mb,
        trigger_memory_mb=values.trigger_memory_mb,
        seed_loop=False,
        handshake=True,
        linger_seconds=values.worker_linger_seconds,
        two_phase_stop=True,
        leftover_seconds=LEFTOVER_SECONDS,
        paced_polls=True,
        stream_starts=values.stream_starts,
        stream_batch_size=values.stream_start_batch_size,
        stream_parallel=values.stream_start_parallel,
        stream_max_record_age_seconds=values.stream_start_max_record_age_seconds,
    )


def seed_model() -> DesignModel:
    """The seed LIFO demo's template: batch 10, window 10 s, no filter, wake-ups expire after 60 s, no
    safety net, 59 s loop, page 10, runner 3 at a time; SAM's default 128 MB."""
    return DesignModel(
        name="seed",
        passes_all_records=True,
        batch_size=10,
        window_seconds=10.0,
        safety_net_seconds=None,
        worker_max_event_age_seconds=60.0,
        budget_seconds=59.0,
        page_size=10,
        runner_capacity=3,
        worker_memory_mb=128,
        trigger_memory_mb=128,
        seed_loop=True,
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
    worker_starts: list[float] = field(default_factory=list)
    safety_net_ticks: list[float] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)
    claim_waits: list[float] = field(default_factory=list)  # create -> first claim of every task (virtual s)
    handshake_requests: Counter = field(default_factory=Counter)  # producer touch / claim, worker watch / stop / poll
    intervals: list[tuple[float, float]] = field(default_factory=list)  # every invocation's (start, end), any function
    # Stream starts: (virtual time the invocation starts, 0-based indices in ``arrivals`` of the tasks its batch names).
    stream_starts: list[tuple[float, list[int]]] = field(default_factory=list)
    # What each ProcessTasks invocation was: "wake-up" (SNS), "stream: ended" (claimed nothing: a watcher has the tasks,
    # or a wake-up is in flight), "stream: fast" (the fast path), "stream: regular" (the regular worker, begun by it).
    worker_sources: Counter = field(default_factory=Counter)
    fast_path_claims: list[int] = field(default_factory=list)  # indices in ``arrivals`` the fast paths claimed
    skipped_stream_records: int = 0  # stream starts: records the mapping skipped for their age, never delivered

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
            "handshake_requests_per_task": {k: v / self.tasks for k, v in self.handshake_requests.items()},
            "peak_concurrency": peak_concurrency(self.intervals),
            "worker_sources_per_1000": {k: 1000.0 * v / self.tasks for k, v in self.worker_sources.items()},
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
        self.slot_waiter: tuple[int, Callable[[], None]] | None = None
        self.recording = 0  # tasks whose runner returned and whose outcome is being written
        self.running = 0
        self.created = 0
        self.completed = 0
        self.last_done = 0.0
        self.buffer: list[str] = []  # stream records passed by the filter, waiting for a batch
        self.first_at: float | None = None
        self.esm_busy = False
        self.worker_busy = False
        self.watching = False  # a product worker watches the queue (the wake-up handshake)
        self.in_flight_until = -1.0  # a product wake-up claimed and published, not yet answered by a watch
        self.last_write = -1e9  # the last producer's touch of the record
        self.seed_claimed: set[float] = set()  # creation times of the seed's tasks claimed at least once
        self.stopping = False  # the watcher has written the first step of its stop (two_phase_stop)
        # Stream starts: ProcessTasks' own mapping (arrival indices waiting for a batch, one batch in flight), the
        # running-limit slots its fast paths hold, and the arrival history (time noted, tasks) of its environment.
        self.stream_buffer: list[int] = []
        self.stream_in_flight = 0  # batches of ProcessTasks' mapping being processed (ParallelizationFactor at most)
        self.stream_running = 0
        self.history: deque[tuple[float, int]] = deque()
        self.result = ModelResult(model.name, rate, tasks, 0, 0, 0.0)

    # ---- plumbing ---------------------------------------------------------------------------------

    def at(self, t: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self.events, (t, next(self.seq), fn))

    def done(self) -> bool:
        return self.created == self.n and self.completed == self.n

    def run(self) -> ModelResult:
        if self.m.stream_starts and (self.m.seed_loop or not self.m.handshake):
            raise ValueError("stream starts are the product's (its handshake, its worker)")
        t = 0.0
        for _ in range(self.n):
            t += self.rng.expovariate(self.rate)
            self.at(t, self.arrive)
        self.at(self.p.poll_seconds, self.poll)
        if self.m.stream_starts:  # ProcessTasks' own poller: as often, half a poll out of phase with Trigger's
            self.at(self.p.poll_seconds * 1.5, self.poll_stream)
        if self.m.safety_net_seconds:
            self.at(self.m.safety_net_seconds, self.safety_net)
        limit = t + 24 * 3600
        while self.events:
            self.now, _, fn = heapq.heappop(self.events)
            if self.now > limit:
                raise RuntimeError(f"{self.m.name}: the model did not drain within a day of virtual time")
            fn()
            idle = not (self.worker_busy or self.esm_busy or self.stream_in_flight or self.stream_buffer)
            if self.done() and idle:
                break
        self.result.completed = self.completed
        self.result.seconds = self.last_done
        return self.result

    def record(self, kind: str) -> None:
        """A stream record of a task write; the mapping's filter decides whether Trigger ever sees it."""
        self.result.stream_records += 1
        if kind == "INSERT" and self.m.stream_starts:  # Trigger's filter leaves a stream-started queue's INSERTs out
            return
        if kind == "INSERT" or self.m.passes_all_records:
            if not self.buffer:
                self.first_at = self.now
            self.buffer.append(kind)

    # ---- arrivals, stream, Trigger ----------------------------------------------------------------

    def arrive(self) -> None:
        if self.m.stream_starts:
            self.stream_buffer.append(self.created)  # ProcessTasks' mapping passes INSERTs of PENDING tasks only
        self.created += 1
        self.pending.append(self.now)
        self.pending_set.add(self.now)
        self.result.arrivals.append(self.now)
        self.record("INSERT")
        if self.m.handshake and not self.m.stream_starts:
            self.last_write = self.now
            self.result.handshake_requests["producer touch"] += 1
            if not self.watching:
                self.wake_if_idle("producer", delay=self.p.request_seconds)

    def wake_if_idle(self, requester: str, delay: float = 0.0) -> bool:
        """The product's wake-up, unless a worker watches or one is in flight: claim it (a request), publish."""
        if self.watching or self.now < self.in_flight_until:
            return False
        self.result.handshake_requests[f"{requester} claim"] += 1
        self.in_flight_until = self.now + self.m.wake_in_flight_seconds
        self.at(self.now + delay + self.p.request_seconds + self.p.publish_seconds, self.wake)
        return True

    def poll(self) -> None:
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
        if self.m.handshake:  # a backstop: a consistent read of the record, a wake-up only for an idle queue
            wakes = wakes and bool(self.pending) and not self.watching and self.now >= self.in_flight_until
        duration = self.p.trigger_base_seconds + (self.p.publish_seconds if wakes else 0.0)
        self.invoked("Trigger", duration, self.m.trigger_memory_mb, "stream")

        def finish() -> None:
            self.esm_busy = False
            if wakes and self.m.handshake:
                self.wake_if_idle("stream")
            elif wakes:
                self.wake()

        self.at(self.now + duration, finish)

    def invoked(self, function: str, seconds: float, memory_mb: int, source: str | None = None,
                start: float | None = None) -> None:
        """An invocation of ``seconds`` from ``start`` (default now: the callers that know its length as it begins)."""
        begun = self.now if start is None else start
        self.result.intervals.append((begun, begun + seconds))
        self.result.invocations[function] += 1
        if source:
            self.result.trigger_sources[source] += 1
        self.result.gb_seconds[function] += math.ceil(seconds * 1000) / 1000 * memory_mb / 1024

    def wake(self) -> None:
        """Trigger publishes a wake-up on WorkerWakeUpTopic: SNS invokes the worker asynchronously."""
        self.result.publishes["WorkerWakeUpTopic"] += 1
        received = self.now + self.p.sns_delivery_seconds
        self.at(received, lambda: self.attempt(received, 0))

    def tail_call(self) -> None:
        """The worker publishes on TriggerTopic; Trigger runs and wakes the worker."""
        self.result.publishes["TriggerTopic"] += 1

        def trigger() -> None:
            duration = self.p.trigger_base_seconds + self.p.publish_seconds
            self.invoked("Trigger", duration, self.m.trigger_memory_mb, "tail-call")
            self.at(self.now + duration, self.wake)

        self.at(self.now + self.p.sns_delivery_seconds, trigger)

    def safety_net(self) -> None:
        if not self.done():
            self.at(self.now + (self.m.safety_net_seconds or 60.0), self.safety_net)
        self.result.safety_net_ticks.append(self.now)
        # Lease recovery and a claimable check per queue (work, calls): 3 queries each.
        wakes = bool(self.pending)
        if self.m.handshake:
            wakes = wakes and not self.watching and self.now >= self.in_flight_until
        duration = self.p.trigger_base_seconds + 6 * self.p.request_seconds + (self.p.publish_seconds if wakes else 0)
        self.invoked("Trigger", duration, self.m.trigger_memory_mb, "safety-net")
        if wakes and self.m.handshake:
            self.wake_if_idle("safety-net", delay=duration)
        elif wakes:
            self.at(self.now + duration, self.wake)

    # ---- the worker's asynchronous invocations ------------------------------------------------------

    def attempt(self, received: float, throttles: int) -> None:
        if self.worker_busy:
            self.result.throttles += 1
            delay = min(self.p.throttle_first_retry_seconds * 2 ** throttles, self.p.throttle_max_retry_seconds)
            if self.now + delay - received > self.m.worker_max_event_age_seconds:
                self.result.dropped_wakeups += 1
                return
            self.at(self.now + delay, lambda: self.attempt(received, throttles + 1))
            return
        self.worker_busy = True
        self.result.worker_starts.append(self.now)
        self.result.worker_sources["wake-up"] += 1
        start = self.now
        if self.m.seed_loop:
            self.seed_invocation(start)
        else:
            self.product_invocation(start)

    def end_invocation(self, start: float, tail: bool, from_stream: bool = False) -> None:
        self.invoked("ProcessTasks", self.now - start + self.p.worker_base_seconds, self.m.worker_memory_mb, start=start)
        self.worker_busy = False
        if from_stream:
            self.stream_in_flight -= 1  # the mapping's batch returns: another may go
        if tail and self.m.handshake:
            self.wake_if_idle("tail-call")  # straight to WorkerWakeUpTopic, unless a producer's wake-up is on its way
        elif tail:
            self.tail_call()

    def take(self, created: float) -> None:
        self.pending.remove(created)
        self.pending_set.discard(created)
        self.result.claim_waits.append(self.now - created)

    def wake_waiter(self) -> None:
        if self.slot_waiter is not None:
            _, then = self.slot_waiter
            self.slot_waiter = None
            self.at(self.now, then)

    def wait_for_slot(self, then: Callable[[], None], at_most: float) -> None:
        """``then`` once a running task ends (or after ``at_most`` s), as Worker.run waits on its runner's tasks."""
        token = next(self.seq)
        self.slot_waiter = (token, then)

        def timeout() -> None:
            if self.slot_waiter is not None and self.slot_waiter[0] == token:
                self.slot_waiter = None
                then()

        self.at(self.now + at_most, timeout)

    def complete_later(self, runs_until: float, recorded_in: float) -> None:
        """A claimed task: it holds a runner slot until ``runs_until`` (its claim's request, then the runner), then
        its outcome is written (``recorded_in`` s) while the slot already serves the next claim (Worker._run_one)."""
        self.running += 1
        self.recording += 1

        def ran() -> None:
            self.running -= 1
            self.wake_waiter()
            self.at(self.now + recorded_in, recorded)

        def recorded() -> None:
            self.recording -= 1
            self.completed += 1
            self.last_done = self.now
            self.record("MODIFY")
            self.wake_waiter()

        self.at(runs_until, ran)

    # The product's Worker.run: watch the queue (1 request), recover leases (1 query); loop: read the ready and
    # delayed partitions (2 queries), claim while the runner has a free slot (1 write each, completed by a runner
    # thread with 1 write), wait for a slot or for arrivals while tasks run; on an empty queue linger (a record
    # read every poll; an arrival noticed ends the wait), then stop watching (1 conditional write, not before
    # the index's lag allowance after the last write; an arrival since makes it fail: look again); at the budget,
    # stop watching and wait for running tasks; last, next_due + has_claimable (3 queries), tail call if
    # claimable work remains.
    def product_invocation(self, start: float, from_stream: bool = False) -> None:
        req = self.p.request_seconds
        deadline = start + self.m.budget_seconds
        if self.m.handshake:
            self.watching = True
            self.in_flight_until = -1.0  # the watch answers the wake-up in flight
            self.result.handshake_requests["worker watch"] += 1
            self.now_plus(req)
        linger_since: list[float | None] = [None]
        stop_marked: list[float | None] = [None]  # when the stop's first step was written (two_phase_stop)
        settle = [0.0]  # stopped at the budget: wait the index's lag allowance before the look for work left

        claimed = [0]  # this invocation's claims (its polls' pace: taskqueue.core.handshake.poll_seconds)
        linger_polls = [0]  # empty polls of the current linger
        leftovers: list[float] = []  # the last look's tasks not claimed (the run was full), and when it began
        leftovers_at = [-1e9]

        def step() -> None:
            if self.now >= deadline:
                return drain()
            free = self.m.runner_capacity - self.running - self.stream_running  # the running limit, queue-wide
            if free <= 0:
                return self.wait_for_slot(step, 1.0)  # the runner's first task to end (Worker.run waits on them)
            fresh = [c for c in leftovers if c in self.pending_set] if (
                self.now - leftovers_at[0] < self.m.leftover_seconds) else []
            leftovers.clear()
            if not fresh:  # a look: the ready and delayed partitions (2 queries)
                leftovers_at[0] = self.now
                self.now_plus(2 * req)
                fresh = self.pending[-self.m.page_size:]
            if not fresh:
                if self.running or self.recording:  # an empty look while tasks run: look again once one ends, at least every second
                    return self.wait_for_slot(step, 1.0)
                return linger() if self.m.handshake else finish()
            linger_since[0] = None
            taken = min(free, len(fresh))
            claimed[0] += taken
            for i, created in enumerate(reversed(fresh[-taken:]), start=1):  # newest first, one claim after another
                self.take(created)
                self.record("MODIFY")
                self.complete_later(self.now + i * req + self.runner_seconds, req)
            if taken == free and self.m.leftover_seconds:
                leftovers.extend(fresh[:-taken])  # for the next claims, while the look is fresh
            self.at(self.now + req * taken, step)  # one conditional write per claim, one after another

        def linger() -> None:
            if linger_since[0] is None:
                linger_since[0] = self.now
                linger_polls[0] = 0
            lingered = self.now - linger_since[0]
            if lingered < self.m.linger_seconds and self.now < deadline:
                pace = self.m.linger_poll_seconds
                if self.m.paced_polls:  # sooner on a fast queue, doubling at each empty poll (wakeups/lingering.py)
                    pace = min(pace, poll_seconds(claimed[0], self.now - start) * 2 ** linger_polls[0])
                linger_polls[0] += 1
                nxt = min(self.now + pace, linger_since[0] + self.m.linger_seconds, deadline)
                return self.at(nxt, poll)
            if self.now >= deadline:
                return drain()
            due = self.last_write + self.m.index_lag_allowance_seconds
            if self.now < due:  # the last empty look may not have seen the last write: look once more then
                return self.at(min(due, deadline), step)
            if self.m.two_phase_stop and stop_marked[0] is None:
                self.result.handshake_requests["worker stopping"] += 1
                self.now_plus(req)
                if self.pending:  # a producer touched the record since: the first step fails, look again
                    linger_since[0] = None
                    return step()
                stop_marked[0] = self.now
                self.stopping = True
                return self.at(min(self.now + self.m.index_lag_allowance_seconds, deadline), last_look)
            self.result.handshake_requests["worker stop"] += 1
            self.now_plus(req)
            if self.pending:  # a producer touched the record since: the conditional stop fails, look again
                linger_since[0] = None
                return step()
            self.watching = self.stopping = False
            finish()

        def last_look() -> None:
            if self.now >= deadline:
                return drain()
            self.now_plus(2 * req)
            if self.pending:  # work after the first step: clear ``stopping`` (1 request) and take it
                self.result.handshake_requests["worker resume"] += 1
                self.now_plus(req)
                stop_marked[0] = linger_since[0] = None
                self.stopping = False
                return step()
            linger()

        def poll() -> None:
            self.result.handshake_requests["worker poll"] += 1
            self.now_plus(req)
            if self.pending:
                linger_since[0] = None
                return step()
            linger()

        def drain() -> None:
            if self.watching:
                self.watching = self.stopping = False
                settle[0] = self.now + self.m.index_lag_allowance_seconds if self.m.two_phase_stop else 0.0
                self.result.handshake_requests["worker stop"] += 1
            if self.running or self.recording:
                return self.at(self.now + 0.05, drain)
            finish()

        def finish() -> None:
            if self.now < settle[0]:  # writes that skipped their touch show in the index by then
                return self.at(settle[0], finish)
            self.now_plus(3 * req)
            self.end_invocation(start, tail=bool(self.pending), from_stream=from_stream)

        self.now_plus(req)  # lease recovery
        step()

    # ---- stream starts (issue 29): ProcessTasks invoked by the table's stream ---------------------------------

    def poll_stream(self) -> None:
        """ProcessTasks' mapping at a poll: no window, so whatever waits goes (up to a batch), one batch in flight."""
        if not self.done() or self.stream_buffer or self.stream_in_flight:
            self.at(self.now + self.p.poll_seconds, self.poll_stream)
        age = self.m.stream_max_record_age_seconds
        if age is not None:
            while self.stream_buffer and self.result.arrivals[self.stream_buffer[0]] < self.now - age:
                self.stream_buffer.pop(0)
                self.result.skipped_stream_records += 1
        while self.stream_buffer and self.stream_in_flight < self.m.stream_parallel:
            size = self.m.stream_batch_size
            batch, self.stream_buffer = self.stream_buffer[:size], self.stream_buffer[size:]
            self.stream_in_flight += 1
            self.stream_start(batch)

    def stream_start(self, batch: list[int]) -> None:
        """One stream start (taskqueue.work.stream_start.start): the record's read, the batch noted in the arrival
        history, then the rule (``stream_step``): end (a watcher not stopping, a wake-up in flight), the fast path (a
        stopping watcher, or a queue that is not busy), or the regular worker (a busy queue, or a full running limit)."""
        start = self.now
        self.result.stream_starts.append((start, list(batch)))
        self.result.handshake_requests["stream start read"] += 1
        self.now_plus(self.p.request_seconds)  # a strongly consistent read of the queue's record
        self.history.append((self.now, len(batch)))
        while self.history[0][0] <= self.now - BUSY_SECONDS:
            self.history.popleft()
        busy = sum(count for _, count in self.history) >= BUSY_TASKS
        if (self.watching and not self.stopping) or (not self.watching and self.now < self.in_flight_until):
            self.result.worker_sources["stream: ended"] += 1
            return self.end_stream_start(start)
        free = self.m.runner_capacity - self.running - self.stream_running
        if free > 0 and (self.stopping or not busy):
            self.result.worker_sources["stream: fast"] += 1
            return self.fast_path(start, batch, min(len(batch), free))
        if self.worker_busy:  # a watcher's invocation runs on (stopping, or past its watch): one worker at a time here
            self.result.worker_sources["stream: ended"] += 1
            return self.end_stream_start(start)
        self.result.worker_sources["stream: regular"] += 1
        self.worker_busy = True
        self.product_invocation(start, from_stream=True)

    def end_stream_start(self, start: float) -> None:
        self.invoked("ProcessTasks", self.now - start + self.p.worker_base_seconds, self.m.worker_memory_mb, start=start)
        self.stream_in_flight -= 1

    def fast_path(self, start: float, batch: list[int], slots: int) -> None:
        """Take ``slots`` running-limit slots, claim the batch's tasks by key newest first (a lost claim costs its
        request too), run them ``slots`` at a time (a task beyond waits for one of this invocation's runs to end), write
        each outcome, free the slots, end. The slots are held until the end, as the running limit's leases are."""
        req = self.p.request_seconds
        self.result.handshake_requests["stream start slot"] += slots
        self.stream_running += slots
        self.now_plus(slots * req)
        order = sorted(batch, reverse=True)  # newest first
        free = [slots]  # this invocation's runner slots
        outstanding = [0]  # claimed tasks whose outcome is not written yet
        waiting = [False]  # the next claim waits for a run to end
        claims_done = [False]

        def claim_next() -> None:
            if not order:
                claims_done[0] = True
                return release() if outstanding[0] == 0 else None
            if free[0] == 0:
                waiting[0] = True
                return
            index = order.pop(0)
            created = self.result.arrivals[index]
            self.result.handshake_requests["stream start claim"] += 1
            if created in self.pending_set:  # else another worker claimed it first: the conditional claim fails
                self.take(created)
                self.result.fast_path_claims.append(index)
                self.record("MODIFY")
                free[0] -= 1
                outstanding[0] += 1
                self.at(self.now + req + self.runner_seconds, ran)
            self.at(self.now + req, claim_next)

        def ran() -> None:
            free[0] += 1
            self.at(self.now + req, recorded)  # the outcome's write
            if waiting[0]:
                waiting[0] = False
                claim_next()

        def recorded() -> None:
            outstanding[0] -= 1
            self.completed += 1
            self.last_done = self.now
            self.record("MODIFY")
            if claims_done[0] and outstanding[0] == 0:
                release()

        def release() -> None:
            self.result.handshake_requests["stream start slot"] += slots
            self.now_plus(slots * req)
            self.stream_running -= slots
            self.wake_waiter()  # a watcher waiting on the running limit
            self.end_stream_start(start)

        claim_next()

    def now_plus(self, seconds: float) -> None:
        """Time the current handler spends on requests (the handler runs on, nothing else happens meanwhile)."""
        self.now += seconds

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
                return self.end_invocation(start, tail=False)
            if reached:
                return self.end_invocation(start, tail=True)
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


def simulate(model: DesignModel, rate: float, tasks: int, *, runner_seconds: float = 0.0, seed: int = 1,
             platform: Platform | None = None) -> ModelResult:
    """Run the model for ``tasks`` Poisson arrivals at ``rate`` tasks/s until every task is done."""
    return _Sim(model, platform or Platform(), rate, tasks, runner_seconds, seed).run()
