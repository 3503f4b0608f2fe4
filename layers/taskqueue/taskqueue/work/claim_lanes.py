"""A claiming run's claim lane among concurrent claimers: taking one (at once, or lazily when it meets another
claimer), reading the lanes, and planning which candidates to try first (the rules: ``taskqueue.core.lanes``; the
items: ``taskqueue.store.control``). Part of ``ClaimControl`` (``taskqueue.work.claim_control``).
"""

from __future__ import annotations

from collections.abc import Sequence

from taskqueue.core.errors import TaskQueueError
from taskqueue.core.lanes import (
    LANE_JOIN_SECONDS,
    LANE_MARGIN_SECONDS,
    LANE_VIEW_AFTER_LOSS_SECONDS,
    OTHERS_PATIENCE_LOOKS,
    OTHERS_PATIENCE_SECONDS,
    LaneView,
    claim_order,
    claim_window,
    owned_shards,
    shard_view,
)
from taskqueue.store import Candidate, Token
from taskqueue.work.control_parts import ControlPart

# A worker that joined its lanes late (``join(eager=False)``: it met another claimer) reads the lanes this often,
# eventually consistent: a stale view costs a lost claim at most, after which it reads them again. The read is paid
# per worker per second at any rate (docs/scaling.md); twice within the 2 s a worker waits before it takes another
# lane's task.
LAZY_LANE_VIEW_SECONDS = 1.0


class ClaimLanes(ControlPart):
    """Mixed into ``ClaimControl``: this run's lane, its view of the lanes, and the plan of its claims."""

    _lane: Token | None
    _view: LaneView | None
    _next_view: float
    _lost_lately: bool
    _others_seen: dict[str, tuple[float, int]]
    _lanes_until_ms: int | None
    _view_seconds: float
    _consistent_view: bool
    _shard_owner: bool

    def join(self, claim_seconds: float, *, eager: bool = True) -> None:
        """Take a claim lane for the claim window when several claimers may run (CLAIM_LANES > 1). ``eager`` False:
        only note the window; the lane is taken by ``join_now`` once this run meets another claimer (it is a
        helper, it lost a claim, or it wants to wake a helper), so a lone claimer never pays for lanes."""
        if self._store.settings.claim_lanes <= 1:
            return
        until_ms = self._clock.now_ms() + int((claim_seconds + LANE_MARGIN_SECONDS) * 1000)
        if not eager:
            self._lanes_until_ms = until_ms
            self._view_seconds = LAZY_LANE_VIEW_SECONDS
            self._consistent_view = False
            self._shard_owner = True
            return
        self._take_lane(until_ms)
        if self._lane is not None:
            self._clock.sleep(LANE_JOIN_SECONDS)

    def join_now(self, *, settle: bool = False) -> None:
        """A lazy joiner meets another claimer: take its lane now (once). ``settle``: wait LANE_JOIN_SECONDS first
        reading the lanes, as an eager join does (a helper started with others)."""
        if self._lanes_until_ms is None or self._lane is not None:
            return
        until_ms, self._lanes_until_ms = self._lanes_until_ms, None
        self._take_lane(until_ms)
        if self._lane is not None and settle:
            self._clock.sleep(LANE_JOIN_SECONDS)

    def _take_lane(self, until_ms: int) -> None:
        try:
            self._lane = self._store.take_lane(self._queue, self._owner, until_ms, self._rng)
        except TaskQueueError as exc:  # without a lane this run claims in plain order: slower under a herd, correct
            if not self._refused("taking a claim lane", exc, "claiming in plain order"):
                raise

    def leave(self) -> None:
        if self._lane is None:
            return
        try:
            self._store.free_lane(self._lane)
        except TaskQueueError as exc:  # it lapses at the end of the claim window anyway
            if not self._refused("giving the claim lane back", exc, "letting it lapse"):
                raise
        self._lane = None

    def window(self, capacity: int) -> int:
        """How many claimable tasks to read so the plan sees its whole window (among the lanes of its shards)."""
        return claim_window(self._planning_view(), capacity)

    def _planning_view(self) -> LaneView | None:
        view = self._current_view()
        return shard_view(view, self._store.settings.queue_shards) if self._shard_owner else view

    def shards(self) -> tuple[int, ...] | None:
        """The shards this run reads (``taskqueue.core.lanes.owned_shards``): ``None``, every shard."""
        if not self._shard_owner:
            return None
        return owned_shards(self._current_view(), self._store.settings.queue_shards)

    def plan(self, candidates: Sequence[Candidate], capacity: int | None = None) -> list[Candidate]:
        """The candidates to try, in order (``taskqueue.core.lanes.claim_order``); ``capacity`` None: the window is
        all of ``candidates`` (a Matcher's pass)."""
        # With several shards, the lanes reading this run's shards (``taskqueue.core.lanes.shard_view``).
        view = self._planning_view()
        if capacity is None:
            capacity = -(-len(candidates) // (view.lanes if view else 1)) or 1
        plan = claim_order(
            candidates,
            _task_id,
            view,
            capacity,
            self._others_seen,
            self._clock.monotonic(),
            OTHERS_PATIENCE_SECONDS,
            OTHERS_PATIENCE_LOOKS,
        )
        self._others_seen = plan.others_seen
        self._lost_lately = False
        return plan.order

    def lost_a_claim(self) -> None:
        """Workers came or went (or a view was stale): read the lanes again before the next plan (a lazy joiner
        that claimed alone so far takes its lane now: another claimer is there)."""
        self._lost_lately = True
        self.join_now()

    @property
    def has_lane(self) -> bool:
        return self._lane is not None

    @property
    def alone(self) -> bool:
        """A lazy joiner that has met no other claimer so far (``join_now`` not called): the lone watcher."""
        return self._lanes_until_ms is not None and self._lane is None

    def room_for_another(self) -> bool:
        """May one more worker claim alongside (CLAIM_LANES > 1 and a lane is free)? Without a lane (more workers
        than lanes, or a refused lane write) no. A lazy joiner takes its lane first, so the helper sees it."""
        self.join_now()
        view = self._current_view()
        return view is not None and len(view.held) < self._store.settings.claim_lanes

    def _current_view(self) -> LaneView | None:
        """This run's place among the claimers now, read again every LANE_VIEW_SECONDS and after a lost claim."""
        if self._lane is None:
            return None
        now = self._clock.monotonic()
        after_loss = self._lost_lately and now >= self._next_view - self._view_seconds + LANE_VIEW_AFTER_LOSS_SECONDS
        if self._view is None or after_loss or now >= self._next_view:
            try:
                self._view = self._store.lane_view(self._lane, consistent=self._consistent_view)
                self._next_view = now + self._view_seconds
            except TaskQueueError as exc:
                if not self._refused("reading the claim lanes", exc, "keeping the last view"):
                    raise
        return self._view


def _task_id(candidate: Candidate) -> str:
    return candidate.task_id
