"""Matchers at once on the SERIALIZED moto server (one global request lock: conditional writes and
transactions are atomic, as in DynamoDB; plain moto is not under concurrent requests).

The server is the local engine's emulator (local/emulator/server.py, via tests/serialized_moto.py) in its own process.
8 matchers, 500 calls (50 of them impatient: shed), 200 agents with mixed profiles. Every committed
transaction is recorded in commit order and replayed: each match took an agent who was queued (never given
twice) and was the head of the caller's queue at that moment (the longest-waiting eligible agent).
"""

import threading

import pytest

from taskqueue.matching.agents import AgentOutcome
from taskqueue.matching.rules import parse_profile
from tests.agent_support import create_calls, pair_of
from tests.matcher_load import check_final_state, make_world, replay, run_matchers
from tests.serialized_moto import SerializedMoto


@pytest.fixture(scope="module")
def server():
    with SerializedMoto(record_transactions=True) as running:
        yield running


def test_eight_matchers_500_calls_200_agents(server):
    world = make_world(server, agents=200, calls=500, seed=7, shed=50, name="load")
    reports, _ = run_matchers(world, 8)
    assert all(r.stopped_by == "no-progress" for r in reports), [r.stopped_by for r in reports]
    replayed = replay(world, matchers=8)
    outcome = check_final_state(world)
    matched = sum(r.matched for r in reports)
    assert replayed["matches"] == matched == outcome["matched"] == replayed["agents_matched"]
    assert outcome["shed"] == 50
    assert outcome["matched"] + outcome["waiting"] + outcome["shed"] == 500
    assert matched > 150  # most agents found a caller


def test_two_matchers_taking_different_agents_do_not_conflict(server):
    world = make_world(server, agents=0, calls=0, seed=1, name="pair")
    tasks, agents = world.stores()
    attributes = world.match_settings.attributes
    for agent_id, language in (("fr-agent", "fr"), ("de-agent", "de")):
        profile = parse_profile({"agentId": agent_id, "attributes": {"language": [language], "gender": ["f"]}}, attributes)
        assert agents.put_available(profile) is AgentOutcome.QUEUED
    fr_call = create_calls(tasks, tasks._clock.now_ms(), {"language": "fr"})[0]
    de_call = create_calls(tasks, tasks._clock.now_ms() + 1, {"language": "de"})[0]
    first_tasks, first_agents = world.stores()
    second_tasks, second_agents = world.stores()
    # Interleaved: both read their pairs before either commits. With a shared queue-version item (the seed
    # design) the second commit would abort; here the transactions touch disjoint items and both commit.
    pair_1 = pair_of(first_tasks, first_agents, fr_call, "Q#gender=*#language=fr")
    pair_2 = pair_of(second_tasks, second_agents, de_call, "Q#gender=*#language=de")
    server.clear_commits()
    assert second_agents.match_pairs([pair_2]).committed
    assert first_agents.match_pairs([pair_1]).committed
    touched = [
        {str(sorted((op := next(iter(item.values())))["Key" if "Key" in op else "Item"].items())[:2]) for item in commit["TransactItems"]}
        for commit in server.commits
    ]
    assert len(touched) == 2 and not touched[0] & touched[1]


def test_eight_matchers_on_disjoint_agents_never_abort_each_other(server):
    world = make_world(server, agents=0, calls=0, seed=1, name="disjoint")
    tasks, agents = world.stores()
    attributes = world.match_settings.attributes
    languages = ["en", "fr", "es", "de", "it", "nl", "pl", "sv"]
    calls = {}
    for i, language in enumerate(languages):
        agents.put_available(parse_profile({"agentId": f"agent-{language}", "attributes": {"language": [language]}}, attributes))
        calls[language] = create_calls(tasks, tasks._clock.now_ms() + i, {"language": language})[0]
    barrier = threading.Barrier(len(languages))
    outcomes: dict[str, bool] = {}

    def match(language: str) -> None:
        my_tasks, my_agents = world.stores()
        pair = pair_of(my_tasks, my_agents, calls[language], f"Q#gender=*#language={language}")
        barrier.wait()  # all eight transactions go out together
        outcomes[language] = my_agents.match_pairs([pair]).committed

    threads = [threading.Thread(target=match, args=(language,)) for language in languages]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes == dict.fromkeys(languages, True)
