"""Agent matching, the pure part: profiles, the fan-out of attribute combinations, entry keys and sizes.

An agent serves every *combination* of one value per matching attribute, where each attribute may also be
``*`` (the caller has no preference for it). A caller's preferences name exactly one combination, so one
strongly consistent query of that combination's partition finds the agent who has waited longest:

    agent {"language": ["en", "fr"], "gender": ["f"]}  ->  (2 + 1) * (1 + 1) = 6 queue entries
        Q#gender=*#language=*   Q#gender=*#language=en   Q#gender=*#language=fr
        Q#gender=f#language=*   Q#gender=f#language=en   Q#gender=f#language=fr
    caller {"language": "fr"}   ->  Q#gender=*#language=fr

Every entry of one availability has the same sort key "<available since, ``keys.encode_time``>#<agentId>":
ascending order is the time the agent became available (FIFO), the agent id breaks ties.
Nothing here does I/O; ``agents.py`` writes what these functions compute.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from taskqueue.core.errors import InvalidAgentInput, InvalidField
from taskqueue.core.keys import Order, decode_time, encode_time
from taskqueue.core.settings import read_int, read_required, read_variable

ANY = "*"
ENTRY_PREFIX = "Q#"
AGENT_PREFIX = "AGENT#"
PROFILE_SORT = "PROFILE"
# DynamoDB's limit on the items of one TransactWriteItems request.
MAX_TRANSACT_ITEMS = 100
# A match writes the call and the agent item besides the agent's entries.
MATCH_FIXED_ITEMS = 2
MAX_ENTRIES_PER_AGENT = MAX_TRANSACT_ITEMS - MATCH_FIXED_ITEMS
DEFAULT_ATTRIBUTES = ("language", "gender")
# The values each numeric MATCH_* variable may take, both ends included (read by settings.read_int).
MATCH_BOUNDS: dict[str, tuple[float, float]] = {
    "MATCH_RETRIES": (0, 20),
    "MATCH_RETRY_BASE_MS": (0, 10_000),
    "MATCH_CALLS_PER_PASS": (1, 1_000_000),
    "AGENT_TIMEOUT_SECONDS": (0, 86_400),
    "MATCH_HELPER_MIN_AGENTS": (0, 1_000_000),
}
_VALUE = re.compile(r"^[a-z0-9][a-z0-9_.+-]{0,63}$")
_ATTRIBUTE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_AGENT_ID_MAX = 128
_NO_PREFERENCE = {None, "", ANY, "any"}
_PROFILE_FIELDS = ("agentId", "name", "attributes")


class ProfileTooLarge(InvalidAgentInput):
    """An agent profile whose transaction would pass DynamoDB's 100-item TransactWriteItems limit."""


