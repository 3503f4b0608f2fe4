"""Concurrency, injectable: a worker runs its tasks through a ``Threads``, so the deterministic simulation (``sim/``)
can run the very same code on virtual time, choosing which thread goes next at every request, sleep and wait.

Production uses ``SystemThreads``: a thread pool. Code that uses a ``Threads`` never holds a lock across a request, a
sleep or a wait, so that a simulated thread that parks there never blocks another on the lock."""

from __future__ import annotations

from collections.abc import Callable, Collection
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Protocol


class Threads(Protocol):
    def start(self, fn: Callable[[], None], name: str) -> Future[None]:
        """Run ``fn`` concurrently; the future completes when it returns (or with what it raised)."""
        ...

    def wait(self, futures: Collection[Future[Any]], timeout: float | None) -> None:
        """Return once any of ``futures`` is done, or ``timeout`` seconds have passed (``None``: no bound)."""
        ...


class SystemThreads:
    """``Threads`` on a pool of real threads, at most ``max_workers`` running at once; ``close`` waits for them."""

    def __init__(self, max_workers: int, name: str = "worker") -> None:
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=name)

    def start(self, fn: Callable[[], None], name: str) -> Future[None]:
        return self._pool.submit(fn)

    def wait(self, futures: Collection[Future[Any]], timeout: float | None) -> None:
        if futures:
            wait(futures, timeout=timeout, return_when=FIRST_COMPLETED)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
