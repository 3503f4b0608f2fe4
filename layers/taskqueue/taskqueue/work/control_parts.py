"""What every part of a run's ``ClaimControl`` holds (``queue_record``, ``claim_lanes``, the slots): the run's store,
queue, owner, clock and random source, and how it hands on a control read or write that DynamoDB refused."""

from __future__ import annotations

import random
from collections.abc import Callable

from taskqueue.core.clock import Clock
from taskqueue.store import TaskStore

# refused(what, error, then) -> True when the error was passing and is handled (logged, counted); else False.
Refused = Callable[[str, Exception, str], bool]


class ControlPart:
    """Set by ``ClaimControl.__init__``; each part reads them."""

    _store: TaskStore
    _queue: str
    _owner: str
    _clock: Clock
    _rng: random.Random
    _refused: Refused