@dataclass(frozen=True)
class MatchSettings:
    """The Matcher's knobs (environment variables in brackets)."""

    agent_table_name: str  # AGENT_TABLE_NAME
    attributes: tuple[str, ...] = DEFAULT_ATTRIBUTES  # MATCH_ATTRIBUTES, e.g. "language,gender"
    agent_order: Order = Order.FIFO  # AGENT_ORDER: FIFO serves the longest-waiting agent, LIFO the newest
    queue: str = "calls"  # MATCH_QUEUE: the task queue whose tasks are calls
    max_match_retries: int = 4  # MATCH_RETRIES: lost races per call before it is handed back
    retry_base_ms: int = 20  # MATCH_RETRY_BASE_MS: jittered backoff base after a lost race
    # MATCH_CALLS_PER_PASS: waiting calls a pass may read, in FIFO order, looking for those an idle agent fits. A pass
    # stops reading earlier once every idle agent is spoken for (docs/matcher.md, "The bound").
    calls_per_pass: int = 100_000
    # AGENT_TIMEOUT_SECONDS: an agent not seen (available, heartbeat, call ended) for this long is not matched, and
    # the Matcher takes it offline when it meets it at the head of a queue; 0: agents never time out.
    agent_timeout_seconds: int = 120
    # MATCH_HELPER_MIN_AGENTS: a matcher that does not plan (a helper, started alongside the planner) takes
    # part only when at least this many agents are idle; fewer, the planner writes them in a few transactions sooner
    # than a helper could read the snapshot, so the helper leaves after one count (docs/matcher.md). 0: always.
    helper_min_agents: int = 100

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", validate_attributes(self.attributes))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> MatchSettings:
        env = os.environ if env is None else env
        return cls(
            agent_table_name=read_required(env, "AGENT_TABLE_NAME", "the DynamoDB agent table"),
            attributes=read_variable(env, "MATCH_ATTRIBUTES", ",".join(DEFAULT_ATTRIBUTES), _parse_attributes),
            agent_order=read_variable(env, "AGENT_ORDER", "FIFO", _parse_agent_order),
            queue=read_variable(env, "MATCH_QUEUE", "calls", str),
            max_match_retries=read_int(env, "MATCH_RETRIES", "4", MATCH_BOUNDS),
            retry_base_ms=read_int(env, "MATCH_RETRY_BASE_MS", "20", MATCH_BOUNDS),
            calls_per_pass=read_int(env, "MATCH_CALLS_PER_PASS", "100000", MATCH_BOUNDS),
            agent_timeout_seconds=read_int(env, "AGENT_TIMEOUT_SECONDS", "120", MATCH_BOUNDS),
            helper_min_agents=read_int(env, "MATCH_HELPER_MIN_AGENTS", "100", MATCH_BOUNDS),
        )

    def seen_since_ms(self, now_ms: int) -> int | None:
        """An agent last seen at or before this time (epoch ms) is timed out; ``None`` when agents never time out."""
        return None if self.agent_timeout_seconds == 0 else now_ms - self.agent_timeout_seconds * 1000


def _parse_agent_order(raw: str) -> Order:
    try:
        return Order(raw.upper())
    except ValueError:
        raise ValueError("use FIFO (longest-waiting agent) or LIFO") from None


def _parse_attributes(raw: str) -> tuple[str, ...]:
    try:
        return validate_attributes(a.strip() for a in raw.split(","))
    except InvalidAgentInput as exc:
        raise ValueError(str(exc)) from None


@dataclass(frozen=True)
class AgentProfile:
    """Who an agent is and what they can serve: attribute name -> sorted, normalized values."""

    agent_id: str
    name: str
    attributes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def validate_attributes(names: Iterable[str]) -> tuple[str, ...]:
    result = tuple(names)
    if not result:
        raise InvalidAgentInput("at least one matching attribute is needed")
    for name in result:
        if not isinstance(name, str) or not _ATTRIBUTE.match(name):
            raise InvalidAgentInput(f"attribute name {name!r} is not valid: use a-z, 0-9 and '_', starting with a letter")
    if len(set(result)) != len(result):
        raise InvalidAgentInput(f"attribute names repeat: {list(result)}")
    return tuple(sorted(result))


def normalize_value(value: object, attribute: str) -> str:
    """Attribute values compare case-insensitively: ' FR ' and 'fr' are the same language."""
    text = value.strip().casefold() if isinstance(value, str) else None
    if text is None or not _VALUE.match(text):
        raise InvalidAgentInput(
            f"value {value!r} of attribute {attribute!r} is not valid: use 1-64 letters, digits, '_', '.', '+' or '-'"
        )
    return text


def validate_agent_id(agent_id: object) -> str:
    if (
        not isinstance(agent_id, str)
        or not 0 < len(agent_id) <= _AGENT_ID_MAX
        or "#" in agent_id
        or not agent_id.isprintable()
    ):
        raise InvalidAgentInput(f"agentId must be 1-{_AGENT_ID_MAX} printable characters without '#', got {agent_id!r}")
    return agent_id


