"""What a Matcher's execution environment remembers of the calls (matching/call_cache.py): bounded, oldest first
forgotten, a call known by its id and ttl together."""

import pytest

from taskqueue.matching.call_cache import CallCache, KnownCall


def test_past_its_limit_the_oldest_learned_call_is_forgotten_first():
    cache = CallCache(limit=2)
    for n in range(3):
        cache.put(f"call-{n}", 100, KnownCall("Q#gender=*#language=fr", n))
    assert len(cache) == 2 and not cache.knows("call-0", 100)
    assert cache.get("call-2", 100) == KnownCall("Q#gender=*#language=fr", 2)


def test_a_callers_id_that_comes_back_as_a_new_call_is_not_taken_for_the_old_one():
    cache = CallCache()
    cache.put("order-42", 1_000, KnownCall("Q#gender=*#language=fr", 1))
    assert cache.get("order-42", 2_000) is None  # a new call under the same id: another ttl, read again


def test_a_cache_holds_at_least_one_call():
    with pytest.raises(ValueError, match="at least one"):
        CallCache(limit=0)
