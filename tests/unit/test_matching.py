"""The pure part of matching: profiles, fan-out of combinations, queue keys, sort keys, the 100-item limit."""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskqueue.core.errors import ConfigError, InvalidAgentInput, InvalidTaskInput
from taskqueue.core.keys import Order
from taskqueue.matching.rules import (
    ANY,
    MAX_ENTRIES_PER_AGENT,
    IdleAgent,
    IdlePool,
    MatchSettings,
    ProfileTooLarge,
    call_queue_key,
    check_profile_size,
    combination_count,
    combinations,
    entry_keys,
    entry_sort,
    everyone_key,
    parse_entry_sort,
    parse_profile,
    preferences_key,
    serves,
)
from tests.agent_support import greedy

ATTRS = ("gender", "language")
values = st.lists(st.sampled_from(["en", "fr", "es", "de", "pt-br", "f", "m", "x"]), max_size=4, unique=True)


def agent(languages, genders, agent_id="a1"):
    return parse_profile({"agentId": agent_id, "attributes": {"language": languages, "gender": genders}}, ATTRS)


def test_fan_out_of_the_seed_example():
    keys = entry_keys(agent(["en", "fr"], ["f"]))
    assert keys == sorted(
        [
            "Q#gender=*#language=*",
            "Q#gender=*#language=en",
            "Q#gender=*#language=fr",
            "Q#gender=f#language=*",
            "Q#gender=f#language=en",
            "Q#gender=f#language=fr",
        ]
    )


def test_caller_preferences_name_one_queue_and_no_preference_is_a_wildcard():
    assert preferences_key({"language": "FR ", "gender": "f"}, ATTRS) == "Q#gender=f#language=fr"
    assert preferences_key({"language": "fr"}, ATTRS) == "Q#gender=*#language=fr"
    for none in (None, "", "any", "*", "ANY"):
        assert preferences_key({"language": "fr", "gender": none}, ATTRS) == "Q#gender=*#language=fr"
    assert preferences_key(None, ATTRS) == "Q#gender=*#language=*"
    assert call_queue_key({"caller": "x", "preferences": {"gender": "m"}}, ATTRS) == "Q#gender=m#language=*"


@pytest.mark.parametrize(
    "preferences, message",
    [
        ({"skill": "billing"}, "unknown preference"),
        ({"language": ["fr"]}, "not valid"),
        ({"language": "f#r"}, "not valid"),
        ("fr", "must be an object"),
    ],
)
def test_bad_preferences_are_refused_with_the_reason(preferences, message):
    with pytest.raises(InvalidAgentInput, match=message):
        preferences_key(preferences, ATTRS)


@given(values, values)
def test_fan_out_covers_exactly_the_combinations_the_agent_serves(languages, genders):
    profile = agent(languages, genders)
    keys = entry_keys(profile)
    assert len(keys) == len(set(keys)) == combination_count(profile) == (len(languages) + 1) * (len(genders) + 1)
    # Every caller the agent can serve finds the agent's entry under its key, and no other caller does.
    for language, gender in itertools.product([*languages, "zz", None], [*genders, "zz", None]):
        key = preferences_key({"language": language, "gender": gender}, ATTRS)
        can_serve = language in (None, *languages) and gender in (None, *genders)
        assert (key in keys) == can_serve
        assert serves(profile.attributes, key) == can_serve


@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4, unique=True))
def test_any_attribute_set_fans_out_as_a_product(attributes):
    body = {"agentId": "a", "attributes": {name: ["v1", "v2"] for name in attributes}}
    profile = parse_profile(body, attributes)
    assert len(combinations(profile)) == 3 ** len(attributes)
    assert all(set(c) == set(attributes) for c in combinations(profile))


def test_values_are_normalized_and_deduplicated():
    profile = agent([" FR", "fr", "En"], ["F"])
    assert profile.attributes == {"gender": ("f",), "language": ("en", "fr")}


@pytest.mark.parametrize(
    "body, message",
    [
        ({"agentId": "a#1"}, "agentId"),
        ({"agentId": ""}, "agentId"),
        ({"agentId": "a", "attributes": {"skill": ["x"]}}, "unknown agent attribute"),
        ({"agentId": "a", "attributes": {"language": ["*"]}}, "not valid"),
        ({"agentId": "a", "attributes": {"language": [1]}}, "not valid"),
        ({"agentId": "a", "attributes": {"language": {"fr": 1}}}, "must be a list"),
        ({"agentId": "a", "attributes": ["fr"]}, "must be an object"),
    ],
)
def test_bad_profiles_are_refused(body, message):
    with pytest.raises(InvalidAgentInput, match=message):
        parse_profile(body, ATTRS)


def test_profile_past_the_transaction_limit_is_refused_naming_limit_and_count():
    # 10 languages and 8 genders: 11 * 9 = 99 entries, + call + agent = 101 items.
    languages = [f"l{i}" for i in range(10)]
    genders = [f"g{i}" for i in range(8)]
    with pytest.raises(ProfileTooLarge, match=r"99 attribute combinations.*101 items.*limit of 100"):
        agent(languages, genders)
    # 98 entries is the most that fits: 97 + 1 is not a product here, so check the boundary directly.
    largest = agent([f"l{i}" for i in range(13)], [f"g{i}" for i in range(6)])  # 14 * 7 = 98
    assert combination_count(largest) == MAX_ENTRIES_PER_AGENT
    check_profile_size(largest)


