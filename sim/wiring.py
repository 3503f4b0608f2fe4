"""How the handlers are wired to a world (``sim.world``) while a schedule runs: the worker's threads and the product's
own thread pools on the kernel (a look's first pages, a workflow's fan-out and creation), the handlers' logs off and their metrics counted."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any

from sim.kernel import Kernel
from sim.world import Stats, World, handler_module
from taskqueue.core import metrics as handler_metrics
from taskqueue.store import page_reads, workflow_fan_out


class KernelFuture(Future):  # type: ignore[type-arg]
    """A Future whose ``result`` waits through the kernel (a yield point), not by blocking the process's thread."""

    def __init__(self, kernel: Kernel) -> None:
        super().__init__()
        self._kernel = kernel

    def result(self, timeout: float | None = None) -> Any:
        while not self.done():
            self._kernel.wait([self], timeout)
            if timeout is not None:
                break
        return super().result(0)


class KernelPool:
    """``concurrent.futures.ThreadPoolExecutor`` for product code that starts one itself (a look's first pages,
    ``taskqueue.store.page_reads``): each call runs as a kernel task of the calling invocation."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
        future = KernelFuture(self._kernel)
        current = self._kernel.current
        assert current is not None, "a pool is used inside an invocation"

        def run() -> None:
            try:
                value = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiter, as a pool does
                future.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
            else:
                future.set_result(value)

        self._kernel.spawn(run, "pool", current.invocation)
        return future

    def map(self, fn: Callable[..., Any], *inputs: Any) -> Iterator[Any]:
        """As ``ThreadPoolExecutor.map``: every call started, then the results in order (a workflow's fan-out)."""
        futures = [self.submit(fn, *args) for args in zip(*inputs)]
        return (future.result() for future in futures)

    def shutdown(self, wait: bool = True) -> None: ...


@contextmanager
def wired(world: World) -> Iterator[None]:
    """The handlers wired to ``world``: a worker's tasks run on its invocation's kernel threads (``Worker``'s
    ``threads``, which the handler leaves to its default pool), logs off, metrics counted into ``world.stats``."""
    app = world.process_tasks
    real_worker = app.Worker

    def worker(*args: Any, **kwargs: Any) -> Any:
        task = world.kernel.current
        assert task is not None, "a worker is built inside an invocation"
        threads = task.invocation.threads
        return real_worker(*args, threads=lambda _n: threads, **kwargs)

    app.Worker = worker
    real_pool = page_reads.ThreadPoolExecutor
    page_reads.ThreadPoolExecutor = lambda **_: KernelPool(world.kernel)  # type: ignore[assignment,misc]
    real_fan_out_pool = workflow_fan_out.ThreadPoolExecutor
    workflow_fan_out.ThreadPoolExecutor = lambda **_: KernelPool(world.kernel)  # type: ignore[assignment,misc]
    try:
        with quiet_handlers(world.stats):
            yield
    finally:
        app.Worker = real_worker
        page_reads.ThreadPoolExecutor = real_pool  # type: ignore[misc]
        workflow_fan_out.ThreadPoolExecutor = real_fan_out_pool  # type: ignore[misc]


@contextmanager
def quiet_handlers(stats: Stats) -> Iterator[None]:
    """The handlers' logs off and their metrics counted into ``stats.metrics`` (no EMF printed)."""
    def count(name: str, queue: str | None, value: int = 1) -> None:
        stats.metrics[name] = stats.metrics.get(name, 0) + value

    def add_report(_metrics: Any, _queue: str, counts: Any, _timing: str, _timings: Any) -> None:
        for name, value in counts:
            count(name, None, value)

    class _Metrics:
        def add_dimension(self, **_: Any) -> None: ...
        def add_metric(self, *, name: str, value: int, **_: Any) -> None:
            count(name, None, value)

    saved = (handler_metrics.count, handler_metrics.add_report)
    create_tasks = handler_module("create_tasks")
    saved_metrics = create_tasks.metrics
    previous = logging.root.manager.disable
    handler_metrics.count, handler_metrics.add_report = count, add_report  # type: ignore[assignment]
    create_tasks.metrics = _Metrics()
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        handler_metrics.count, handler_metrics.add_report = saved  # type: ignore[assignment]
        create_tasks.metrics = saved_metrics
        logging.disable(previous)