def parse_profile(body: Mapping[str, Any], attributes: Sequence[str]) -> AgentProfile:
    """An agent profile from an event: {"agentId", "name"?, "attributes": {attribute: [values]}}.

    An attribute the agent has no value for is allowed (the agent then serves only callers without a
    preference for it); an attribute outside ``attributes`` (MATCH_ATTRIBUTES) is refused.
    """
    if not isinstance(body, Mapping):
        raise InvalidAgentInput(f"an agent must be a JSON object, got {type(body).__name__}")
    unknown = sorted(str(k) for k in body if k not in _PROFILE_FIELDS)
    if unknown:
        raise InvalidAgentInput(f"unknown agent field(s) {unknown}; an agent has {list(_PROFILE_FIELDS)}")
    agent_id = validate_agent_id(body.get("agentId"))
    name = body.get("name", agent_id)
    if not isinstance(name, str) or not 0 < len(name) <= 200:
        raise InvalidAgentInput(f"agent name must be a string of 1-200 characters, got {name!r}")
    given = body.get("attributes", {})
    if not isinstance(given, Mapping):
        raise InvalidAgentInput(f"agent attributes must be an object of attribute -> list of values, got {given!r:.100}")
    unknown = sorted(set(given) - set(attributes))
    if unknown:
        raise InvalidAgentInput(f"unknown agent attribute(s) {unknown}; matching attributes are {sorted(attributes)}")
    values: dict[str, tuple[str, ...]] = {}
    for attribute in sorted(attributes):
        raw = given.get(attribute, [])
        raw_list = [raw] if isinstance(raw, str) else raw
        if not isinstance(raw_list, (list, tuple)):
            raise InvalidAgentInput(f"attribute {attribute!r} must be a list of values, got {raw!r:.100}")
        # normalize_value refuses "*": it is reserved for "no preference".
        normalized = sorted({normalize_value(v, attribute) for v in raw_list})
        values[attribute] = tuple(normalized)
    profile = AgentProfile(agent_id=agent_id, name=name, attributes=values)
    check_profile_size(profile)
    return profile


def combination_count(profile: AgentProfile) -> int:
    count = 1
    for values in profile.attributes.values():
        count *= len(values) + 1
    return count


def check_profile_size(profile: AgentProfile) -> None:
    """Refuse a profile whose match transaction (call + agent + one delete per entry) passes 100 items."""
    entries = combination_count(profile)
    items = entries + MATCH_FIXED_ITEMS
    if items > MAX_TRANSACT_ITEMS:
        raise ProfileTooLarge(
            f"agent {profile.agent_id!r} can serve {entries} attribute combinations; matching the agent would write "
            f"{items} items in one TransactWriteItems, over DynamoDB's limit of {MAX_TRANSACT_ITEMS} items per "
            f"transaction (at most {MAX_ENTRIES_PER_AGENT} combinations per agent): give the agent fewer values"
        )


def combinations(profile: AgentProfile) -> list[dict[str, str]]:
    """Every combination the agent can serve: one value (or ``*``) per matching attribute."""
    names = sorted(profile.attributes)
    choices = [(ANY, *profile.attributes[name]) for name in names]
    return [dict(zip(names, chosen)) for chosen in itertools.product(*choices)]


def queue_key(combination: Mapping[str, str]) -> str:
    """The partition key of one combination's agent queue, attributes in name order."""
    return ENTRY_PREFIX + "#".join(f"{name}={combination[name]}" for name in sorted(combination))


def entry_keys(profile: AgentProfile) -> list[str]:
    """The partition keys of every queue entry an agent gets when it becomes available (fan-out)."""
    return sorted(queue_key(c) for c in combinations(profile))


def preferences_key(preferences: Mapping[str, Any] | None, attributes: Sequence[str]) -> str:
    """The one agent queue a caller's preferences name; a missing, empty, 'any' or '*' value is no preference."""
    preferences = preferences or {}
    if not isinstance(preferences, Mapping):
        raise InvalidAgentInput(f"preferences must be an object of attribute -> value, got {preferences!r:.100}")
    unknown = sorted(set(preferences) - set(attributes))
    if unknown:
        raise InvalidAgentInput(f"unknown preference(s) {unknown}; matching attributes are {sorted(attributes)}")
    combination: dict[str, str] = {}
    for attribute in attributes:
        value = preferences.get(attribute)
        if isinstance(value, str) and value.strip().casefold() in _NO_PREFERENCE or value is None:
            combination[attribute] = ANY
        else:
            combination[attribute] = normalize_value(value, attribute)
    return queue_key(combination)


def call_queue_key(payload: Mapping[str, Any], attributes: Sequence[str]) -> str:
    """The agent queue a call task's payload ({"caller": ..., "preferences": {...}}) asks for."""
    if not isinstance(payload, Mapping):
        raise InvalidAgentInput("a call's payload must be an object")
    return preferences_key(payload.get("preferences"), attributes)


