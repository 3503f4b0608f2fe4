"""Parsed DynamoDB expressions (``sim.ddb_expressions``) compiled into Python closures, and updates applied.

``condition(parsed, names)`` gives ``check(item, values) -> bool``; ``update(parsed, names)`` an ``UpdatePlan`` whose
``apply(item, values)`` returns the new item (the old one untouched); ``projection(parsed, names)`` gives
``project(item) -> item``. ``names`` resolves ``#placeholders`` at compile time, so a compiled expression is cached by
(text, the names it uses); ``values`` are looked up when it runs. Errors DynamoDB raises while it evaluates (a SET
that adds a string, a path that is not there) raise ``EvalError``; the fake answers ValidationException.

Semantics, as DynamoDB documents them: a comparison with a missing attribute or a value of another type is false
(``<>`` is true); every SET, ADD and DELETE operand is evaluated against the item as it was before the update; a
SET on a nested path needs its parent; ADD creates a missing number or set; DELETE that empties a set removes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sim.ddb_expressions import ExpressionError, Parsed
from sim.ddb_values import (
    SET_TYPES,
    Invalid,
    Item,
    Value,
    compare,
    decimal_of,
    equal,
    number_text,
    size_of,
    type_of,
)

Getter = Callable[[Mapping[str, Value], Mapping[str, Value]], Value | None]
Check = Callable[[Mapping[str, Value], Mapping[str, Value]], bool]
Path = tuple[Any, ...]

_TYPE_WORDS = {"S": "STRING", "N": "NUMBER", "B": "BINARY", "BOOL": "BOOLEAN", "NULL": "NULL", "L": "LIST",
               "M": "MAP", "SS": "SET", "NS": "SET", "BS": "SET"}
_MISSING = "The provided expression refers to an attribute that does not exist in the item"
_WRONG_TYPE = "An operand in the update expression has an incorrect data type"
_BAD_PATH = "The document path provided in the update expression is invalid for update"


class EvalError(Invalid):
    """DynamoDB refused an expression while evaluating it (ValidationException)."""


def resolve(path: tuple[str, Path], names: Mapping[str, str]) -> Path:
    return tuple(names[e] if isinstance(e, str) and e.startswith("#") else e for e in path[1])


def getter(path: Path) -> Getter:
    if len(path) == 1:
        name = path[0]
        return lambda item, values: item.get(name)

    def get(item: Mapping[str, Value], values: Mapping[str, Value]) -> Value | None:
        return value_at(item, path)

    return get


def value_at(item: Mapping[str, Value], path: Path) -> Value | None:
    current = item.get(path[0])
    for element in path[1:]:
        if current is None:
            return None
        if isinstance(element, int):
            elements = current.get("L")
            current = elements[element] if elements is not None and element < len(elements) else None
        else:
            members = current.get("M")
            current = members.get(element) if members is not None else None
    return current


# ---- conditions ------------------------------------------------------------------------------------------

_conditions: dict[tuple[int, tuple[tuple[str, str], ...]], Check] = {}


def _names_key(parsed: Parsed, names: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((n, names[n]) for n in parsed.names))


def condition(parsed: Parsed, names: Mapping[str, str]) -> Check:
    key = (id(parsed), _names_key(parsed, names))
    found = _conditions.get(key)
    if found is None:
        found = _conditions[key] = _condition(parsed.tree, names)
    return found


def operand(tree: tuple[Any, ...], names: Mapping[str, str]) -> Getter:
    kind = tree[0]
    if kind == "value":
        name = tree[1]
        return lambda item, values: values[name]
    if kind == "path":
        return getter(resolve(tree, names))
    if kind == "size":
        inner = getter(resolve(tree[1], names))

        def size(item: Mapping[str, Value], values: Mapping[str, Value]) -> Value | None:
            value = inner(item, values)
            length = size_of(value) if value is not None else None
            return None if length is None else {"N": str(length)}

        return size
    raise ExpressionError(f"an operand cannot be {kind}")


def check_literals(tree: tuple[Any, ...], values: Mapping[str, Value]) -> None:
    """What DynamoDB refuses in a condition from its values alone, before it reads any item (so also in a branch
    that AND or OR would skip): ordering (``<``, BETWEEN) of a type other than S, N and B, BETWEEN bounds of two
    types or out of order, begins_with of a number, attribute_type of an unknown type."""
    kind = tree[0]
    if kind in ("and", "or"):
        check_literals(tree[1], values)
        check_literals(tree[2], values)
    elif kind == "not":
        check_literals(tree[1], values)
    elif kind in ("cmp", "between"):
        operands = [tree[2], tree[3]] if kind == "cmp" else [tree[1], tree[2], tree[3]]
        op = tree[1] if kind == "cmp" else "BETWEEN"
        if op not in ("=", "<>"):
            for found in (values[o[1]] for o in operands if o[0] == "value"):
                if type_of(found) not in ("S", "N", "B"):
                    raise EvalError("Invalid ConditionExpression: Incorrect operand type for operator or function; "
                                    f"operator or function: {op}, operand type: {type_of(found)}")
        if kind == "between" and tree[2][0] == "value" and tree[3][0] == "value":
            low, high = values[tree[2][1]], values[tree[3][1]]
            if low.keys() != high.keys():
                raise EvalError("Invalid ConditionExpression: The BETWEEN operator requires same data type for lower "
                                f"and upper bounds; lower bound operand: AttributeValue: {_shown_value(low)}, upper "
                                f"bound operand: AttributeValue: {_shown_value(high)}")
            if (compare(low, high) or 0) > 0:
                raise EvalError("Invalid ConditionExpression: The BETWEEN operator requires upper bound to be greater "
                                f"than or equal to lower bound; lower bound operand: AttributeValue: "
                                f"{_shown_value(low)}, upper bound operand: AttributeValue: {_shown_value(high)}")
    elif kind == "fn" and len(tree[2]) > 1 and tree[2][1][0] == "value":
        found = values[tree[2][1][1]]
        if tree[1] == "begins_with" and type_of(found) not in ("S", "B"):
            raise EvalError("Invalid ConditionExpression: Incorrect operand type for operator or function; "
                            f"operator or function: begins_with, operand type: {type_of(found)}")
        if tree[1] == "attribute_type" and (type_of(found) != "S" or found["S"] not in _TYPE_WORDS):
            raise EvalError(f"Invalid ConditionExpression: Invalid attribute type name found; type: "
                            f"{found.get('S', found)}, valid types: {{N,BS,L,B,NULL,M,S,SS,NS,BOOL}}")


def _ordered(op: str, a: Getter, b: Getter) -> Check:
    tests = {"<": lambda c: c < 0, "<=": lambda c: c <= 0, ">": lambda c: c > 0, ">=": lambda c: c >= 0}
    test = tests[op]

    def check(item: Mapping[str, Value], values: Mapping[str, Value]) -> bool:
        order = compare(a(item, values), b(item, values))
        return order is not None and test(order)

    return check


def _shown_value(value: Value | None) -> str:
    if value is None:
        return "null"
    ((kind, data),) = value.items()
    return f"{{{kind}:{data}}}"


def _resolved(tree: tuple[Any, ...], names: Mapping[str, str]) -> Any:
    if tree[0] == "path":
        return ("path", resolve(tree, names))
    if tree[0] == "size":
        return ("size", resolve(tree[1], names))
    return tree


def _distinct(op: str, operands: list[tuple[Any, ...]], names: Mapping[str, str]) -> None:
    """DynamoDB refuses an operator whose first operand (an attribute) appears again among the others."""
    first = _resolved(operands[0], names)
    if first[0] == "path" and any(_resolved(o, names) == first for o in operands[1:]):
        shown = _shown(first[1])
        raise ExpressionError("Invalid ConditionExpression: The first operand must be distinct from the remaining "
                              f"operands for this operator or function; operator: {op}, first operand: {shown}")


def _condition(tree: tuple[Any, ...], names: Mapping[str, str]) -> Check:
    kind = tree[0]
    if kind in ("cmp", "between"):
        _distinct(tree[1] if kind == "cmp" else "BETWEEN", list(tree[2:] if kind == "cmp" else tree[1:]), names)
    elif kind == "in":
        _distinct("IN", [tree[1], *tree[2]], names)
    elif kind == "fn" and len(tree[2]) > 1:
        _distinct(tree[1], list(tree[2]), names)
        if tree[1] == "begins_with" and tree[2][1][0] == "size":
            raise ExpressionError("Invalid ConditionExpression: Incorrect operand type for operator or function; "
                                  "operator or function: begins_with, operand type: N")
    if kind in ("and", "or"):
        left, right = _condition(tree[1], names), _condition(tree[2], names)
        if kind == "and":
            return lambda item, values: left(item, values) and right(item, values)
        return lambda item, values: left(item, values) or right(item, values)
    if kind == "not":
        inner = _condition(tree[1], names)
        return lambda item, values: not inner(item, values)
    if kind == "cmp":
        op, a, b = tree[1], operand(tree[2], names), operand(tree[3], names)
        if op == "=":
            return lambda item, values: equal(a(item, values), b(item, values))
        if op == "<>":
            return lambda item, values: not equal(a(item, values), b(item, values))
        return _ordered(op, a, b)
    if kind == "between":
        a, low, high = operand(tree[1], names), operand(tree[2], names), operand(tree[3], names)

        def between(item: Mapping[str, Value], values: Mapping[str, Value]) -> bool:
            x = a(item, values)
            first, second = compare(x, low(item, values)), compare(x, high(item, values))
            return first is not None and second is not None and first >= 0 and second <= 0

        return between
    if kind == "in":
        a = operand(tree[1], names)
        options = [operand(o, names) for o in tree[2]]
        return lambda item, values: any(equal(a(item, values), o(item, values)) for o in options)
    if kind == "fn":
        return _function(tree[1], [operand(arg, names) for arg in tree[2]])
    raise ExpressionError(f"not a condition: {kind}")


def _function(name: str, args: list[Getter]) -> Check:
    first = args[0]
    if name == "attribute_exists":
        return lambda item, values: first(item, values) is not None
    if name == "attribute_not_exists":
        return lambda item, values: first(item, values) is None
    second = args[1]
    if name == "attribute_type":
        def attribute_type(item: Mapping[str, Value], values: Mapping[str, Value]) -> bool:
            wanted, value = second(item, values), first(item, values)
            return value is not None and wanted is not None and wanted.get("S") in value

        return attribute_type
    if name == "begins_with":
        def begins_with(item: Mapping[str, Value], values: Mapping[str, Value]) -> bool:
            prefix, value = second(item, values), first(item, values)
            if value is None or prefix is None or value.keys() != prefix.keys():
                return False
            if "S" in value:
                return bool(value["S"].startswith(prefix["S"]))
            return bytes(value["B"]).startswith(bytes(prefix["B"]))

        return begins_with
    if name == "contains":
        def contains(item: Mapping[str, Value], values: Mapping[str, Value]) -> bool:
            value, part = first(item, values), second(item, values)
            if value is None or part is None:
                return False
            if "S" in value:
                return "S" in part and part["S"] in value["S"]
            for set_kind, member in SET_TYPES.items():
                if set_kind in value:
                    return member in part and any(equal({member: x}, part) for x in value[set_kind])
            if "L" in value:
                return any(equal(x, part) for x in value["L"])
            return False

        return contains
    raise ExpressionError(f"Invalid function name; function: {name}")


# ---- updates -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UpdatePlan:
    sets: tuple[tuple[Path, Getter], ...]
    removes: tuple[Path, ...]
    adds: tuple[tuple[Path, Getter], ...]
    deletes: tuple[tuple[Path, Getter], ...]
    paths: list[Path] = field(init=False, compare=False)  # every path it names
    top_names: frozenset[str] = field(init=False, compare=False)  # the attributes they are in

    def __post_init__(self) -> None:
        paths = [p for p, _ in self.sets] + list(self.removes) + [p for p, _ in self.adds] + [p for p, _ in self.deletes]
        object.__setattr__(self, "paths", paths)
        object.__setattr__(self, "top_names", frozenset(p[0] for p in paths))

    def apply(self, item: Mapping[str, Value], values: Mapping[str, Value]) -> Item:
        """The item after the update (``item`` is left as it was)."""
        computed_sets = [(path, get(item, values)) for path, get in self.sets]
        computed_adds = [(path, get(item, values)) for path, get in self.adds]
        computed_deletes = [(path, get(item, values)) for path, get in self.deletes]
        new: Item = dict(item)
        for path, value in computed_sets:
            _set_at(new, path, value)
        for path in sorted(self.removes, key=lambda p: -p[-1] if isinstance(p[-1], int) else 0):
            _remove_at(new, path)
        for path, value in computed_adds:
            _add(new, path, value_at(item, path), value)
        for path, value in computed_deletes:
            _delete(new, path, value_at(item, path), value)
        return new


_updates: dict[tuple[int, tuple[tuple[str, str], ...]], UpdatePlan] = {}


def update(parsed: Parsed, names: Mapping[str, str]) -> UpdatePlan:
    key = (id(parsed), _names_key(parsed, names))
    found = _updates.get(key)
    if found is None:
        found = _updates[key] = _update(parsed.tree, names)
    return found


def _update(tree: dict[str, list[Any]], names: Mapping[str, str]) -> UpdatePlan:
    sets = tuple((resolve(p, names), _set_value(v, names)) for p, v in tree.get("SET", []))
    removes = tuple(resolve(p, names) for p in tree.get("REMOVE", []))
    adds = tuple((resolve(p, names), operand(v, names)) for p, v in tree.get("ADD", []))
    deletes = tuple((resolve(p, names), operand(v, names)) for p, v in tree.get("DELETE", []))
    check_overlaps([p for p, _ in sets] + list(removes) + [p for p, _ in adds] + [p for p, _ in deletes],
                   "UpdateExpression")
    return UpdatePlan(sets, removes, adds, deletes)


def check_overlaps(paths: list[Path], kind: str) -> None:
    for index, one in enumerate(paths):
        for two in paths[index + 1:]:
            shorter = min(len(one), len(two))
            if one[:shorter] == two[:shorter]:
                raise ExpressionError(f"Invalid {kind}: Two document paths overlap with each other; must remove or "
                                      f"rewrite one of these paths; path one: {_shown(one)}, path two: {_shown(two)}")


def _shown(path: Path) -> str:
    return "[" + ", ".join(f"[{e}]" if isinstance(e, int) else e for e in path) + "]"


def _set_value(tree: tuple[Any, ...], names: Mapping[str, str]) -> Getter:
    kind = tree[0]
    if kind == "path":
        inner = getter(resolve(tree, names))

        def existing(item: Mapping[str, Value], values: Mapping[str, Value]) -> Value:
            value = inner(item, values)
            if value is None:
                raise EvalError(_MISSING)
            return value

        return existing
    if kind == "if_not_exists":
        current, fallback = getter(resolve(tree[1], names)), _set_value(tree[2], names)

        def if_not_exists(item: Mapping[str, Value], values: Mapping[str, Value]) -> Value:
            value = current(item, values)
            return value if value is not None else fallback(item, values)

        return if_not_exists
    if kind in ("+", "-", "list_append"):
        a, b = _set_value(tree[1], names), _set_value(tree[2], names)

        def combined(item: Mapping[str, Value], values: Mapping[str, Value]) -> Value:
            x, y = a(item, values), b(item, values)
            if kind == "list_append":
                if "L" not in x or "L" not in y:
                    raise EvalError(_WRONG_TYPE)
                return {"L": list(x["L"]) + list(y["L"])}
            if "N" not in x or "N" not in y:
                raise EvalError(_WRONG_TYPE)
            first, second = decimal_of(x["N"]), decimal_of(y["N"])
            return {"N": number_text(first + second if kind == "+" else first - second)}

        return combined
    return operand(tree, names)


def _set_at(item: Item, path: Path, value: Value) -> None:
    if len(path) == 1:
        item[path[0]] = value
        return
    top = item.get(path[0])
    if top is None:
        raise EvalError(_BAD_PATH)
    item[path[0]] = _set_in(top, path[1:], value)


def _set_in(container: Value, rest: Path, value: Value) -> Value:
    element = rest[0]
    if isinstance(element, int):
        if "L" not in container:
            raise EvalError(_BAD_PATH)
        elements = list(container["L"])
        if len(rest) == 1:
            if element >= len(elements):
                elements.append(value)
            else:
                elements[element] = value
        elif element < len(elements):
            elements[element] = _set_in(elements[element], rest[1:], value)
        else:
            raise EvalError(_BAD_PATH)
        return {"L": elements}
    if "M" not in container:
        raise EvalError(_BAD_PATH)
    members = dict(container["M"])
    if len(rest) == 1:
        members[element] = value
    elif element in members:
        members[element] = _set_in(members[element], rest[1:], value)
    else:
        raise EvalError(_BAD_PATH)
    return {"M": members}


def _remove_at(item: Item, path: Path) -> None:
    """REMOVE: a missing attribute (or list element, or map member) is left alone; a path through something that
    is not there (or not a list or map) is refused."""
    if len(path) == 1:
        item.pop(path[0], None)
        return
    top = item.get(path[0])
    if top is None:
        raise EvalError(_BAD_PATH)
    changed = _removed_in(top, path[1:])
    if changed is not None:
        item[path[0]] = changed


def _removed_in(container: Value, rest: Path) -> Value | None:
    element = rest[0]
    if isinstance(element, int):
        if "L" not in container:
            raise EvalError(_BAD_PATH)
        if element >= len(container["L"]):
            if len(rest) > 1:
                raise EvalError(_BAD_PATH)
            return None
        elements = list(container["L"])
        if len(rest) == 1:
            del elements[element]
        else:
            inner = _removed_in(elements[element], rest[1:])
            if inner is None:
                return None
            elements[element] = inner
        return {"L": elements}
    if "M" not in container:
        raise EvalError(_BAD_PATH)
    if element not in container["M"]:
        if len(rest) > 1:
            raise EvalError(_BAD_PATH)
        return None
    members = dict(container["M"])
    if len(rest) == 1:
        del members[element]
    else:
        inner = _removed_in(members[element], rest[1:])
        if inner is None:
            return None
        members[element] = inner
    return {"M": members}


def _check_parent(item: Mapping[str, Value], path: Path) -> None:
    """A nested path must lead through a list or map that is there."""
    if len(path) > 1:
        parent = value_at(item, path[:-1])
        if parent is None or ("L" if isinstance(path[-1], int) else "M") not in parent:
            raise EvalError(_BAD_PATH)


def _add(item: Item, path: Path, old: Value | None, value: Value) -> None:
    (kind,) = value
    if kind == "N":
        if old is None:
            _set_at(item, path, value)
        elif "N" in old:
            _set_at(item, path, {"N": number_text(decimal_of(old["N"]) + decimal_of(value["N"]))})
        else:
            raise EvalError(_WRONG_TYPE)
        return
    if kind not in SET_TYPES:
        raise EvalError(f"Invalid UpdateExpression: Incorrect operand type for operator or function; operator: ADD, "
                        f"operand type: {_TYPE_WORDS.get(kind, kind)}")
    if old is None:
        _set_at(item, path, value)
    elif kind in old:
        merged = list(old[kind]) + [x for x in value[kind] if not any(equal({kind[0]: x}, {kind[0]: y})
                                                                          for y in old[kind])]
        _set_at(item, path, {kind: merged})
    else:
        raise EvalError(_WRONG_TYPE)


def _delete(item: Item, path: Path, old: Value | None, value: Value) -> None:
    (kind,) = value
    if kind not in SET_TYPES:
        raise EvalError(f"Invalid UpdateExpression: Incorrect operand type for operator or function; operator: "
                        f"DELETE, operand type: {_TYPE_WORDS.get(kind, kind)}")
    if old is None:
        _check_parent(item, path)
        return
    if kind not in old:
        raise EvalError(_WRONG_TYPE)
    left = [x for x in old[kind] if not any(equal({kind[0]: x}, {kind[0]: y}) for y in value[kind])]
    if left:
        _set_at(item, path, {kind: left})
    else:
        _remove_at(item, path)


# ---- projections ------------------------------------------------------------------------------------------

Projector = Callable[[Mapping[str, Value]], Item]
_projections: dict[tuple[int, tuple[tuple[str, str], ...]], Projector] = {}


def projection(parsed: Parsed, names: Mapping[str, str]) -> Projector:
    key = (id(parsed), _names_key(parsed, names))
    found = _projections.get(key)
    if found is None:
        paths = [resolve(p, names) for p in parsed.tree]
        check_overlaps(paths, "ProjectionExpression")
        found = _projections[key] = _projector(paths)
    return found


def projected_names(parsed: Parsed, names: Mapping[str, str]) -> list[str]:
    return [resolve(p, names)[0] for p in parsed.tree]


def project_paths(item: Mapping[str, Value], paths: list[Path]) -> Item:
    """The parts of ``item`` at ``paths`` (what UPDATED_OLD and UPDATED_NEW return)."""
    return _projector(paths)(item)


def _projector(paths: list[Path]) -> Projector:
    if all(len(p) == 1 for p in paths):
        tops = [p[0] for p in paths]
        return lambda item: {n: item[n] for n in tops if n in item}

    def project(item: Mapping[str, Value]) -> Item:
        result: Item = {}
        for path in paths:
            value = value_at(item, path)
            if value is not None:
                _merge(result, path, value, item)
        return result

    return project


def _merge(result: Item, path: Path, value: Value, item: Mapping[str, Value]) -> None:
    """Put ``value`` at ``path`` in ``result``, building maps and (compacted) lists along the way."""
    if len(path) == 1:
        result[path[0]] = value
        return
    container = result.get(path[0])
    source = item[path[0]]
    if container is None:
        container = {"L": []} if "L" in source else {"M": {}}
        result[path[0]] = container
    for depth, element in enumerate(path[1:], start=1):
        last = depth == len(path) - 1
        if isinstance(element, int):
            container["L"].append(value if last else ({"L": []} if "L" in value_at(item, path[:depth + 1]) else {"M": {}}))
            container = container["L"][-1]
        else:
            members = container["M"]
            if last:
                members[element] = value
            else:
                if element not in members:
                    members[element] = {"L": []} if "L" in value_at(item, path[:depth + 1]) else {"M": {}}
                container = members[element]
