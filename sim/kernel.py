"""The kernel: real threaded Python code run deterministically, one task of execution at a time, on virtual time.

What it runs. A *task* is one task of execution: a Lambda invocation's main thread, or a thread it started through
``Threads.start``. An *invocation* (``Kernel.invoke``) is a main task and the tasks it starts; ``Kernel.kill`` ends
all of them at their next yield point, as Lambda ends an invocation at its timeout or a crash.

What it guarantees.

- Exactly one task runs at a time, and a switch happens only at a *yield point*: ``Clock.sleep``, ``Threads.wait``,
  and every request to a fake service (``Kernel.request``: once before the request applies, once before its answer
  returns). Between two yield points a task's code runs alone, so a fake service applies each request atomically.
- Which ready task runs next is drawn from ``Kernel.rng`` (``random.Random(seed)``); virtual time moves only when no
  task is ready, jumping to the earliest timer (a sleep's end, a wait's timeout, a request's latency, a callback of
  the harness's). So one seed gives one run, step for step: ``Kernel.trace`` records each step (time, task, the
  yield point it stopped at) for comparing two runs.
- A task that parks while holding a lock the kernel sees (``sim.sync``) fails the run (``LockHeldAcrossYield``);
  no ready task while some wait with no timeout fails it (``Deadlock``, naming them); more steps than
  ``step_budget`` fail it (``RunawaySchedule``). These are ``SimulationFailure`` (a ``BaseException``: product code
  that catches ``Exception`` never swallows them), raised out of ``Kernel.run``.
- ``InvocationKilled`` is a ``BaseException`` too: a killed invocation's code runs its ``finally`` blocks only as far
  as its next yield point, where it is raised again.

Why greenlets, not real threads handed a baton. Both give the product real call stacks to switch between. With
greenlets every switch is an explicit ``switch()`` in this module: nothing else can preempt a task, no OS scheduler
or GIL hand-off can reorder anything, a switch costs under a microsecond (an OS thread hand-off costs tens), and
a task that never yields cannot race anything. The price: a blocking call the kernel does not know (a real
``threading.Lock`` held by another task, ``time.sleep``, a socket) blocks every task; the product reaches time and
concurrency only through ``Clock`` and ``Threads`` (``taskqueue.core.clock``, ``taskqueue.core.concurrency``), and
``sim.sync`` replaces the product's locks with ones the kernel sees.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import Counter
from collections.abc import Callable, Collection
from concurrent.futures import Future
from typing import Any

import greenlet

DEFAULT_START_MS = 1_795_348_800_000  # virtual epoch time at the kernel's time zero (2026-11-22 12:00 UTC)
DEFAULT_STEP_BUDGET = 500_000
_US = 1_000_000


class SimulationFailure(BaseException):
    """The code under simulation broke a rule of the kernel (or ran away): the run is over, with this reason."""


class Deadlock(SimulationFailure):
    """No task is ready and none waits on the clock, yet some wait: they wait forever."""


class RunawaySchedule(SimulationFailure):
    """More steps than the kernel's budget: a busy loop (yielding without time passing), or a schedule too long."""


class LockHeldAcrossYield(SimulationFailure):
    """A task parked (slept, waited or sent a request) while holding a lock: with real threads that serializes every
    other user of the lock behind a request (or deadlocks); in the kernel it would block every task."""


class InvocationKilled(BaseException):
    """Raised in every task of a killed invocation at its next yield point, as Lambda ends an invocation at its
    timeout or crash. A BaseException: product code that catches Exception does not stop it."""


_READY, _RUNNING, _PARKED, _DONE = "ready", "running", "parked", "done"


class Task:
    """One task of execution: its function, its greenlet (made when it first runs) and its Future."""

    __slots__ = ("name", "invocation", "fn", "future", "greenlet", "state", "park_id", "label", "locks", "steps")

    def __init__(self, name: str, invocation: Invocation, fn: Callable[[], Any]) -> None:
        self.name = name
        self.invocation = invocation
        self.fn = fn
        self.future: Future[Any] = Future()
        self.greenlet: greenlet.greenlet | None = None
        self.state = _READY
        self.park_id = 0  # bumped at every park and wake: a timer or callback of an older park is stale
        self.label = "start"  # the yield point it is parked at
        self.locks: list[Any] = []  # kernel-visible locks it holds (sim.sync)
        self.steps = 0

    def __repr__(self) -> str:
        return f"<Task {self.name} {self.state} at {self.label}>"


