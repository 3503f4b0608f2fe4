"""Locks the kernel can see: the product's ``threading.Lock`` / ``RLock`` replaced while a simulation runs.

Under the kernel every task runs on one OS thread, so a real lock held by a parked task would block the whole
simulation the moment another task asked for it (a ``threading.Lock``), or let it straight in (an ``RLock``, whose
owner is the OS thread). Product code may use locks only around code that never yields (no sleep, wait or request
inside): then no other task can ever find one held, and a lock costs nothing. ``SimLock`` and ``SimRLock`` record
which task holds them; the kernel fails the run (``LockHeldAcrossYield``) when a task reaches a yield point holding
one, and so does a task that would block on one.

``watched_locks`` swaps ``threading`` (and names imported from it) in the product's loaded modules for a stand-in
whose ``Lock`` and ``RLock`` make these; every other name is the real module's. Only locks made while it is active
are seen: build the product's objects inside the simulation (or after entering it).
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sim.kernel import LockHeldAcrossYield, Task

if TYPE_CHECKING:
    from sim.kernel import Kernel

PRODUCT_PREFIXES = ("taskqueue", "taskq")  # the layer and the CLI; add a handler module's name to watch it
_OUTSIDE = "the harness (outside any task)"


class SimLock:
    """A non-reentrant lock owned by the task that took it (``threading.Lock``'s interface)."""

    _reentrant = False

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._owner: Task | str | None = None
        self._count = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        task = self._kernel.current
        me: Task | str = task if task is not None else _OUTSIDE
        if self._owner is None or (self._reentrant and self._owner is me):
            if self._owner is None and isinstance(me, Task):
                me.locks.append(self)
            self._owner = me
            self._count += 1
            return True
        if not blocking or timeout == 0:
            return False
        holder = self._owner.name if isinstance(self._owner, Task) else self._owner
        who = me.name if isinstance(me, Task) else me
        raise LockHeldAcrossYield(f"{who} would block on {self!r}, held by {holder} since before its last yield point "
                                  "(with one OS thread under the kernel this blocks every task)")

    def release(self) -> None:
        if self._owner is None:
            raise RuntimeError("release unlocked lock")
        self._count -= 1
        if self._count:
            return
        owner, self._owner = self._owner, None
        if isinstance(owner, Task) and self in owner.locks:
            owner.locks.remove(self)

    def locked(self) -> bool:
        return self._owner is not None

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        holder = self._owner.name if isinstance(self._owner, Task) else self._owner
        return f"<{type(self).__name__} {'held by ' + str(holder) if holder else 'free'} at {id(self):#x}>"


class SimRLock(SimLock):
    """A reentrant lock owned by a task (``threading.RLock``'s interface)."""

    _reentrant = True


def _stand_in(kernel: Kernel) -> types.ModuleType:
    module = types.ModuleType("threading", "threading, with the kernel's locks (sim.sync)")
    module.__getattr__ = lambda name: getattr(threading, name)  # type: ignore[attr-defined]
    module.Lock = lambda: SimLock(kernel)  # type: ignore[attr-defined]
    module.RLock = lambda: SimRLock(kernel)  # type: ignore[attr-defined]
    return module


@contextmanager
def watched_locks(kernel: Kernel, prefixes: Iterable[str] = PRODUCT_PREFIXES) -> Iterator[None]:
    """While active, the loaded modules under ``prefixes`` make kernel-visible locks (module docstring)."""
    stand_in = _stand_in(kernel)
    replacements = {threading: stand_in, threading.Lock: stand_in.Lock, threading.RLock: stand_in.RLock}
    undo: list[tuple[dict[str, Any], str, Any]] = []
    wanted = tuple(prefixes)
    for name, module in list(sys.modules.items()):
        if module is None or not any(name == p or name.startswith(p + ".") for p in wanted):
            continue
        namespace = vars(module)
        for attribute, value in list(namespace.items()):
            try:
                replacement = replacements.get(value)
            except TypeError:  # an unhashable global
                continue
            if replacement is not None:
                undo.append((namespace, attribute, value))
                namespace[attribute] = replacement
    try:
        yield
    finally:
        for namespace, attribute, value in reversed(undo):
            namespace[attribute] = value
