"""How refusals show the input they refuse (pure): a value's JSON kind, and a value clipped to fit a message."""

from __future__ import annotations


def json_kind(value: object) -> str:
    """"null", "boolean", "number", "string" or "array"; the Python type's name for anything else."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


def described(value: object) -> str:
    """The kind with an article, and the value itself when it is short by nature: "a number (42)",
    "a string ('work')", "an array", "null"."""
    kind = json_kind(value)
    if kind == "number":
        return f"a number ({value!r})"
    if kind == "string":
        return f"a string ({value!r:.60})"
    return {"boolean": "a boolean", "array": "an array"}.get(kind, kind)


def shown(value: object, limit: int = 100) -> str:
    """``repr(value)``, cut to ``limit`` characters (ending in "...") so one bad field cannot flood a message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