def check_call_payload(payload: Mapping[str, Any], attributes: Sequence[str]) -> None:
    """Refuse, at creation, a call whose preferences no agent could ever meet (a number for a language, an
    attribute the contact center does not match on): it would otherwise wait PENDING until its TTL.
    Raises ``InvalidField`` naming ``payload.preferences``."""
    try:
        call_queue_key(payload, attributes)
    except InvalidAgentInput as exc:
        raise InvalidField(f"a call's payload.preferences can never match an agent: {exc}", "payload.preferences") from exc


def attributes_from_env(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """MATCH_ATTRIBUTES alone (CreateTasks checks calls with it; it needs no agent table)."""
    env = os.environ if env is None else env
    return read_variable(env, "MATCH_ATTRIBUTES", ",".join(DEFAULT_ATTRIBUTES), _parse_attributes)


def everyone_key(attributes: Sequence[str]) -> str:
    """The combination with no preference at all: every queued agent has an entry there (each attribute's fan-out
    includes ``*``), so one partition lists every agent waiting for a call."""
    return queue_key({name: ANY for name in attributes})


@dataclass(frozen=True)
class IdleAgent:
    """A queued agent as its entry in the everyone partition shows it: its place (sort key), every key it serves,
    and what a match records of it (its name, since when it is available)."""

    sort: str
    agent_id: str
    keys: frozenset[str]
    name: str = ""
    available_ms: int = 0


class IdlePool:
    """Which waiting calls a pass can match, decided in memory before any claim: the calls, in FIFO order, each
    take the agent the match would give them now (the head of their combination among the agents still idle:
    the longest waiting for FIFO, the most recent for LIFO), as the match transactions will, one after another.
    A call whose combination has no idle agent left cannot match in this pass and is never claimed."""

    def __init__(self, agents: Iterable[IdleAgent], order: Order = Order.FIFO) -> None:
        by_key: dict[str, list[IdleAgent]] = {}
        for agent in agents:
            for key in agent.keys:
                by_key.setdefault(key, []).append(agent)
        for queue in by_key.values():
            queue.sort(key=lambda a: a.sort, reverse=order is Order.LIFO)
        self._by_key = by_key
        self._next = dict.fromkeys(by_key, 0)
        self._taken: set[str] = set()
        self._left = len({a.agent_id for queue in by_key.values() for a in queue})

    def take(self, key: str) -> IdleAgent | None:
        """The idle agent a call of ``key`` gets, now no longer idle; ``None`` if no idle agent serves ``key``."""
        queue = self._by_key.get(key, [])
        index = self._next.get(key, 0)
        while index < len(queue) and queue[index].agent_id in self._taken:
            index += 1
        self._next[key] = index
        if index == len(queue):
            return None
        agent = queue[index]
        self._taken.add(agent.agent_id)
        self._left -= 1
        return agent

    @property
    def empty(self) -> bool:
        """Every idle agent is spoken for: no later call can match in this pass."""
        return self._left == 0


def entry_sort(available_ms: int, agent_id: str) -> str:
    """Sort key of an agent's entries: ascending = longest waiting first; the agent id breaks ties."""
    return f"{encode_time(available_ms)}#{validate_agent_id(agent_id)}"


def parse_entry_sort(sort_key: str) -> tuple[int, str]:
    """Inverse of entry_sort: (available since, epoch ms; agent id)."""
    time_part, _, agent_id = sort_key.partition("#")
    return decode_time(time_part), agent_id


def agent_key(agent_id: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": AGENT_PREFIX + validate_agent_id(agent_id)}, "sk": {"S": PROFILE_SORT}}


def serves(profile_attributes: Mapping[str, Sequence[str]], key: str) -> bool:
    """Whether an agent with these attributes can serve the queue ``key`` (used by tests and checks)."""
    if not key.startswith(ENTRY_PREFIX):
        return False
    for part in key[len(ENTRY_PREFIX) :].split("#"):
        name, _, value = part.partition("=")
        if value != ANY and value not in profile_attributes.get(name, ()):
            return False
    return True
