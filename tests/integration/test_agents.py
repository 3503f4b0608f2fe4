"""The agent store against moto: fan-out, idempotence, offline, call-ended, depth, and the match transaction."""

import pytest

from taskqueue.agents import AgentNotFound, AgentOutcome, AgentStatus, MatchOutcome
from taskqueue.keys import Order
from taskqueue.matching import AgentProfile, ProfileTooLarge, entry_keys, entry_sort
from taskqueue.states import TaskStatus
from tests.agent_support import (  # noqa: F401 (fixtures)
    AGENT_TABLE,
    agent_table,
    agents,
    all_items,
    create_calls,
    entries_by_agent,
    make_agent_store,
    profile,
)

FR_ANY = "Q#gender=*#language=fr"


def claim_call(store, call_id):
    candidate = next(c for c in store.candidates("calls", 100) if c.task_id == call_id)
    return store.claim(candidate, "matcher-1")


def test_put_available_fans_out_one_entry_per_combination_in_one_transaction(agents, agent_table, clock):
    ana = profile("ana", ["en", "fr"], ["f"])
    assert agents.put_available(ana) is AgentOutcome.QUEUED
    sort = entry_sort(clock.now_ms(), "ana")
    assert entries_by_agent(agent_table) == {"ana": {(k, sort) for k in entry_keys(ana)}}
    agent = agents.get("ana")
    assert agent.status is AgentStatus.QUEUED and agent.available_ms == clock.now_ms()
    assert set(agent.entries) == set(entry_keys(ana)) and agent.queue_sort == sort


def test_put_available_twice_is_idempotent_and_keeps_the_agents_place(agents, agent_table, clock):
    agents.put_available(profile("ana", ["fr"]))
    before = all_items(agent_table)
    clock.advance(5)
    assert agents.put_available(profile("ana", ["fr"])) is AgentOutcome.ALREADY_QUEUED
    # Nothing changed but the sign of life: the agent item's lastSeen (its entries keep their place).
    seen = [dict(item, lastSeen=None) for item in all_items(agent_table)]
    assert sorted(map(str, seen)) == sorted(map(str, [dict(item, lastSeen=None) for item in before]))
    assert agents.get("ana").last_seen_ms == clock.now_ms() and agents.get("ana").available_ms == clock.now_ms() - 5000


def test_profile_change_while_queued_replaces_entries_and_keeps_the_place(agents, agent_table, clock):
    agents.put_available(profile("ana", ["fr", "en"]))
    first = agents.get("ana").queue_sort
    clock.advance(5)
    assert agents.put_available(profile("ana", ["fr", "de"])) is AgentOutcome.REQUEUED
    new = profile("ana", ["fr", "de"])
    assert entries_by_agent(agent_table) == {"ana": {(k, first) for k in entry_keys(new)}}
    # Every entry, kept or new, lists the agent's current keys (a match deletes exactly those).
    heads = [agents.head(k) for k in entry_keys(new)]
    assert all(set(h.entries) == set(entry_keys(new)) for h in heads)


def test_head_is_the_longest_waiting_agent_with_ties_broken_by_id(agents, clock):
    agents.put_available(profile("zoe", ["fr"]))
    agents.put_available(profile("amy", ["fr"]))  # same millisecond: the id breaks the tie
    clock.advance(1)
    agents.put_available(profile("bob", ["fr"], ["m"]))
    assert agents.head(FR_ANY).agent_id == "amy"
    assert agents.head("Q#gender=m#language=fr").agent_id == "bob"
    assert agents.head("Q#gender=*#language=de") is None
    assert agents.head(FR_ANY, Order.LIFO).agent_id == "bob"


def test_depth_per_combination_without_a_scan(agents):
    agents.put_available(profile("a", ["fr", "en"], ["f"]))
    agents.put_available(profile("b", ["fr"], ["m"]))
    assert agents.depth(FR_ANY) == 2
    assert agents.depth("Q#gender=f#language=en") == 1
    assert agents.depth("Q#gender=m#language=en") == 0


def test_offline_leaves_every_queue_and_is_idempotent(agents, agent_table):
    agents.put_available(profile("ana", ["fr", "en"]))
    assert agents.offline("ana") is AgentOutcome.OFFLINE
    assert entries_by_agent(agent_table) == {}
    assert agents.get("ana").status is AgentStatus.OFFLINE
    assert agents.offline("ana") is AgentOutcome.ALREADY_OFFLINE
    # Available again later: queued anew.
    assert agents.put_available(profile("ana", ["fr"])) is AgentOutcome.QUEUED
    with pytest.raises(AgentNotFound, match="nobody"):
        agents.offline("nobody")


