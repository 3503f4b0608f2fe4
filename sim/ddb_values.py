"""DynamoDB attribute values in the low-level client's form (``{"S": "x"}``, ``{"N": "1"}``, ...): order, equality,
numbers, checks, copies. Pure functions; the fake's items and expressions are built on them.

Values are never changed in place once stored (an update builds new containers along the path it changes), so a
stored item may share its values with another stored item; what leaves the fake is copied (``copy_item``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from decimal import Context, Decimal, InvalidOperation
from typing import Any

Value = dict[str, Any]
Item = dict[str, Value]

SCALAR_TYPES = frozenset({"S", "N", "B"})
SET_TYPES = {"SS": "S", "NS": "N", "BS": "B"}
ALL_TYPES = frozenset({"S", "N", "B", "BOOL", "NULL", "L", "M", "SS", "NS", "BS"})
MAX_ITEM_BYTES = 400 * 1024
MAX_HASH_KEY_BYTES = 2048
MAX_RANGE_KEY_BYTES = 1024
_NUMBERS = Context(prec=38)


class Invalid(Exception):
    """A request DynamoDB refuses as invalid: the fake answers ValidationException with this message."""


class InvalidValue(Invalid):
    """A value DynamoDB refuses."""


def type_of(value: Value) -> str:
    for kind in value:
        return kind
    raise InvalidValue("Supplied AttributeValue is empty, must contain exactly one of the supported datatypes")


@functools.lru_cache(maxsize=65536)
def decimal_of(text: str) -> Decimal:
    try:
        number = Decimal(text.strip())
    except InvalidOperation:
        raise InvalidValue(f"A value provided cannot be converted into a number: {text!r}") from None
    if not number.is_finite():
        raise InvalidValue(f"A value provided cannot be converted into a number: {text!r}")
    return number


def check_number(text: Any) -> None:
    """DynamoDB's number limits: 38 significant digits, magnitude within 1E-130 .. 9.99...E+125."""
    if not isinstance(text, str):
        raise InvalidValue(f"A number must be sent as a string, got {type(text).__name__}")
    _check_number_text(text)


@functools.lru_cache(maxsize=65536)
def _check_number_text(text: str) -> None:
    number = decimal_of(text)
    if number == 0:
        return
    digits = number.normalize().as_tuple().digits
    if len(digits) > 38:
        raise InvalidValue("Attempting to store more than 38 significant digits in a Number")
    magnitude = abs(number)
    if magnitude >= Decimal("1E126"):
        raise InvalidValue("Number overflow. Attempting to store a number with magnitude larger than supported range")
    if magnitude < Decimal("1E-130"):
        raise InvalidValue("Number underflow. Attempting to store a number with magnitude smaller than supported range")


def number_text(number: Decimal) -> str:
    """A computed number (``+``, ``-``, ADD) as DynamoDB Local writes it: the exact sum, no exponent."""
    number = _NUMBERS.plus(number)
    if number == 0:
        return "0"
    text = format(number, "f")
    check_number(text)
    return text


@functools.lru_cache(maxsize=65536)
def canonical_number(text: str) -> str:
    """A number as DynamoDB stores one it was sent: no leading or trailing zeros, no exponent ("1.50" -> "1.5")."""
    number = decimal_of(text)
    return "0" if number == 0 else format(number.normalize(_NUMBERS), "f")


def scalar_key(value: Value) -> Any:
    """A scalar's Python counterpart that sorts as DynamoDB sorts (S by code point = UTF-8 byte order, N by value,
    B by bytes)."""
    ((kind, data),) = value.items()
    if kind == "S":
        return data
    if kind == "N":
        return decimal_of(data)
    if kind == "B":
        return bytes(data)
    raise InvalidValue(f"a key attribute must be S, N or B, not {kind}")


def compare(a: Value | None, b: Value | None) -> int | None:
    """-1, 0 or 1 for two scalars of one type (S, N, B); None when they cannot be ordered."""
    if a is None or b is None:
        return None
    ((ka, da),) = a.items()
    ((kb, db),) = b.items()
    if ka != kb or ka not in SCALAR_TYPES:
        return None
    if ka == "N":
        da, db = decimal_of(da), decimal_of(db)
    elif ka == "B":
        da, db = bytes(da), bytes(db)
    return (da > db) - (da < db)


