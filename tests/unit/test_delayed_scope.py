"""The delayed head's scope (``taskqueue.core.delayed_head``): which delayed partitions a look reads while the head is due."""

from __future__ import annotations

import dataclasses

from taskqueue.core.delayed_head import DelayedScope, scope_holds, scope_of
from taskqueue.core.record import INDEX_LAG_ALLOWANCE_SECONDS, QueueRecord

LAG_MS = int(INDEX_LAG_ALLOWANCE_SECONDS * 1000)


def record(seq: int, at_ms: int) -> QueueRecord:
    return dataclasses.replace(QueueRecord(), delayed_seq=seq, delayed_at_ms=at_ms)


def test_a_search_late_enough_for_the_index_gives_the_partitions_it_found_at_the_seq_it_covered() -> None:
    scope = scope_of([(0, "b"), (1, None)], record(7, 10_000), 10_000 + LAG_MS)
    assert scope == DelayedScope(frozenset({(0, "b"), (1, None)}), 7)


def test_a_search_too_soon_after_an_announcement_or_without_a_record_gives_no_scope() -> None:
    # The entry announced at 10,000 may not show in the index yet: the search may have missed its partition.
    assert scope_of([(0, "b")], record(7, 10_000), 10_000 + LAG_MS - 1) is None
    assert scope_of([(0, "b")], None, 10_000) is None


def test_the_scope_holds_until_an_announcement_that_is_not_the_readers_own() -> None:
    scope = DelayedScope(frozenset({(0, "b")}), 7)
    assert scope_holds(scope, 7, 0)
    assert scope_holds(scope, 9, 2)  # two releases of this run: their partitions it adds itself
    assert not scope_holds(scope, 8, 0)  # another writer's entry, partition unknown: read them all
    assert not scope_holds(scope, 10, 2)
    assert not scope_holds(None, 7, 0)
