"""A pass's pairs (taskqueue.matching.pairing): the plan is the match rule applied call after call, the pairs are cut into
transactions of at most 100 items in plan order, and a cancelled transaction's reasons name the calls and agents
that failed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskqueue.core.keys import Order
from taskqueue.matching.agent_items import QueueHead
from taskqueue.matching.pairing import Pair, Snapshot, Waiting, lost_in, plan, transactions
from taskqueue.matching.rules import (
    MAX_TRANSACT_ITEMS,
    IdleAgent,
    ProfileTooLarge,
    entry_keys,
    entry_sort,
    parse_profile,
    preferences_key,
)
from taskqueue.store import Candidate
from tests.agent_support import greedy

ATTRS = ("gender", "language")
LANGS = ["en", "fr", "de"]


def idle(agent_id: str, since: int, languages: list[str], genders: list[str]) -> IdleAgent:
    profile = parse_profile({"agentId": agent_id, "attributes": {"language": languages, "gender": genders}}, ATTRS)
    return IdleAgent(entry_sort(since, agent_id), agent_id, frozenset(entry_keys(profile)), agent_id.title(), since)


def waiting(index: int, key: str) -> Waiting:
    return Waiting(Candidate(f"0#{index:05d}", f"call-{index}", "calls", 0, 2_000_000_000, None), key, 1000 + index)


call_keys = st.lists(st.builds(lambda lang, gender: preferences_key({"language": lang, "gender": gender}, ATTRS),
                               st.sampled_from([None, *LANGS]), st.sampled_from([None, "f", "m"])), max_size=40)
idle_agents = st.lists(
    st.tuples(st.integers(0, 50), st.lists(st.sampled_from(LANGS), min_size=1, max_size=3, unique=True),
              st.lists(st.sampled_from(["f", "m"]), max_size=1, unique=True)),
    max_size=12,
).map(lambda specs: [idle(f"a{i}", since, langs, genders) for i, (since, langs, genders) in enumerate(specs)])


@given(call_keys, idle_agents, st.sampled_from(list(Order)))
def test_the_plan_is_the_match_rule_applied_one_call_after_another(keys, agents, order):
    pairs = plan(Snapshot(tuple(waiting(i, k) for i, k in enumerate(keys)), tuple(agents)), order)
    assert [(int(p.call.task_id.split("-")[1]), p.head.agent_id) for p in pairs] == greedy(keys, agents, order)
    for pair in pairs:  # each pair records the call's combination and the agent as its entry shows it
        agent = next(a for a in agents if a.agent_id == pair.head.agent_id)
        assert pair.head.queue_key in agent.keys and set(pair.head.entries) == agent.keys
        assert (pair.head.sort, pair.head.available_ms, pair.created_ms) == (agent.sort, agent.available_ms,
                                                                            1000 + int(pair.call.task_id.split("-")[1]))


@given(call_keys, idle_agents, st.data())
def test_planning_again_without_matched_pairs_keeps_the_rest_of_the_plan(keys, agents, data):
    """Why matchers that read the same snapshot agree even after some of them committed: taking matched pairs out
    of the snapshot leaves the plan of the others as it was."""
    snapshot = Snapshot(tuple(waiting(i, k) for i, k in enumerate(keys)), tuple(agents))
    pairs = plan(snapshot)
    done = data.draw(st.lists(st.sampled_from(pairs), unique=True) if pairs else st.just([]))
    rest = plan(snapshot.without((p.call.task_id for p in done), (p.head.agent_id for p in done)))
    assert rest == [p for p in pairs if p not in done]


def pair(index: int, entries: int) -> Pair:
    head = QueueHead("Q#k", entry_sort(index, f"a{index}"), f"a{index}", "A", index, tuple(f"Q#e{i}" for i in range(entries)))
    return Pair(waiting(index, "Q#k").call, head, 0)


@given(st.lists(st.integers(1, 98), max_size=40))
def test_transactions_hold_at_most_100_items_in_plan_order(sizes):
    pairs = [pair(i, n) for i, n in enumerate(sizes)]
    chunks = transactions(pairs)
    assert [p for chunk in chunks for p in chunk] == pairs
    assert all(sum(p.items for p in chunk) <= MAX_TRANSACT_ITEMS for chunk in chunks)
    # Greedy: a chunk is closed only when the next pair would not fit.
    for chunk, following in zip(chunks, chunks[1:]):
        assert sum(p.items for p in chunk) + following[0].items > MAX_TRANSACT_ITEMS


def test_an_agent_of_98_entries_fills_a_transaction_alone_and_99_is_refused():
    assert [len(c) for c in transactions([pair(0, 98), pair(1, 98)])] == [1, 1]
    assert pair(0, 98).items == MAX_TRANSACT_ITEMS
    with pytest.raises(ProfileTooLarge, match="101 items, over DynamoDB's limit of 100"):
        transactions([pair(0, 99)])


def test_the_cancellation_reasons_name_the_calls_and_agents_whose_items_failed():
    chunk = [pair(0, 2), pair(1, 2), pair(2, 2)]  # 4 items each: call, agent, 2 entries
    reasons = ["None"] * 4 + ["ConditionalCheckFailed", "None", "None", "None"] + ["None", "TransactionConflict", "None", "None"]
    lost = lost_in(chunk, reasons)
    assert (lost.calls, lost.agents, lost.named) == ({"call-1"}, {"a2"}, True)
    # A whole-request conflict (TransactionConflictException) names no item: nothing is lost, the plan is retried.
    assert not lost_in(chunk, ["TransactionConflictException"]).named
