"""Event filter patterns: the subset of the EventBridge / Lambda FilterCriteria / SNS filter-policy syntax
that a template is likely to use.

Supported: exact values (strings, numbers, true/false, null), nested keys, ``$or``, and the operators
``prefix``, ``suffix``, ``equals-ignore-case``, ``wildcard`` (``*`` only), ``exists``, ``anything-but``
(a value, a list, or ``{"prefix"|"suffix"|"equals-ignore-case": ...}``) and ``numeric`` (``=``, ``<``,
``<=``, ``>``, ``>=`` pairs). A field whose event value is a list matches if any element matches.
Anything else raises ``PatternError`` (so an unsupported pattern fails loudly, never silently).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_MISSING = object()


class PatternError(ValueError):
    """The pattern uses syntax the local matcher does not implement, or is malformed."""


def parse(pattern: str | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(pattern, str):
        try:
            pattern = json.loads(pattern)
        except ValueError as exc:
            raise PatternError(f"pattern is not JSON: {exc}") from None
    if not isinstance(pattern, Mapping):
        raise PatternError("a pattern must be a JSON object")
    return pattern


def matches(pattern: str | Mapping[str, Any], event: Any) -> bool:
    """Does ``event`` (a decoded JSON value) match ``pattern``?"""
    return _object(parse(pattern), event)


def matches_any(patterns: list[str | Mapping[str, Any]], event: Any) -> bool:
    """Lambda FilterCriteria semantics: a record passes if any filter matches (no filters: all pass)."""
    return not patterns or any(matches(p, event) for p in patterns)


def sns_attributes(message_attributes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """SNS message attributes (``{"name": {"Type"|"DataType": ..., "Value"|"StringValue": ...}}``) as the
    values a filter policy sees: numbers for Number, lists for String.Array, strings otherwise."""
    out: dict[str, Any] = {}
    for name, attr in message_attributes.items():
        kind = attr.get("Type") or attr.get("DataType") or "String"
        value = attr.get("Value", attr.get("StringValue"))
        if kind.startswith("Number"):
            try:
                value = float(value)
            except (TypeError, ValueError):
                pass
        elif kind == "String.Array":
            try:
                value = json.loads(value)
            except (TypeError, ValueError):
                pass
        elif kind == "Binary":
            continue  # SNS filter policies ignore binary attributes
        out[name] = value
    return out


def sns_policy_matches(
    policy: str | Mapping[str, Any] | None,
    message_attributes: Mapping[str, Mapping[str, Any]],
    message: str = "",
    scope: str = "MessageAttributes",
) -> bool:
    """Does an SNS subscription with this FilterPolicy (and FilterPolicyScope) accept the message?"""
    if not policy:
        return True
    if scope == "MessageBody":
        try:
            body = json.loads(message)
        except ValueError:
            return False
        return matches(policy, body)
    return matches(policy, sns_attributes(message_attributes))


# --------------------------------------------------------------------------- the matcher


def _object(pattern: Mapping[str, Any], obj: Any) -> bool:
    for key, rule in pattern.items():
        if key == "$or":
            if not isinstance(rule, list) or not rule:
                raise PatternError("$or takes a non-empty list of patterns")
            if not any(_object(parse(p), obj) for p in rule):
                return False
            continue
        value = obj.get(key, _MISSING) if isinstance(obj, Mapping) else _MISSING
        if isinstance(rule, Mapping):
            if isinstance(value, list):
                if not any(isinstance(v, Mapping) and _object(rule, v) for v in value):
                    return False
            elif not isinstance(value, Mapping) or not _object(rule, value):
                return False
        elif isinstance(rule, list):
            if not _field(rule, value):
                return False
        else:
            raise PatternError(f"the rule for {key!r} must be a list of values/operators or a nested object, not {rule!r}")
    return True


def _field(rules: list[Any], value: Any) -> bool:
    if not rules:
        raise PatternError("an empty list of values matches nothing; give at least one")
    values = value if isinstance(value, list) else [value]
    for rule in rules:
        if isinstance(rule, Mapping):
            if len(rule) != 1:
                raise PatternError(f"an operator object has exactly one key: {rule!r}")
            (op, arg), = rule.items()
            if op == "exists":
                if not isinstance(arg, bool):
                    raise PatternError("exists takes true or false")
                present = value is not _MISSING and not (isinstance(value, list) and not value)
                if present == arg:
                    return True
                continue
            if value is _MISSING:
                continue
            if any(_operator(op, arg, v) for v in values):
                return True
        else:
            if value is _MISSING:
                continue
            if any(_equal(rule, v) for v in values):
                return True
    return False


def _equal(expected: Any, actual: Any) -> bool:
    if expected is None:
        return actual is None
    if isinstance(expected, bool):
        return isinstance(actual, bool) and actual == expected
    if isinstance(expected, (int, float)):
        return not isinstance(actual, bool) and isinstance(actual, (int, float)) and float(actual) == float(expected)
    if isinstance(expected, str):
        return isinstance(actual, str) and actual == expected
    raise PatternError(f"unsupported literal in a pattern: {expected!r}")


def _operator(op: str, arg: Any, value: Any) -> bool:
    if op == "prefix":
        return _text_op(arg, value, lambda a, v: v.startswith(a), "prefix")
    if op == "suffix":
        return _text_op(arg, value, lambda a, v: v.endswith(a), "suffix")
    if op == "equals-ignore-case":
        if not isinstance(arg, str):
            raise PatternError("equals-ignore-case takes a string")
        return isinstance(value, str) and value.casefold() == arg.casefold()
    if op == "wildcard":
        if not isinstance(arg, str):
            raise PatternError("wildcard takes a string")
        regex = "^" + ".*".join(re.escape(part) for part in arg.split("*")) + "$"
        return isinstance(value, str) and re.match(regex, value, re.DOTALL) is not None
    if op == "anything-but":
        return _anything_but(arg, value)
    if op == "numeric":
        return _numeric(arg, value)
    raise PatternError(f"operator {op!r} is not supported by the local matcher")


def _text_op(arg: Any, value: Any, test: Any, name: str) -> bool:
    if isinstance(arg, Mapping) and set(arg) == {"equals-ignore-case"}:
        arg = arg["equals-ignore-case"]
        if not isinstance(arg, str):
            raise PatternError(f"{name} equals-ignore-case takes a string")
        return isinstance(value, str) and test(arg.casefold(), value.casefold())
    if not isinstance(arg, str):
        raise PatternError(f"{name} takes a string")
    return isinstance(value, str) and test(arg, value)


def _anything_but(arg: Any, value: Any) -> bool:
    if isinstance(arg, Mapping):
        if len(arg) != 1:
            raise PatternError(f"anything-but takes one operator: {arg!r}")
        (op, inner), = arg.items()
        if op not in ("prefix", "suffix", "equals-ignore-case", "wildcard"):
            raise PatternError(f"anything-but does not support {op!r} here")
        if op == "equals-ignore-case" and isinstance(inner, list):
            return isinstance(value, str) and all(not _operator(op, i, value) for i in inner)
        return isinstance(value, str) and not _operator(op, inner, value)
    excluded = arg if isinstance(arg, list) else [arg]
    return not any(_equal(e, value) for e in excluded)


_COMPARE = {
    "=": lambda a, b: a == b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _numeric(arg: Any, value: Any) -> bool:
    if not isinstance(arg, list) or not arg or len(arg) % 2:
        raise PatternError('numeric takes operator/number pairs, e.g. [">", 0, "<=", 5]')
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    for i in range(0, len(arg), 2):
        op, bound = arg[i], arg[i + 1]
        if op not in _COMPARE or isinstance(bound, bool) or not isinstance(bound, (int, float)):
            raise PatternError(f"numeric: bad comparison {op!r} {bound!r}")
        if not _COMPARE[op](float(value), float(bound)):
            return False
    return True