def test_match_completes_the_call_deletes_every_entry_and_marks_the_agent_busy(agents, agent_table, store, clock):
    agents.put_available(profile("ana", ["fr", "en"]))
    call_id = create_calls(store, clock.now_ms(), {"language": "fr"})[0]
    clock.advance(3)
    call = claim_call(store, call_id)
    result = agents.match(call, "matcher-1", agents.head(FR_ANY))
    assert result.outcome is MatchOutcome.MATCHED
    assert entries_by_agent(agent_table) == {}
    agent = agents.get("ana")
    assert (agent.status, agent.busy_with) == (AgentStatus.BUSY, call_id)
    done = store.get(call_id)
    assert done.status is TaskStatus.SUCCESS
    assert done.result["agentId"] == "ana" and done.result["waitedMs"] == 3000


def test_an_agent_is_never_given_to_two_callers(agents, agent_table, store, clock):
    agents.put_available(profile("ana", ["fr", "en"]))
    first, second = create_calls(store, clock.now_ms(), {"language": "fr"}, 2)
    head = agents.head(FR_ANY)
    call1, call2 = claim_call(store, first), claim_call(store, second)
    assert agents.match(call1, "matcher-1", head).outcome is MatchOutcome.MATCHED
    lost = agents.match(call2, "matcher-1", head)  # the stale head: the agent is gone
    assert lost.outcome is MatchOutcome.AGENT_TAKEN
    assert lost.reasons[0] == "None" and "ConditionalCheckFailed" in lost.reasons[1:]
    assert store.get(second).status is TaskStatus.TAKEN  # nothing of the lost transaction was written


def test_a_call_whose_lease_passed_is_lost_not_matched(agents, agent_table, store, clock):
    agents.put_available(profile("ana", ["fr"]))
    call = claim_call(store, create_calls(store, clock.now_ms(), {"language": "fr"})[0])
    clock.advance(store.settings.lease_seconds + 1)
    result = agents.match(call, "matcher-1", agents.head(FR_ANY))
    assert result.outcome is MatchOutcome.CALL_LOST
    assert agents.get("ana").status is AgentStatus.QUEUED
    assert len(entries_by_agent(agent_table)["ana"]) == 4


def test_offline_between_head_and_match_makes_the_match_lose(agents, store, clock):
    agents.put_available(profile("ana", ["fr"]))
    call = claim_call(store, create_calls(store, clock.now_ms(), {"language": "fr"})[0])
    head = agents.head(FR_ANY)
    agents.offline("ana")
    assert agents.match(call, "matcher-1", head).outcome is MatchOutcome.AGENT_TAKEN


def test_call_ended_puts_the_agent_at_the_back_of_its_queues(agents, agent_table, store, clock):
    agents.put_available(profile("ana", ["fr"]))
    clock.advance(1)
    agents.put_available(profile("bob", ["fr"]))
    call_id = create_calls(store, clock.now_ms(), {"language": "fr"})[0]
    assert agents.match(claim_call(store, call_id), "matcher-1", agents.head(FR_ANY)).outcome is MatchOutcome.MATCHED
    assert agents.call_ended("ana", "another-call") is AgentOutcome.STALE
    assert agents.put_available(profile("ana", ["fr"])) is AgentOutcome.STILL_BUSY
    clock.advance(10)
    assert agents.call_ended("ana", call_id) is AgentOutcome.QUEUED
    assert agents.call_ended("ana", call_id) is AgentOutcome.ALREADY_QUEUED
    assert agents.head(FR_ANY).agent_id == "bob"
    assert agents.get("ana").available_ms == clock.now_ms()


def test_an_agent_who_went_offline_during_a_call_stays_offline(agents, store, clock):
    agents.put_available(profile("ana", ["fr"]))
    call_id = create_calls(store, clock.now_ms(), {"language": "fr"})[0]
    agents.match(claim_call(store, call_id), "matcher-1", agents.head(FR_ANY))
    assert agents.offline("ana") is AgentOutcome.OFFLINE
    assert agents.call_ended("ana", call_id) is AgentOutcome.ALREADY_OFFLINE
    assert agents.head(FR_ANY) is None


def test_profile_over_the_limit_is_refused_before_any_write(agents, agent_table):
    # Built directly (parse_profile already refuses it) to show the store refuses it too.
    big = AgentProfile("big", "Big", {"gender": tuple(f"g{i}" for i in range(8)), "language": tuple(f"l{i}" for i in range(10))})
    with pytest.raises(ProfileTooLarge, match=r"99 attribute combinations.*101 items.*limit of 100"):
        agents.put_available(big)
    assert all_items(agent_table) == []


def test_missing_agent_table_is_a_clear_error(dynamodb, store, clock):
    from taskqueue.agents import AgentStoreError

    agents = make_agent_store(dynamodb, store, clock)
    with pytest.raises(AgentStoreError, match="AGENT_TABLE_NAME"):
        agents.head(FR_ANY)
    assert AGENT_TABLE in str(agents.settings)
