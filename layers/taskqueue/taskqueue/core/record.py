"""A queue's record (pure): the queue's control item (``taskId`` ``queue#<name>``) as one read returned it.

It holds what every reader of the queue needs in one small item: ``paused`` (``taskq pause``), the delayed head
(``taskqueue.core.delayed_head``), when the queue's scheduled wake-up fires (``wakeAt``,
``taskqueue.core.wake_schedule``) and whether a group was ever put on the queue's ring (``hasGroups``,
``taskqueue.core.fairness``). It has no ``taskStatus`` or index keys: no index or listing sees it; the table's stream
carries its changes, and a resume (``paused`` cleared) starts the queue's worker as a new task does."""

from __future__ import annotations

from dataclasses import dataclass

# A global secondary index shows a write late, "typically within a fraction of a second": a reader that must have
# seen every entry written before some moment looks no sooner than this long after it.
INDEX_LAG_ALLOWANCE_SECONDS = 1.0
# A writer's clock may be off (the client runs on any host): times it stamps are trusted within this much.
PRODUCER_CLOCK_SKEW_SECONDS = 5.0


@dataclass(frozen=True)
class QueueRecord:
    paused: bool = False
    # The queue's delayed head, kept on the same item so every read of the record carries it.
    delayed_head_ms: int | None = None
    delayed_seq: int = 0
    delayed_at_ms: int = 0
    # When the queue's scheduled wake-up at its delayed head fires; None: none set.
    wake_at_ms: int | None = None
    # Set once a producer put a group on the queue's ring: until then a look reads no ring.
    has_groups: bool = False