class Invocation:
    """A Lambda invocation: its main task and the tasks it starts (``threads``). ``future`` completes with the main
    task; ``killed`` is the kill's reason (None while alive); ``leftovers`` names tasks still running when the main
    task ended (killed then, as Lambda freezes a returned invocation's threads)."""

    def __init__(self, kernel: Kernel, name: str) -> None:
        self.name = name
        self.tasks: list[Task] = []
        self.killed: str | None = None
        self.leftovers: list[str] = []
        self.threads = SimThreads(kernel, self)
        self._names = itertools.count(1)
        self.main: Task | None = None

    @property
    def future(self) -> Future[Any]:
        assert self.main is not None
        return self.main.future

    @property
    def done(self) -> bool:
        return all(t.state == _DONE for t in self.tasks)

    def __repr__(self) -> str:
        return f"<Invocation {self.name}{' killed' if self.killed else ''}>"


class SimClock:
    """``taskqueue.core.clock.Clock`` on the kernel's virtual time; ``skew_ms`` shifts ``now_ms`` (a host's clock
    ahead or behind), never ``monotonic``."""

    def __init__(self, kernel: Kernel, skew_ms: int = 0) -> None:
        self._kernel = kernel
        self.skew_ms = skew_ms

    def now_ms(self) -> int:
        return self._kernel.start_ms + self._kernel.now_us // 1000 + self.skew_ms

    def monotonic(self) -> float:
        return 1000.0 + self._kernel.now_us / _US

    def sleep(self, seconds: float) -> None:
        self._kernel.sleep(seconds)


class SimThreads:
    """``taskqueue.core.concurrency.Threads`` for one invocation: started tasks belong to it (and die with it)."""

    def __init__(self, kernel: Kernel, invocation: Invocation) -> None:
        self._kernel = kernel
        self._invocation = invocation

    def start(self, fn: Callable[[], None], name: str) -> Future[None]:
        return self._kernel.spawn(fn, name, self._invocation).future

    def wait(self, futures: Collection[Future[Any]], timeout: float | None) -> None:
        self._kernel.wait(futures, timeout)


Latency = Callable[[str], tuple[float, float]]


