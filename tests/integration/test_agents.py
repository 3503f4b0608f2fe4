"""The agent store against moto: fan-out, idempotence, offline, call-ended, depth, and the match transaction (one
or several pairs, all or nothing, the 100-item limit)."""

import pytest

from taskqueue.core.keys import Order
from taskqueue.core.states import TaskStatus
from taskqueue.matching.agent_items import QueueHead
from taskqueue.matching.agents import AgentNotFound, AgentOutcome, AgentStatus
from taskqueue.matching.pairing import Pair, transactions
from taskqueue.matching.rules import AgentProfile, ProfileTooLarge, entry_keys, entry_sort
from tests.agent_support import (  # noqa: F401 (fixtures)
    AGENT_TABLE,
    agent_table,
    agents,
    all_items,
    create_calls,
    entries_by_agent,
    make_agent_store,
    pair_of,
    profile,
)

FR_ANY = "Q#gender=*#language=fr"


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
    result = agents.match_pairs([pair_of(store, agents, call_id, FR_ANY)])
    assert result.committed and [p.call.task_id for p, _ in result.matched] == [call_id]
    assert entries_by_agent(agent_table) == {}
    agent = agents.get("ana")
    assert (agent.status, agent.busy_with) == (AgentStatus.BUSY, call_id)
    done = store.get(call_id)
    assert done.status is TaskStatus.SUCCESS and done.attempts == 0  # never claimed: straight from waiting to matched
    assert done.result["agentId"] == "ana" and done.result["waitedMs"] == 3000
    assert [c.task_id for c in store.candidates("calls", 10)] == []  # out of the ReadyIndex


def test_several_pairs_commit_in_one_transaction(agents, agent_table, store, clock):
    for agent_id in ("ana", "bob", "cem"):
        agents.put_available(profile(agent_id, ["fr"]))
        clock.advance(1)
    calls = create_calls(store, clock.now_ms(), {"language": "fr"}, 3)
    heads = [QueueHead(FR_ANY, a.queue_sort, a.agent_id, a.name, a.available_ms, a.entries)
             for a in (agents.get(agent_id) for agent_id in ("ana", "bob", "cem"))]
    candidates = {c.task_id: c for c in store.candidates("calls", 10)}
    pairs = [Pair(candidates[c], head, 0) for c, head in zip(calls, heads)]
    assert transactions(pairs) == [pairs]  # 3 x (call + agent + 4 entries) = 18 items: one request
    assert agents.match_pairs(pairs).committed
    assert {store.get(c).result["agentId"] for c in calls} == {"ana", "bob", "cem"}
    assert entries_by_agent(agent_table) == {}


def test_a_cancelled_transaction_writes_none_of_its_pairs_and_names_what_failed(agents, agent_table, store, clock):
    agents.put_available(profile("ana", ["fr"]))
    clock.advance(1)
    agents.put_available(profile("bob", ["fr"]))
    first, second = create_calls(store, clock.now_ms(), {"language": "fr"}, 2)
    ana = pair_of(store, agents, first, FR_ANY)
    agents.offline("ana")
    bob = pair_of(store, agents, second, FR_ANY)
    result = agents.match_pairs([ana, bob])
    assert not result.committed and result.lost is not None
    assert (result.lost.agents, result.lost.calls) == ({"ana"}, frozenset())
    assert {store.get(c).status for c in (first, second)} == {TaskStatus.PENDING}
    assert agents.get("bob").status is AgentStatus.QUEUED and len(entries_by_agent(agent_table)["bob"]) == 4


def test_an_agent_is_never_given_to_two_callers(agents, agent_table, store, clock):
    agents.put_available(profile("ana", ["fr", "en"]))
    first, second = create_calls(store, clock.now_ms(), {"language": "fr"}, 2)
    pair_1, pair_2 = pair_of(store, agents, first, FR_ANY), pair_of(store, agents, second, FR_ANY)
    assert agents.match_pairs([pair_1]).committed
    lost = agents.match_pairs([pair_2])  # the stale head: the agent is gone
    assert not lost.committed and lost.lost.agents == {"ana"} and not lost.lost.calls
    assert lost.reasons[0] == "None" and "ConditionalCheckFailed" in lost.reasons[1:]
    assert store.get(second).status is TaskStatus.PENDING  # nothing of the lost transaction was written


def test_a_call_that_stopped_waiting_is_lost_not_matched(agents, agent_table, store, clock):
    agents.put_available(profile("ana", ["fr"]))
    (expired,) = create_calls(store, clock.now_ms(), {"language": "fr"}, ttl=5)
    pair = pair_of(store, agents, expired, FR_ANY)
    clock.advance(6)  # past its patience; DynamoDB has not deleted it yet
    result = agents.match_pairs([pair])
    assert not result.committed and result.lost.calls == {expired} and not result.lost.agents
    assert agents.get("ana").status is AgentStatus.QUEUED
    assert len(entries_by_agent(agent_table)["ana"]) == 4


def test_offline_between_head_and_match_makes_the_match_lose(agents, store, clock):
    agents.put_available(profile("ana", ["fr"]))
    pair = pair_of(store, agents, create_calls(store, clock.now_ms(), {"language": "fr"})[0], FR_ANY)
    agents.offline("ana")
    assert agents.match_pairs([pair]).lost.agents == {"ana"}


def test_pairs_over_the_100_item_limit_are_refused_before_any_write(agents, agent_table, store, clock):
    agents.put_available(profile("ana", ["fr"]))
    (call_id,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    pair = pair_of(store, agents, call_id, FR_ANY)
    big = Pair(pair.call, QueueHead(FR_ANY, pair.head.sort, "ana", "Ana", 0, tuple(f"Q#k{i}" for i in range(99))), 0)
    with pytest.raises(ProfileTooLarge, match="101 items.*limit of 100"):
        agents.match_pairs([big])
    with pytest.raises(ProfileTooLarge, match="101 items"):
        transactions([big])
    assert store.get(call_id).status is TaskStatus.PENDING and agents.get("ana").status is AgentStatus.QUEUED


def test_call_ended_puts_the_agent_at_the_back_of_its_queues(agents, agent_table, store, clock):
    agents.put_available(profile("ana", ["fr"]))
    clock.advance(1)
    agents.put_available(profile("bob", ["fr"]))
    call_id = create_calls(store, clock.now_ms(), {"language": "fr"})[0]
    assert agents.match_pairs([pair_of(store, agents, call_id, FR_ANY)]).committed
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
    assert agents.match_pairs([pair_of(store, agents, call_id, FR_ANY)]).committed
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
    from taskqueue.matching.agents import AgentStoreError

    agents = make_agent_store(dynamodb, store, clock)
    with pytest.raises(AgentStoreError, match="AGENT_TABLE_NAME"):
        agents.head(FR_ANY)
    assert AGENT_TABLE in str(agents.settings)
