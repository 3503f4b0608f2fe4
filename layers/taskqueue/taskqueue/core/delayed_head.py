"""The queue's delayed head (pure rules): when a reader must look at the delayed partitions, and when it may say
they hold nothing earlier than it found.

A queue's delayed partitions (``keys.delayed_key``) hold tasks with a not-before time: retries waiting out their
backoff and tasks created with a delay. They are usually empty, and a query that finds nothing still costs
DynamoDB's minimum (half a read unit), once per shard per look. So the queue's control item (``queue#<name>``,
the record every worker reads anyway: the watcher's linger polls and its pause check) carries ``delayedHead``, a
lower bound of the not-before times in those partitions:

- a *writer* of a delayed entry (a release for a retry, a delayed task, an operator's change of one) writes the
  entry first, then lowers the head to its not-before if it is earlier and, either way, moves ``delayedSeq`` on
  and sets ``delayedAt`` to now (``store.delayed``);
- a *reader* queries the delayed partitions only when the head is due (absent: none to read);
- a reader that looked and found the earliest entry later than the head (or none) *raises* the head, by a write
  conditional on ``delayedSeq`` being the value it read before its look (no writer came in between) and only if
  its look began at least the index's lag allowance after that value's ``delayedAt`` (a GSI shows an entry late:
  every entry whose write the reader saw the record of is in the index by then).

The same reasoning as the wake-up handshake (docs/wakeups.md): two writes to one item are ordered, and the raise
names the state it read, so it can never hide an entry a writer announced. A writer that dies between its entry
and its announcement leaves an entry the head may not cover: the safety net reads the delayed partitions every
minute and lowers the head to what it finds (``safety_net``), as it repairs a lost wake-up.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from taskqueue.core.record import INDEX_LAG_ALLOWANCE_SECONDS, QueueRecord


def delayed_due(head_ms: int | None, now_ms: int) -> bool:
    """Must a reader look at the delayed partitions now (an entry may be due)?"""
    return head_ms is not None and head_ms <= now_ms


def earliest(*heads: int | None) -> int | None:
    """The earliest of several known heads (``None``: nothing known delayed)."""
    known = [h for h in heads if h is not None]
    return min(known, default=None)


def may_raise(seen: QueueRecord, look_started_ms: int, lag_seconds: float = INDEX_LAG_ALLOWANCE_SECONDS) -> bool:
    """May a look that began at ``look_started_ms`` raise the head ``seen`` shows? Only if every entry announced
    by then shows in the index (the lag allowance after the last announcement)."""
    return look_started_ms >= seen.delayed_at_ms + int(lag_seconds * 1000)


def raised(seen: QueueRecord, found_ms: int | None) -> bool:
    """Would writing ``found_ms`` (the earliest entry a look found; ``None``: none) change the head?"""
    if found_ms is None:
        return seen.delayed_head_ms is not None
    return seen.delayed_head_ms is None or found_ms > seen.delayed_head_ms


# A delayed partition by (shard, group); group ``None``: the default group's (``<queue>#<shard>#delayed``).
Part = tuple[int, str | None]


@dataclass(frozen=True)
class DelayedScope:
    """Which delayed partitions hold entries, as a reader's last full look at them (a refresh) found: ``parts``, and the
    record's ``delayedSeq`` that look covered (every entry announced up to it showed in the index: ``may_raise``).

    While the head is due, a look reads these partitions only, not one per group on the ring: a due retry that stays
    behind newer work (LIFO) made every look of a grouped queue read every group's delayed partition until it was shed.
    The scope holds while no entry is announced past ``seq`` but the reader's own (their partitions it adds itself)."""

    parts: frozenset[Part]
    seq: int


def scope_of(found: Iterable[Part], seen: QueueRecord | None, look_started_ms: int) -> DelayedScope | None:
    """The scope a full look that began at ``look_started_ms`` with the record ``seen`` gives: ``None`` (read every
    delayed partition) when some entry ``seen`` announces may not show in the index yet."""
    if seen is None or not may_raise(seen, look_started_ms):
        return None
    return DelayedScope(frozenset(found), seen.delayed_seq)


def scope_holds(scope: DelayedScope | None, record_seq: int, own_announced: int) -> bool:
    """Does ``scope`` still name every delayed partition with an entry, given the record's ``delayedSeq`` as last read
    and the announcements the reader itself made since the scope's look (their partitions it reads anyway)?"""
    return scope is not None and record_seq <= scope.seq + own_announced