def equal(a: Value | None, b: Value | None) -> bool:
    """DynamoDB's equality: numbers by value, sets regardless of order, lists and maps element by element."""
    if a is None or b is None:
        return False
    ((ka, da),) = a.items()
    ((kb, db),) = b.items()
    if ka != kb:
        return False
    if ka == "N":
        return decimal_of(da) == decimal_of(db)
    if ka == "NS":
        return {decimal_of(x) for x in da} == {decimal_of(x) for x in db}
    if ka in ("SS", "BS"):
        return {bytes(x) if ka == "BS" else x for x in da} == {bytes(x) if ka == "BS" else x for x in db}
    if ka == "L":
        return len(da) == len(db) and all(equal(x, y) for x, y in zip(da, db))
    if ka == "M":
        return da.keys() == db.keys() and all(equal(v, db[k]) for k, v in da.items())
    if ka == "B":
        return bytes(da) == bytes(db)
    return bool(da == db)


def items_equal(a: Mapping[str, Value] | None, b: Mapping[str, Value] | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.keys() == b.keys() and all(equal(v, b[k]) for k, v in a.items())


def check_value(value: Any, where: str) -> None:
    """Refuse what DynamoDB refuses in an item or an expression value: an unknown or empty type, a bad number, an
    empty or duplicated set."""
    if type(value) is dict and len(value) == 1 and type(value.get("S")) is str:
        return  # the common case, at once
    if not isinstance(value, Mapping) or len(value) != 1:
        raise InvalidValue(f"Supplied AttributeValue has more than one datatypes set, must contain exactly one of the "
                          f"supported datatypes ({where})")
    ((kind, data),) = value.items()
    if kind not in ALL_TYPES:
        raise InvalidValue(f"Supplied AttributeValue is empty, must contain exactly one of the supported datatypes "
                          f"({where}: {kind!r})")
    if kind == "N":
        check_number(data)
    elif kind == "S" and not isinstance(data, str):
        raise InvalidValue(f"An S value must be a string ({where})")
    elif kind in SET_TYPES:
        if not data:
            raise InvalidValue(f"One or more parameter values were invalid: An {_set_name(kind)} may not be empty")
        members = [decimal_of(x) if kind == "NS" else (bytes(x) if kind == "BS" else x) for x in data]
        if kind == "NS":
            for x in data:
                check_number(x)
        if len(set(members)) != len(members):
            raise InvalidValue(f"One or more parameter values were invalid: Input collection {list(data)} contains "
                              "duplicates.")
    elif kind == "L":
        for index, element in enumerate(data):
            check_value(element, f"{where}[{index}]")
    elif kind == "M":
        for name, element in data.items():
            check_value(element, f"{where}.{name}")
    elif kind == "BOOL" and not isinstance(data, bool):
        raise InvalidValue(f"A BOOL value must be true or false ({where})")


def _set_name(kind: str) -> str:
    return {"SS": "string set", "NS": "number set", "BS": "binary set"}[kind]


def incoming_value(value: Value) -> Value:
    """A copy of a value sent in a request, its numbers as DynamoDB stores them."""
    ((kind, data),) = value.items()
    if kind == "N":
        return {"N": canonical_number(data)}
    if kind == "NS":
        return {"NS": [canonical_number(x) for x in data]}
    if kind == "L":
        return {"L": [incoming_value(v) for v in data]}
    if kind == "M":
        return {"M": {k: incoming_value(v) for k, v in data.items()}}
    if kind in SET_TYPES:
        return {kind: list(data)}
    return {kind: data}


def copy_value(value: Value) -> Value:
    ((kind, data),) = value.items()
    if kind == "L":
        return {"L": [copy_value(v) for v in data]}
    if kind == "M":
        return {"M": {k: copy_value(v) for k, v in data.items()}}
    if kind in SET_TYPES:
        return {kind: list(data)}
    return {kind: data}


def copy_item(item: Mapping[str, Value]) -> Item:
    return {name: copy_value(value) for name, value in item.items()}


def size_of(value: Value) -> int | None:
    """``size(path)``: a string's length, a binary's bytes, a set's, list's or map's elements; None otherwise."""
    ((kind, data),) = value.items()
    if kind == "S":
        return len(data)
    if kind == "B":
        return len(bytes(data))
    if kind in SET_TYPES or kind in ("L", "M"):
        return len(data)
    return None
