"""A Matcher pass's pairs, the pure part: which waiting call takes which idle agent, how the pairs go into
transactions, and what a cancelled transaction says about them. No I/O (``matcher.py`` reads and decides,
``agents.AgentStore.match_pairs`` writes).

A pass reads a *snapshot*: the idle agents (one strongly consistent query) and the waiting calls in FIFO order.
``plan`` walks the calls oldest first and gives each the head of its combination among the agents still idle
(``matching.IdlePool``): the pairs one match at a time would make, decided in memory. Several pairs then go in one
TransactWriteItems (``transactions``: up to 100 items; a pair writes its call, its agent and each of the agent's
entries), so a match costs a share of one request instead of a head read, a claim and a transaction of its own.

A transaction cancelled because the snapshot went stale (a hang-up, an agent gone offline) names the items that
failed (``lost_in``) and the plan is made again without them (``Snapshot.without``), no new read needed: taking
pairs out of a snapshot leaves the plan of the others as it was. With several matchers, one plan is shared: its
chunks travel as text (``encode_chunk``) and each is written by the matcher that takes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from taskqueue.core.keys import Order
from taskqueue.matching.agent_items import QueueHead, head_of
from taskqueue.matching.rules import MATCH_FIXED_ITEMS, MAX_TRANSACT_ITEMS, IdleAgent, IdlePool, ProfileTooLarge
from taskqueue.store import Candidate

# DynamoDB's cancellation reasons that mean "this item changed under us" (a lost race), not a malformed request.
LOST_REASONS = frozenset({"ConditionalCheckFailed", "TransactionConflict"})


@dataclass(frozen=True)
class Waiting:
    """A waiting call as a pass sees it: its index entry, the agent queue its preferences name, its creation time."""

    call: Candidate
    key: str
    created_ms: int


@dataclass(frozen=True)
class Pair:
    """One match to make: the call and the agent it takes (``head.queue_key`` is the call's combination)."""

    call: Candidate
    head: QueueHead
    created_ms: int

    @property
    def items(self) -> int:
        """Items this pair writes in a TransactWriteItems: the call, the agent, one delete per entry."""
        return MATCH_FIXED_ITEMS + len(self.head.entries)


@dataclass(frozen=True)
class Snapshot:
    """What a pass read: the waiting calls it walked (FIFO) and the idle agents."""

    waiting: tuple[Waiting, ...]
    agents: tuple[IdleAgent, ...]

    def without(self, calls: Iterable[str] = (), agents: Iterable[str] = ()) -> Snapshot:
        """The snapshot less calls (by task id) and agents (by agent id) that were matched or lost."""
        gone_calls, gone_agents = set(calls), set(agents)
        return Snapshot(tuple(w for w in self.waiting if w.call.task_id not in gone_calls),
                        tuple(a for a in self.agents if a.agent_id not in gone_agents))


def plan(snapshot: Snapshot, order: Order = Order.FIFO) -> list[Pair]:
    """The pairs the match rule makes from ``snapshot``, oldest call first: each call takes the head of its
    combination among the agents no older call took (FIFO: the longest waiting; LIFO: the most recent)."""
    pool = IdlePool(snapshot.agents, order)
    pairs: list[Pair] = []
    for waiting in snapshot.waiting:
        if pool.empty:
            break
        agent = pool.take(waiting.key)
        if agent is not None:
            pairs.append(Pair(waiting.call, head_of(agent, waiting.key), waiting.created_ms))
    return pairs


def transactions(pairs: Sequence[Pair], limit: int = MAX_TRANSACT_ITEMS) -> list[list[Pair]]:
    """The pairs in plan order, cut into TransactWriteItems of at most ``limit`` items each."""
    chunks: list[list[Pair]] = []
    size = 0
    for pair in pairs:
        if pair.items > limit:  # refused when the agent was queued; a guard against items written before the limit
            raise ProfileTooLarge(
                f"matching agent {pair.head.agent_id!r} would write {pair.items} items, over DynamoDB's limit of "
                f"{limit} items per TransactWriteItems: take the agent offline and queue it with fewer values"
            )
        if not chunks or size + pair.items > limit:
            chunks.append([])
            size = 0
        chunks[-1].append(pair)
        size += pair.items
    return chunks


@dataclass(frozen=True)
class Lost:
    """What a cancelled match transaction says: the calls and the agents whose items failed (a call no longer
    waiting: matched by another, hung up, expired; an agent no longer queued in that availability, or not seen
    lately). Both empty: the request as a whole met another transaction, with no item named."""

    calls: frozenset[str] = field(default_factory=frozenset)
    agents: frozenset[str] = field(default_factory=frozenset)

    @property
    def named(self) -> bool:
        return bool(self.calls or self.agents)


def lost_in(chunk: Sequence[Pair], reasons: Sequence[str]) -> Lost:
    """Which pairs' items failed, from the cancellation reasons (one per item, in the order ``AgentStore`` writes
    them: per pair the call, the agent, then its entries). Fewer reasons than items (a whole-request conflict):
    nothing named."""
    if len(reasons) != sum(pair.items for pair in chunk):
        return Lost()
    calls: set[str] = set()
    agents: set[str] = set()
    at = 0
    for pair in chunk:
        mine = reasons[at : at + pair.items]
        at += pair.items
        if mine[0] in LOST_REASONS:
            calls.add(pair.call.task_id)
        if any(reason in LOST_REASONS for reason in mine[1:]):
            agents.add(pair.head.agent_id)
    return Lost(frozenset(calls), frozenset(agents))


def encode_chunk(chunk: Sequence[Pair]) -> str:
    """One transaction's pairs as text, for a shared plan's chunk item (``store.matches.MatchPlans``): about
    300 bytes a pair, so a chunk of 100 items stays far below DynamoDB's 400 KB item limit."""
    return json.dumps([
        [p.call.task_id, p.call.ready_sort, p.call.shard, p.call.ttl, p.call.not_before_ms, p.created_ms,
         p.head.queue_key, p.head.sort, p.head.agent_id, p.head.name, p.head.available_ms, list(p.head.entries)]
        for p in chunk
    ], separators=(",", ":"))


def decode_chunk(text: str, queue: str) -> list[Pair]:
    """The pairs ``encode_chunk`` wrote, for a call queue ``queue``."""
    pairs = []
    for task_id, ready_sort, shard, ttl, not_before, created, key, sort, agent_id, name, available, entries in json.loads(text):
        call = Candidate(ready_sort, task_id, queue, shard, ttl, not_before)
        pairs.append(Pair(call, QueueHead(key, sort, agent_id, name, available, tuple(entries)), created))
    return pairs