class Kernel:
    """Runs tasks one at a time on virtual time (module docstring). ``seed`` decides every choice; ``start_ms`` is
    the epoch time at time zero; ``latency(label)`` draws a request's (before, after) seconds (default: 0.5-3 ms each
    way); ``after_step(kernel)`` is called after every step (the harness's invariants); ``trace=False`` keeps no
    trace (long runs)."""

    def __init__(self, seed: int, *, start_ms: int = DEFAULT_START_MS, step_budget: int = DEFAULT_STEP_BUDGET,
                 latency: Latency | None = None, trace: bool = True) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.start_ms = start_ms
        self.now_us = 0
        self.step_budget = step_budget
        self.steps = 0
        self.latency: Latency = latency or self._default_latency
        self.after_step: Callable[[Kernel], None] | None = None
        self.trace: list[tuple[int, str, str]] | None = [] if trace else None
        self.clock = SimClock(self)
        self.current: Task | None = None
        self._ready: list[Task] = []
        self._timers: list[tuple[int, int, Any, int]] = []  # (at_us, seq, Task or callback, park_id)
        self._seq = itertools.count()
        self._live: dict[int, Task] = {}  # insertion-ordered: the order tasks were spawned
        self._invocations = itertools.count(1)
        self._failure: BaseException | None = None
        self._hub: greenlet.greenlet | None = None
        self._patches: list[Any] = []

    # ---- time ------------------------------------------------------------------------------------------

    @property
    def now(self) -> float:
        """Virtual seconds since time zero."""
        return self.now_us / _US

    def clock_for(self, skew_ms: int = 0) -> SimClock:
        return SimClock(self, skew_ms)

    def call_at(self, at_s: float, callback: Callable[[], None]) -> None:
        """Call ``callback`` in the kernel (not in a task: it must not yield) at virtual time ``at_s`` (at once if
        past): the harness's deliveries, schedules and faults. It may spawn tasks and kill invocations."""
        heapq.heappush(self._timers, (max(self.now_us, _to_us(at_s)), next(self._seq), callback, -1))

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> None:
        self.call_at(self.now + max(0.0, delay_s), callback)

    # ---- tasks and invocations -----------------------------------------------------------------------------

    def invoke(self, fn: Callable[[], Any], name: str | None = None) -> Invocation:
        """A new invocation whose main task runs ``fn``; ready at once."""
        invocation = Invocation(self, name or f"invocation-{next(self._invocations)}")
        invocation.main = self._new_task(fn, invocation.name, invocation)
        return invocation

    def spawn(self, fn: Callable[[], Any], name: str, invocation: Invocation | None = None) -> Task:
        """A new ready task running ``fn`` in ``invocation`` (else as the main task of an invocation of its own)."""
        if invocation is None:
            main = self.invoke(fn, name).main
            assert main is not None
            return main
        return self._new_task(fn, f"{invocation.name}/{name}#{next(invocation._names)}", invocation)

    def _new_task(self, fn: Callable[[], Any], name: str, invocation: Invocation) -> Task:
        task = Task(name, invocation, fn)
        invocation.tasks.append(task)
        self._live[id(task)] = task
        self._ready.append(task)
        return task

    def kill(self, invocation: Invocation, reason: str = "killed") -> None:
        """End every task of ``invocation`` at its next yield point (parked ones are woken to die)."""
        if invocation.killed is not None:
            return
        invocation.killed = reason
        for task in invocation.tasks:
            if task.state == _PARKED:
                self._make_ready(task)

    @property
    def tasks(self) -> list[Task]:
        """The tasks not yet done, in the order they were spawned."""
        return list(self._live.values())

    # ---- yield points (called from inside a task) ------------------------------------------------------

    def sleep(self, seconds: float) -> None:
        self._park("sleep", _to_us(max(0.0, seconds)))

    def wait(self, futures: Collection[Future[Any]], timeout: float | None) -> None:
        """Park until any of ``futures`` is done or ``timeout`` seconds pass (a yield point even if one is done)."""
        task = self._task("Threads.wait")
        if not futures or any(f.done() for f in futures) or (timeout is not None and timeout <= 0):
            self._park("wait", None)
            return
        park_id = task.park_id + 1  # the id _park gives this park
        for future in futures:
            future.add_done_callback(lambda _f, t=task, p=park_id: self._wake(t, p))
        self._park("wait", None if timeout is None else _to_us(timeout), forever=timeout is None)

    def request(self, label: str, apply: Callable[[], Any], *, before_s: float | None = None,
                after_s: float | None = None) -> Any:
        """A request to a fake service: a yield point, then ``apply()`` (atomic), then its latency before the answer
        (a value, or the error ``apply`` raised) returns: a second yield point. Outside a task (the harness's own
        reads and setup) it just applies."""
        if self.current is None:
            return apply()
        drawn_before, drawn_after = self.latency(label)
        self._park(f"{label}:send", _to_us(drawn_before if before_s is None else before_s))
        try:
            value, error = apply(), None
        except Exception as exc:  # the service's answer, returned after the latency
            value, error = None, exc
        self._park(f"{label}:reply", _to_us(drawn_after if after_s is None else after_s))
        if error is not None:
            raise error
        return value

    def _default_latency(self, label: str) -> tuple[float, float]:
        return self.rng.uniform(0.0005, 0.003), self.rng.uniform(0.0005, 0.003)

    # ---- running -----------------------------------------------------------------------------------------

    def run(self, until: float | None = None) -> None:
        """Run steps until no task is left (or, with ``until``, until virtual time would pass ``until`` seconds)."""
        if self.current is not None:
            raise RuntimeError("Kernel.run called from inside a task")
        self._hub = greenlet.getcurrent()
        deadline = None if until is None else _to_us(until)
        while True:
            if self._failure is not None:
                failure, self._failure = self._failure, None
                raise failure
            if self._ready:
                self._step()
                continue
            if self._timers:
                at = self._timers[0][0]
                if deadline is not None and at > deadline:
                    self.now_us = max(self.now_us, deadline)
                    return
                self.now_us = max(self.now_us, at)
                self._fire_timers()
                continue
            waiting = [t for t in self._live.values() if t.state == _PARKED]
            if waiting:
                raise Deadlock(f"deadlock at t={self.now:.6f} s: no task is ready and none waits on the clock; "
                               f"waiting forever: {', '.join(f'{t.name} (at {t.label})' for t in waiting)}")
            if deadline is not None:
                self.now_us = max(self.now_us, deadline)
            return

    def _step(self) -> None:
        ready = self._ready
        index = self.rng.randrange(len(ready)) if len(ready) > 1 else 0
        task = ready[index]
        ready[index] = ready[-1]
        ready.pop()
        self.steps += 1
        task.steps += 1
        if self.steps > self.step_budget:
            busiest = Counter({t.name: t.steps for t in self._live.values()}).most_common(3)
            raise RunawaySchedule(f"over the step budget ({self.step_budget}) at t={self.now:.6f} s; busiest live "
                                  f"tasks: {busiest}")
        self.current = task
        task.state = _RUNNING
        if task.greenlet is None:
            task.greenlet = greenlet.greenlet(lambda: self._body(task), parent=self._hub)
        task.greenlet.switch()
        self.current = None
        if self.trace is not None:
            self.trace.append((self.now_us, task.name, task.label))
        if self.after_step is not None:
            self.after_step(self)

    def _fire_timers(self) -> None:
        while self._timers and self._timers[0][0] <= self.now_us:
            _, _, target, park_id = heapq.heappop(self._timers)
            if park_id < 0:
                target()
            else:
                self._wake(target, park_id)

    def _body(self, task: Task) -> None:
        future = task.future
        try:
            if task.invocation.killed is not None:
                raise InvocationKilled(f"{task.name}: {task.invocation.killed}")
            if not future.set_running_or_notify_cancel():
                return
            result = task.fn()
        except SimulationFailure as failure:
            self._failure = self._failure or failure
            _settle(future, error=failure)
        except BaseException as exc:  # noqa: B036 - the task's outcome, kept on its Future as a thread pool would
            _settle(future, error=exc)
        else:
            _settle(future, value=result)
        finally:
            task.state = _DONE
            task.label = "done"
            self._live.pop(id(task), None)
            if task is task.invocation.main:
                self._freeze_leftovers(task.invocation)

    def _freeze_leftovers(self, invocation: Invocation) -> None:
        left = [t for t in invocation.tasks if t.state != _DONE and t is not invocation.main]
        if left and invocation.killed is None:
            invocation.leftovers = [t.name for t in left]
            self.kill(invocation, "its main task ended (Lambda freezes the threads it left)")

    def _task(self, what: str) -> Task:
        task = self.current
        if task is None:
            raise RuntimeError(f"{what} outside any task of the kernel: only code the kernel runs may yield")
        return task

    def _park(self, label: str, delay_us: int | None, *, forever: bool = False) -> None:
        task = self._task(label)
        if task.invocation.killed is not None:
            raise InvocationKilled(f"{task.name}: {task.invocation.killed}")
        if task.locks:
            held = ", ".join(repr(lock) for lock in task.locks)
            raise LockHeldAcrossYield(f"{task.name} reached a yield point ({label}) holding {held}: release locks "
                                      "before sleeping, waiting or sending a request")
        task.park_id += 1
        task.label = label
        if delay_us is None and not forever:
            task.state = _READY
            self._ready.append(task)
        else:
            task.state = _PARKED
            if delay_us is not None:
                heapq.heappush(self._timers, (self.now_us + delay_us, next(self._seq), task, task.park_id))
        self._hub.switch()  # type: ignore[union-attr]
        if task.invocation.killed is not None:
            raise InvocationKilled(f"{task.name}: {task.invocation.killed}")

    def _wake(self, task: Task, park_id: int) -> None:
        if task.state == _PARKED and task.park_id == park_id:
            self._make_ready(task)

    def _make_ready(self, task: Task) -> None:
        task.park_id += 1
        task.state = _READY
        self._ready.append(task)

    # ---- ending -------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Kill every task left and let each unwind (timers are dropped), then undo the patches ``__enter__`` made."""
        try:
            self._timers.clear()
            for task in list(self._live.values()):
                self.kill(task.invocation, "the simulation ended")
            self._hub = greenlet.getcurrent()
            guard = 0
            while self._ready and guard < 100_000:
                guard += 1
                self._step_quietly()
        finally:
            while self._patches:
                self._patches.pop().__exit__(None, None, None)

    def _step_quietly(self) -> None:
        task = self._ready.pop()
        self.current = task
        task.state = _RUNNING
        if task.greenlet is None:
            task.greenlet = greenlet.greenlet(lambda: self._body(task), parent=self._hub)
        try:
            task.greenlet.switch()
        finally:
            self.current = None

    def __enter__(self) -> Kernel:
        """Make the process's own randomness deterministic and the product's locks visible (``sim.determinism``,
        ``sim.sync``) until ``__exit__``, which closes the kernel."""
        from sim.determinism import deterministic_entropy
        from sim.sync import watched_locks

        for patch in (deterministic_entropy(self.seed), watched_locks(self)):
            patch.__enter__()
            self._patches.append(patch)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _settle(future: Future[Any], *, value: Any = None, error: BaseException | None = None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


def _to_us(seconds: float) -> int:
    """Whole microseconds; a positive time shorter than half of one is one: a loop that sleeps or waits out the last
    sliver of a deadline must see time pass (real time would), or it would spin at one instant for ever."""
    micros = int(round(seconds * _US))
    return 1 if micros == 0 and seconds > 0 else micros
