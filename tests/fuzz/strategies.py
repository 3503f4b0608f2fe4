"""Hypothesis strategies shared by the fuzz tests: JSON garbage, near-valid mutations of the files in events/,
and the words the handlers look for (so mutations land near the branches that matter)."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

from tests.support import load_event

# Words the handlers compare against: a mutation that uses them gets past the first checks.
WORDS = [
    "", "work", "calls", "nope", "wo rk", "work\n", "a#b", "Scheduled Event", "aws.events", "aws:sns", "aws:dynamodb",
    "INSERT", "MODIFY", "REMOVE", "PENDING", "TAKEN", "SUCCESS", "entry", "Service", "dynamodb.amazonaws.com",
    "String", "Number", "agentAvailable", "agentOffline", "callEnded", "queueDepth", "fr", "en", "f", "*", "any",
    "agent-0042", "detail-type", "detail", "source", "queue", "Records", "Sns", "S", "N", "L", "M", "NULL", "BOOL",
    "{\"queue\": \"work\"}", "{\"queue\": \"calls\"}", "{}", "[]", "null", "\u2028", "\x00", "é" * 3,
]
KEYS = [
    "queue", "count", "priority", "ttlSeconds", "payload", "maxAttempts", "delaySeconds", "taskIds", "detail-type",
    "source", "detail", "version", "id", "time", "region", "account", "resources", "Records", "Sns", "Message",
    "MessageAttributes", "Value", "Type", "EventSource", "eventSource", "eventName", "dynamodb", "NewImage",
    "OldImage", "SequenceNumber", "userIdentity", "taskStatus", "taskId", "entity", "agentId", "action", "agent",
    "attributes", "language", "gender", "name", "callId", "preferences", "reason", "S", "N",
]
BOUNDARY_INTS = [-1, 0, 1, 2, 3, 9, 99, 100, 101, 999, 1000, 1001, 3600, 10**9, 315360000, 315360001, 2**63, -(2**63)]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(BOUNDARY_INTS),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 1.0, 2.5, -0.0, 1e300]),
    st.sampled_from(WORDS),
    st.text(max_size=12),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=6)), inner, max_size=4),
    ),
    max_leaves=12,
)
# Values a handler's event may be replaced by whole (a direct invoke of anything).
garbage_events = st.one_of(
    json_values,
    st.dictionaries(st.sampled_from(KEYS), json_values, max_size=5),
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``value`` (dict keys, list indexes), the root included."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths(child, prefix + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += paths(child, prefix + (index,))
    return found


def _parent(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path[:-1]:
        value = value[step]
    return value


@st.composite
def mutated(draw: st.DrawFn, base: Any, max_changes: int = 3) -> Any:
    """``base`` with 1..max_changes changes: a value replaced (often by a word or boundary number), a key dropped
    or added, a value wrapped in a list or turned into its JSON text."""
    value = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, max_changes))):
        path = draw(st.sampled_from(paths(value)))
        op = draw(st.sampled_from(["replace", "replace", "drop", "add", "wrap", "stringify"]))
        if op == "add":
            target = value
            for step in path:
                target = target[step]
            if isinstance(target, dict):
                target[draw(st.sampled_from(KEYS) | st.text(max_size=6))] = draw(json_values)
            elif isinstance(target, list):
                target.append(draw(json_values))
            continue
        if not path:  # the root itself
            if op == "drop":
                continue
            value = _changed(draw, value, op)
            continue
        parent = _parent(value, path)
        if op == "drop":
            del parent[path[-1]]
        else:
            parent[path[-1]] = _changed(draw, parent[path[-1]], op)
    return value


def _changed(draw: st.DrawFn, value: Any, op: str) -> Any:
    if op == "wrap":
        return [value]
    if op == "stringify":
        return json.dumps(value, default=str)
    return draw(json_values)


def from_files(*names: str) -> st.SearchStrategy[Any]:
    """One of the named event files, as it is."""
    return st.sampled_from([load_event(name) for name in names]).map(copy.deepcopy)


def near(*names: str, max_changes: int = 3) -> st.SearchStrategy[Any]:
    """A near-valid mutation of one of the named event files."""
    return st.sampled_from([load_event(name) for name in names]).flatmap(lambda e: mutated(e, max_changes))
