"""What a claiming run (a ProcessTasks worker, a Matcher) asks the queue's control before it claims: is the queue
paused, which tasks it should try first among concurrent claimers (its claim lane), and, for workers, slots of
the queue-wide running limit. One ``ClaimControl`` per run, joined from ``queue_record`` (the record and pause) and
``claim_lanes`` (lanes); the rules are in ``taskqueue.core.lanes`` and the items in ``taskqueue.store.control``.

A control read or write that DynamoDB refuses for a passing reason never fails the run: it is handed to the
run's ``refused`` callback (which logs and counts it, or re-raises what is not passing) and the run goes on
without (not paused; plain order without a lane). Taking slots is the exception: its refusal reaches the
caller, which pauses and looks again.
"""

from __future__ import annotations

import random

from taskqueue.core.clock import Clock
from taskqueue.core.errors import TaskQueueError
from taskqueue.core.handshake import WakeRecord
from taskqueue.core.lanes import LANE_VIEW_SECONDS, LaneView
from taskqueue.store import TaskStore, Token
from taskqueue.work.claim_lanes import LAZY_LANE_VIEW_SECONDS, ClaimLanes
from taskqueue.work.control_parts import Refused
from taskqueue.work.queue_record import PAUSE_CHECK_SECONDS, RecordView

__all__ = ["LAZY_LANE_VIEW_SECONDS", "PAUSE_CHECK_SECONDS", "ClaimControl", "Refused"]


class ClaimControl(RecordView, ClaimLanes):
    """One run's control: the queue's record and pause (``queue_record``), its claim lane (``claim_lanes``), and the
    running limit's slots (here)."""

    def __init__(
        self, store: TaskStore, queue: str, owner: str, clock: Clock, rng: random.Random, refused: Refused
    ) -> None:
        self._store = store
        self._queue = queue
        self._owner = owner
        self._clock = clock
        self._rng = rng
        self._refused = refused
        self._next_pause_check = 0.0
        self._lane: Token | None = None
        self._view: LaneView | None = None
        self._next_view = 0.0
        self._lost_lately = False
        self._others_seen: dict[str, tuple[float, int]] = {}
        self._lanes_until_ms: int | None = None  # a lazy join's lane lease, until the claim deadline
        self._view_seconds = LANE_VIEW_SECONDS
        self._consistent_view = True
        self._shard_owner = False  # a lazy joiner (the worker) reads only the shards its lane owns
        self.record: WakeRecord | None = None  # the queue's record as this run last read it (any read)
        self.record_read_ms = 0  # when (epoch ms)

    @property
    def queue(self) -> str:
        return self._queue

    # ---- the queue-wide running limit -------------------------------------------------------------

    def take_slots(self, wanted: int, *, watcher: bool = False, guess: bool = False) -> list[Token] | None:
        """Slots of the queue's running limit for up to ``wanted`` claims (none: every slot is held); ``None``
        when the queue has no limit. A refused slot read or write raises: the caller pauses and looks again (a
        refusal is not the limit, so it must not end the run as the limit does). ``watcher``: this run watches the
        queue (``store/control.py``: the watcher's long lease); ``guess``: try slots before reading them (a stream start)."""
        if self._store.running_limit(self._queue) is None:
            return None
        return self._store.acquire_slots(self._queue, self._owner, wanted, self._rng, watcher=watcher, guess=guess)

    def free_slot(self, slot: Token) -> bool:
        """Give a slot back; ``False`` if that failed (it lapses with its lease: the limit is one lower till then)."""
        try:
            self._store.free_token(slot)
        except TaskQueueError as exc:
            if not self._refused("freeing a running-limit slot", exc, "letting it lapse with its lease"):
                raise
            return False
        return True
