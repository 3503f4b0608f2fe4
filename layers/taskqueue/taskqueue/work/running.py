"""The tasks one worker run has claimed and not yet finished: each runs on a thread of the run's ``Threads`` under its
lease, which the run's heartbeat renews; every thread's outcome is read, so no runner thread's error is lost.

A task is *running* until its runner returns (it takes one of the runner's slots) and *recording* until its outcome is
written: the next claim does not wait for the outcome's write. The run's loop calls ``collect`` on each round (at most
every BEAT_SECONDS while it waits), which also renews the leases that are due and marks leases left unmarked."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future

from aws_lambda_powertools import Logger

from taskqueue.core.concurrency import Threads
from taskqueue.core.errors import TaskQueueError
from taskqueue.store import TaskStore
from taskqueue.work.lease import Lease

logger = Logger(child=True)

# The longest a run's loop waits on running tasks before it renews their leases and marks.
BEAT_SECONDS = 0.5


class RunningTasks:
    def __init__(
        self,
        threads: Threads,
        store: TaskStore,
        owner: str,
        *,
        attempt: Callable[[Lease, Callable[[], None]], None],
        freed: Callable[[Lease], None],
        count: Callable[[str], None],
        refused: Callable[[str, Exception], bool],
    ) -> None:
        """``attempt(lease, ran)``: run the task and record its outcome, calling ``ran`` as the runner returns;
        ``freed(lease)``: its runner returned (its slots go back); ``count(name)``: add one to the run's report;
        ``refused(what, error)``: a passing refusal, logged and counted (False: not one, raise it)."""
        self._threads = threads
        self._store = store
        self._owner = owner
        self._attempt = attempt
        self._freed = freed
        self._count = count
        self._refused = refused
        self.running: dict[Future[None], Lease] = {}
        self.recording: dict[Future[None], Lease] = {}

    @property
    def busy(self) -> bool:
        return bool(self.running or self.recording)

    def start(self, lease: Lease) -> None:
        ran: Future[None] = Future()

        def freed() -> None:
            if not ran.done():
                self._freed(lease)
                ran.set_result(None)

        def run() -> None:
            try:
                self._attempt(lease, freed)
            finally:
                freed()

        self.recording[self._threads.start(run, f"task-{lease.task.task_id}")] = lease
        self.running[ran] = lease

    def wait(self, timeout: float, *, running_only: bool = False) -> None:
        """Until a task's runner returns (or, unless ``running_only``, an outcome is written), at most ``timeout``."""
        self._threads.wait([*self.running] if running_only else [*self.running, *self.recording], timeout)

    def collect(self) -> None:
        """Forget finished tasks (reading every finished thread's outcome), then renew the leases that are due."""
        self.running = self._collected(self.running)
        self.recording = self._collected(self.recording)
        self.heartbeat()

    def drain(self) -> None:
        """Claiming is over: the tasks in flight finish inside their leases."""
        while self.busy:
            self._threads.wait([*self.recording], BEAT_SECONDS)
            self.collect()

    def _collected(self, futures: dict[Future[None], Lease]) -> dict[Future[None], Lease]:
        still: dict[Future[None], Lease] = {}
        for future, lease in futures.items():
            if not future.done():
                still[future] = lease
                continue
            error = future.exception()
            if error is not None:  # an attempt reports its own errors: this is a defect in it, still counted
                self._count("errors")
                logger.error("runner thread failed", extra={"task_id": lease.task.task_id, "error": repr(error)},
                             exc_info=error)
        return still

    def heartbeat(self) -> None:
        try:  # unmarked leases of tasks still running a moment after their claim: marked on their index entries
            self._store.mark_leases(self._owner)
        except TaskQueueError as exc:  # the next beat tries again; meanwhile only this store knows they run
            if not self._refused("marking leases", exc):
                raise
        for lease in list(self.running.values()):
            if not lease.due():
                continue
            try:
                renewed = lease.renew()
            except TaskQueueError as exc:  # throttled past the SDK's retries: the next beat tries again
                self._count("retried")
                logger.warning("lease renewal failed; trying again", extra={"task_id": lease.task.task_id, "error": str(exc)})
                continue
            if renewed:
                self._count("leases_renewed")
            else:
                logger.warning("lease lost while the task runs: it may be recovered and run again",
                               extra={"task_id": lease.task.task_id, "queue": lease.task.queue})
