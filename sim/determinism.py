"""The process's own randomness made deterministic while a simulation runs.

The product draws randomness where no seed is handed in: ``random.Random()`` (seeded from the OS), the module-level
``random.uniform`` / ``random.randrange``, and ``uuid.uuid4()`` (task ids, plan ids). Inside ``deterministic_entropy``
all three come from one ``random.Random`` seeded from the simulation's seed (a stream apart from the kernel's
scheduling choices), and are put back as they were on exit.

Not covered, so keep them out of behaviour: ``os.urandom`` and ``secrets`` used directly, ``time.time()`` (the clock
is ``Clock``), and the order of a ``set`` of strings, which follows ``PYTHONHASHSEED``: replay a seed in another
process with the same ``PYTHONHASHSEED`` (the harness's long run sets it).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Entropy:
    """The simulation's entropy stream (``rng``) while ``deterministic_entropy`` is active. ``paused()``: the real
    randomness for a while, for code outside the simulation (a real SDK client's request ids) whose draws must not
    shift the simulation's."""

    def __init__(self, rng: random.Random, install: Any, uninstall: Any) -> None:
        self.rng = rng
        self._install, self._uninstall = install, uninstall

    @contextmanager
    def paused(self) -> Iterator[None]:
        state = random.getstate()
        self._uninstall()
        try:
            yield
        finally:
            random.setstate(state)
            self._install()


@contextmanager
def deterministic_entropy(seed: int) -> Iterator[Entropy]:
    """Yields the entropy stream; see the module docstring."""
    entropy = random.Random(f"sim-entropy/{seed}")
    real_random, real_uuid4 = random.Random, uuid.uuid4
    saved_state = random.getstate()

    class SeededRandom(real_random):  # type: ignore[misc,valid-type]
        """random.Random: seeded from the simulation's entropy when no seed is given."""

        def __init__(self, x: Any = None) -> None:
            super().__init__(entropy.getrandbits(64) if x is None else x)

    def uuid4() -> uuid.UUID:
        return uuid.UUID(int=entropy.getrandbits(128), version=4)

    def install() -> None:
        random.Random = SeededRandom  # type: ignore[misc]
        uuid.uuid4 = uuid4

    def uninstall() -> None:
        random.Random = real_random  # type: ignore[misc]
        uuid.uuid4 = real_uuid4

    random.seed(entropy.getrandbits(64))
    install()
    try:
        yield Entropy(entropy, install, uninstall)
    finally:
        uninstall()
        random.setstate(saved_state)
