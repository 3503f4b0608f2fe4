"""The published JSON Schema of the CreateTasks input (schemas/create_tasks.schema.json), and the one place where a
schema violation becomes an ``InvalidField`` that names the field, what was wrong and what is allowed.

The engine is fastjsonschema, the one behind Powertools' validation utility (the layer installs it through
``aws-lambda-powertools[validation]``), used the way that utility cannot: Powertools' ``validate`` compiles the
schema again on every call (fastjsonschema.validate), about 3 ms of CPU here per input — on a 256 MB Lambda,
which gets a fraction of a vCPU, several times that — while a validator compiled once, at import, checks an
input in microseconds. Same engine, same rules, same error fields (the rule broken, the path, the value).

The rules a schema cannot state — across fields, or depending on the configuration — are checked afterwards in
``model.py``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import fastjsonschema
from fastjsonschema import JsonSchemaValueException

from taskqueue.core.describe import json_kind
from taskqueue.core.errors import InvalidField

SCHEMA_FILE = Path(__file__).with_name("schemas") / "create_tasks.schema.json"
# Where a reader finds the schema in the repository (error messages and docs name it).
SCHEMA_PATH = "layers/taskqueue/taskqueue/core/schemas/create_tasks.schema.json"
CREATE_TASKS_SCHEMA: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
REQUEST_SCHEMA: dict[str, Any] = CREATE_TASKS_SCHEMA["definitions"]["request"]
SCHEDULED_EVENT_SCHEMA: dict[str, Any] = CREATE_TASKS_SCHEMA["definitions"]["scheduledEvent"]

_VALIDATORS: dict[str, Any] = {
    "request": fastjsonschema.compile(REQUEST_SCHEMA, use_default=False),
    "scheduledEvent": fastjsonschema.compile(SCHEDULED_EVENT_SCHEMA, use_default=False),
}
REQUEST = "request"
SCHEDULED_EVENT = "scheduledEvent"

# An EventBridge event always has both; the schema's "if" reads such an event as a Scheduled Event.
_EVENT_KEYS = ("detail-type", "source")


def is_eventbridge_event(event: object) -> bool:
    """Whether an input claims to be an EventBridge event (it has both ``detail-type`` and ``source``)."""
    return isinstance(event, Mapping) and all(key in event for key in _EVENT_KEYS)


def check(data: object, definition: str, what: str) -> None:
    """Validate ``data`` against one definition of the schema (REQUEST or SCHEDULED_EVENT); raise ``InvalidField``
    naming the first field that breaks it."""
    try:
        _VALIDATORS[definition](data)
    except JsonSchemaValueException as exc:
        raise _invalid_field(exc, what) from None


def check_create_tasks_input(event: object) -> None:
    """The whole CreateTasks input: a request, or a Scheduled Event (schedule without Input)."""
    if is_eventbridge_event(event):
        check(event, SCHEDULED_EVENT, "an EventBridge Scheduled Event")
    else:
        check(event, REQUEST, "a CreateTasks request")


def _invalid_field(exc: JsonSchemaValueException, what: str) -> InvalidField:
    path = [str(p) for p in (exc.path or [])][1:]  # the first element is fastjsonschema's "data"
    field = _field_name(path)
    definition = exc.definition if isinstance(exc.definition, Mapping) else {}
    rule = exc.rule or ""
    if not field:
        if rule == "type":
            return InvalidField(f"{what} must be a JSON object, got {_json_type(exc.value)}; see {SCHEMA_PATH}")
        if rule == "additionalProperties" and isinstance(exc.value, Mapping):
            allowed = sorted(definition.get("properties") or {})
            unknown = sorted(str(k) for k in exc.value if k not in allowed)
            hint = ""
            if what == "a CreateTasks request" and set(unknown) & {"detail-type", "source", "detail"}:
                hint = (" (an EventBridge Scheduled Event is accepted whole only: \"detail-type\": \"Scheduled Event\", "
                        "\"source\": \"aws.events\", \"detail\": {})")
            return InvalidField(
                f"unknown field(s) {unknown} in {what}; allowed: {allowed}{hint}; schema: {SCHEMA_PATH}",
                unknown[0] if unknown else "",
            )
        if rule == "required":
            missing = [k for k in (exc.rule_definition or []) if isinstance(exc.value, Mapping) and k not in exc.value]
            return InvalidField(f"{what} is missing field(s) {missing}; schema: {SCHEMA_PATH}", missing[0] if missing else "")
    reason = _reason(exc, field)
    allowed = definition.get("description")
    detail = f" ({field}: {allowed})" if allowed else ""
    return InvalidField(f"{what} is not valid: {reason}, got {_show(exc.value)}{detail}; schema: {SCHEMA_PATH}", field)


def _field_name(path: list[str]) -> str:
    name = ""
    for part in path:
        name += f"[{part}]" if part.isdigit() else (f".{part}" if name else part)
    return name


_TYPES = {"integer": "a whole number", "number": "a number", "string": "a string", "object": "a JSON object",
          "array": "an array", "boolean": "true or false"}


def _reason(exc: JsonSchemaValueException, field: str) -> str:
    """What the field breaks, in words: fastjsonschema's message ("data.count must be bigger than or equal to 1")
    with the field's own name, or a plainer phrase for the common rules."""
    rule, limit = exc.rule, exc.rule_definition
    definition = exc.definition if isinstance(exc.definition, Mapping) else {}
    if rule in ("type", "minimum", "maximum") and definition.get("type") == "integer":
        low, high = definition.get("minimum"), definition.get("maximum")
        if low is not None and high is not None:
            return f"{field} must be a whole number from {low} to {high}"
    if rule == "type" and isinstance(limit, str):
        return f"{field} must be {_TYPES.get(limit, limit)}"
    if rule == "const":
        return f"{field} must be {json.dumps(limit)}"
    if rule == "minimum":
        return f"{field} must be at least {limit}"
    if rule == "maximum":
        return f"{field} must be at most {limit}"
    if rule == "maxProperties" and limit == 0:
        return f"{field} must be {{}}"
    message = exc.message or str(exc)
    prefix = exc.name or "data"
    if message.startswith(prefix):
        message = field + message[len(prefix) :]
    return message


def _json_type(value: object) -> str:
    kind = json_kind(value)
    if kind == "boolean":
        return f"a boolean ({json.dumps(value)})"
    if kind == "number":
        return f"a number ({value!r})"
    return {"string": "a string", "array": "an array"}.get(kind, kind)


def _show(value: object) -> str:
    try:
        text = json.dumps(value, default=str, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."
