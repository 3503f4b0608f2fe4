"""Which tasks a worker claims first when several claim at once: pure rules, no AWS.

n workers that read the head of a queue together would all try to claim the same first tasks; every loser pays
a failed conditional write and tries again (a herd). Instead each claiming worker holds a lane (leased in the
queue table, ``taskqueue.store.control``) and knows which lanes are held now. Every task belongs to one held
lane, by rendezvous hashing (the lane whose hash with the task id is highest), so a worker whose view is a moment
old (a worker joined or left) disagrees with the others on only the tasks of that one lane. A worker looks at a
window of the next ``n * capacity`` claimable tasks (what the n workers together can start at once) and claims
the tasks of its own lane there, in queue order. When the window holds none of its lane, it takes tasks of
other lanes that it has seen in the window for a moment already (their owners are busy or slow), starting at
a place given by its rank, so a task waits for a busy owner no longer than that moment.

The order bound this gives, stated and tested: a claimed task is never behind more than ``window - 1`` tasks
that were claimable at the read it was claimed from (``window = n * capacity``); alone (n = 1) a worker claims
strictly in the queue's order, as without lanes.

**Shards.** A queue spread over S index shards (QueueShards) would cost every worker one query per shard per look,
so reads per task would grow with S. Instead each of the n lanes held *owns* shards by its rank (``owned_shards``):
with S >= n, the shards whose number is its rank modulo n (each shard exactly one owner); with S < n, the one shard
rank modulo S, shared with the other lanes of that shard, among which the window rule above applies
(``shard_view``). A worker reads only its own shards: about S/n queries per look (at least one), S per round of
all workers, however many shards there are. The order bound across shards is per owner: a claimed task is never
behind more than ``k * capacity - 1`` claimable tasks of its own shards (k lanes sharing them; k = 1: exact order),
and a task waits only for its own shards' lanes, which exist for every shard once the views agree (within
LANE_VIEW_SECONDS). Alone, a worker reads every shard and claims in the queue's order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

# Workers come and go: a claiming worker reads the lanes again this often, and at once after a lost claim. Its
# lane lapses this long after its claim window, should it die without giving it back.
LANE_VIEW_SECONDS = 0.5
LANE_VIEW_AFTER_LOSS_SECONDS = 0.0
LANE_MARGIN_SECONDS = 2.0
# Workers started together (a burst of wake-ups) take their lanes within a moment: one that has just taken its
# lane waits this long before it reads who holds which, instead of believing itself alone.
LANE_JOIN_SECONDS = 0.2
# With none of its lane's tasks in sight, a worker takes another lane's task once it has seen it waiting this
# long, over this many of its looks (so it stays patient however slowly the table answers).
OTHERS_PATIENCE_SECONDS = 2.0
OTHERS_PATIENCE_LOOKS = 3


@dataclass(frozen=True)
class LaneView:
    """A claiming worker's lane and the lanes held now (its own included), as its last read of them showed."""

    lane: int
    held: tuple[int, ...]

    @property
    def lanes(self) -> int:
        return len(self.held)

    @property
    def rank(self) -> int:
        return sorted(self.held).index(self.lane)


def lane_of(task_id: str, held: Collection[int]) -> int:
    """The held lane a task belongs to: the highest hash of (task id, lane), BLAKE2b (stable across processes, and
    well mixed where a CRC of similar ids is not). Adding or removing one lane moves only the tasks of that lane."""
    if not held:
        raise ValueError("no lane is held: a task belongs to one of the held lanes")
    return max(held, key=lambda lane: (_weight(task_id, lane), lane))


def _weight(task_id: str, lane: int) -> bytes:
    return hashlib.blake2b(f"{task_id}#{lane}".encode(), digest_size=8).digest()


def claim_window(view: LaneView | None, capacity: int) -> int:
    """How far down the queue a worker looks: what the workers claiming now can start together."""
    return capacity * (view.lanes if view is not None else 1)


@dataclass(frozen=True)
class ClaimPlan(Generic[T]):
    """The candidates to try, in order, and for each task of another lane in the window since when (monotonic
    seconds) and at how many looks it has been seen there (for the next look)."""

    order: list[T]
    others_seen: dict[str, tuple[float, int]]


def claim_order(
    candidates: Sequence[T],
    task_id_of: Callable[[T], str],
    view: LaneView | None,
    capacity: int,
    seen_since: Mapping[str, tuple[float, int]] | None = None,
    now: float = 0.0,
    patience: float = 0.0,
    patience_looks: int = 1,
) -> ClaimPlan[T]:
    """Alone (no view, or one lane): every candidate, in the queue's order. Among n > 1, within the window: the
    tasks of its lane in queue order; only if there are none, the tasks of other lanes it has seen in the window
    for at least ``patience`` seconds and ``patience_looks`` earlier looks (``seen_since``; their owners are busy:
    counting looks too keeps a worker patient however slow the table answers), from a place given by its rank.
    Everything returned then lies within the first ``claim_window(view, capacity)`` candidates."""
    if view is None or view.lanes == 1:
        return ClaimPlan(list(candidates), {})
    seen_since = seen_since or {}
    window = list(candidates[: claim_window(view, capacity)])
    own = [c for c in window if lane_of(task_id_of(c), view.held) == view.lane]
    others = [c for c in window if lane_of(task_id_of(c), view.held) != view.lane]
    seen_now: dict[str, tuple[float, int]] = {}
    for c in others:
        first, looks = seen_since.get(task_id_of(c), (now, -1))
        seen_now[task_id_of(c)] = (first, looks + 1)
    if own:
        return ClaimPlan(own, seen_now)
    waited = [
        c for c in others if now - seen_now[task_id_of(c)][0] >= patience and seen_now[task_id_of(c)][1] >= patience_looks
    ]
    start = (view.rank * capacity) % len(waited) if waited else 0
    return ClaimPlan(waited[start:] + waited[:start], seen_now)


def owned_shards(view: LaneView | None, shards: int) -> tuple[int, ...] | None:
    """The shards a claiming worker reads: ``None`` (every shard) alone or without a lane, or a queue of one shard;
    else its own (see the module's "Shards")."""
    if view is None or view.lanes == 1 or shards == 1:
        return None
    if shards >= view.lanes:
        return tuple(shard for shard in range(shards) if shard % view.lanes == view.rank)
    return (view.rank % shards,)


def shard_view(view: LaneView | None, shards: int) -> LaneView | None:
    """The lanes that read the same shards as ``view``'s lane (it included): the window rule applies among them
    alone. ``view`` itself when every lane reads every shard."""
    if owned_shards(view, shards) is None or view is None:
        return view
    ranks = sorted(view.held)
    mine = owned_shards(view, shards)
    sharing = tuple(lane for rank, lane in enumerate(ranks) if owned_shards(LaneView(lane, view.held), shards) == mine)
    return LaneView(lane=view.lane, held=sharing)