@given(st.integers(0, 10**15 - 1), st.integers(0, 10**15 - 1), st.text("abcxyz0123-", min_size=1, max_size=10), st.text("abcxyz0123-", min_size=1, max_size=10))
def test_entry_sort_orders_by_time_then_agent_id_and_round_trips(t1, t2, id1, id2):
    s1, s2 = entry_sort(t1, id1), entry_sort(t2, id2)
    assert parse_entry_sort(s1) == (t1, id1)
    if t1 != t2:
        assert (s1 < s2) == (t1 < t2)
    elif id1 != id2:
        assert s1 != s2  # the tie-breaker: two agents available in the same millisecond never collide


def test_entry_sort_refuses_times_outside_the_range():
    with pytest.raises(InvalidTaskInput):
        entry_sort(-1, "a")
    with pytest.raises(InvalidTaskInput):
        entry_sort(10**15, "a")


def test_match_settings_from_env():
    settings = MatchSettings.from_env({"AGENT_TABLE_NAME": "agents", "AGENT_ORDER": "lifo", "MATCH_ATTRIBUTES": "skill, language"})
    assert settings.agent_order is Order.LIFO
    assert settings.attributes == ("language", "skill")
    assert MatchSettings.from_env({"AGENT_TABLE_NAME": "agents"}).agent_order is Order.FIFO


@pytest.mark.parametrize(
    "env, name",
    [
        ({}, "AGENT_TABLE_NAME"),
        ({"AGENT_TABLE_NAME": "t", "AGENT_ORDER": "random"}, "AGENT_ORDER"),
        ({"AGENT_TABLE_NAME": "t", "MATCH_ATTRIBUTES": "Lang!"}, "MATCH_ATTRIBUTES"),
        ({"AGENT_TABLE_NAME": "t", "MATCH_RETRIES": "-1"}, "MATCH_RETRIES"),
    ],
)
def test_bad_match_settings_name_the_variable(env, name):
    with pytest.raises(ConfigError, match=name):
        MatchSettings.from_env(env)


def test_wildcard_is_the_reserved_any_value():
    assert ANY == "*"


# ---- which waiting calls a pass can match (IdlePool) ---------------------------------------------------------

def idle(agent_id: str, since: int, languages, genders) -> IdleAgent:
    return IdleAgent(entry_sort(since, agent_id), agent_id, frozenset(entry_keys(agent(languages, genders, agent_id))))


LANGS = ["en", "fr", "de"]
call_keys = st.lists(st.builds(lambda lang, gender: preferences_key({"language": lang, "gender": gender}, ATTRS),
                               st.sampled_from([None, *LANGS]), st.sampled_from([None, "f", "m"])), max_size=40)
idle_agents = st.lists(
    st.tuples(st.integers(0, 50), st.lists(st.sampled_from(LANGS), max_size=2, unique=True),
              st.lists(st.sampled_from(["f", "m"]), max_size=1, unique=True)),
    max_size=8,
).map(lambda specs: [idle(f"a{i}", since, langs, genders) for i, (since, langs, genders) in enumerate(specs)])


@given(call_keys, idle_agents, st.sampled_from(list(Order)))
def test_the_pool_picks_exactly_the_calls_the_matches_will_take_in_fifo_order(calls, agents, order):
    pool = IdlePool(agents, order)
    taken = [(i, got.agent_id) for i, key in enumerate(calls) if (got := pool.take(key)) is not None]
    assert taken == greedy(calls, agents, order)
    # FIFO among the calls an agent fits: the calls taken keep their order, and a call left out had no idle agent
    # of its combination when its turn came (every later call of that combination is left out too).
    assert pool.empty == (len(taken) == len({a.agent_id for a in agents}))


def test_a_call_deep_in_the_queue_gets_the_idle_agent_no_earlier_call_fits():
    agents = [idle("ana", 10, ["fr"], ["f"])]
    calls = [preferences_key({"language": "de"}, ATTRS)] * 1499 + [preferences_key({"language": "fr"}, ATTRS)]
    pool = IdlePool(agents)
    assert [i for i, key in enumerate(calls) if pool.take(key)] == [1499] and pool.empty


def test_the_everyone_key_is_among_every_agents_entries():
    assert everyone_key(ATTRS) == "Q#gender=*#language=*"
    assert everyone_key(ATTRS) in entry_keys(agent([], []))
    assert everyone_key(ATTRS) in entry_keys(agent(["en", "fr"], ["m"]))


def test_agent_timeout_settings():
    assert MatchSettings(agent_table_name="t").agent_timeout_seconds == 120
    assert MatchSettings(agent_table_name="t").seen_since_ms(1_000_000) == 1_000_000 - 120_000
    assert MatchSettings(agent_table_name="t", agent_timeout_seconds=0).seen_since_ms(1_000_000) is None
    assert MatchSettings.from_env({"AGENT_TABLE_NAME": "t", "AGENT_TIMEOUT_SECONDS": "30"}).agent_timeout_seconds == 30
    with pytest.raises(ConfigError, match="AGENT_TIMEOUT_SECONDS='-1' is not valid"):
        MatchSettings.from_env({"AGENT_TABLE_NAME": "t", "AGENT_TIMEOUT_SECONDS": "-1"})
