"""Hypothesis strategies for DynamoDB items and expressions (condition, update, filter, key condition), rendered with
``#name`` and ``:value`` placeholders, each defined exactly when used (as DynamoDB demands)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

NAMES = ("a", "b", "n", "s", "l", "m", "ss", "ns", "flag")
MEMBERS = ("x", "y")

text = st.text(alphabet="abé", max_size=3)
number = st.integers(min_value=-5, max_value=5).map(str)
scalar = st.one_of(
    text.map(lambda s: {"S": s}),
    number.map(lambda n: {"N": n}),
    st.booleans().map(lambda b: {"BOOL": b}),
    st.just({"NULL": True}),
)
value = st.one_of(
    scalar,
    st.lists(scalar, max_size=3).map(lambda xs: {"L": xs}),
    st.dictionaries(st.sampled_from(MEMBERS), scalar, max_size=2).map(lambda m: {"M": m}),
    st.sets(st.text(alphabet="ab", min_size=1, max_size=2), min_size=1, max_size=3).map(lambda s: {"SS": sorted(s)}),
    st.sets(st.integers(-3, 3), min_size=1, max_size=3).map(lambda s: {"NS": [str(n) for n in sorted(s)]}),
)
item = st.dictionaries(st.sampled_from(NAMES), value, max_size=6)


@dataclass
class Rendered:
    names: dict[str, str] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)

    def name(self, attribute: str) -> str:
        for placeholder, known in self.names.items():
            if known == attribute:
                return placeholder
        placeholder = f"#n{len(self.names)}"
        self.names[placeholder] = attribute
        return placeholder

    def value(self, attribute_value: Any) -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = attribute_value
        return placeholder

    def path(self, path: tuple[Any, ...]) -> str:
        text = self.name(path[0])
        for element in path[1:]:
            text += f"[{element}]" if isinstance(element, int) else f".{self.name(element)}"
        return text

    def params(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        if self.names:
            found["ExpressionAttributeNames"] = dict(self.names)
        if self.values:
            found["ExpressionAttributeValues"] = dict(self.values)
        return found


paths = st.one_of(
    st.sampled_from(NAMES).map(lambda n: (n,)),
    st.sampled_from(MEMBERS).map(lambda m: ("m", m)),
    st.integers(0, 3).map(lambda i: ("l", i)),
)


@st.composite
def operand(draw: Any, out: Rendered) -> str:
    kind = draw(st.sampled_from(["path", "value", "size"]))
    if kind == "path":
        return out.path(draw(paths))
    if kind == "size":
        return f"size({out.path(draw(paths))})"
    return out.value(draw(scalar))


@st.composite
def condition(draw: Any, out: Rendered, depth: int = 0) -> str:
    choices = ["cmp", "fn", "between", "in"] + (["and", "or", "not"] if depth < 2 else [])
    kind = draw(st.sampled_from(choices))
    if kind in ("and", "or"):
        left, right = draw(condition(out, depth + 1)), draw(condition(out, depth + 1))
        return f"({left}) {kind.upper()} ({right})" if draw(st.booleans()) else f"{left} {kind.upper()} {right}"
    if kind == "not":
        return f"NOT ({draw(condition(out, depth + 1))})"
    if kind == "cmp":
        op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
        return f"{draw(operand(out))} {op} {draw(operand(out))}"
    if kind == "between":
        return f"{draw(operand(out))} BETWEEN {draw(operand(out))} AND {draw(operand(out))}"
    if kind == "in":
        options = [draw(operand(out)) for _ in range(draw(st.integers(1, 3)))]
        return f"{draw(operand(out))} IN ({', '.join(options)})"
    function = draw(st.sampled_from(["attribute_exists", "attribute_not_exists", "begins_with", "contains",
                                     "attribute_type"]))
    path = out.path(draw(paths))
    if function.startswith("attribute_") and function != "attribute_type":
        return f"{function}({path})"
    if function == "attribute_type":
        kind_name = draw(st.sampled_from(["S", "N", "BOOL", "NULL", "L", "M", "SS", "NS"]))
        return f"attribute_type({path}, {out.value({'S': kind_name})})"
    return f"{function}({path}, {draw(operand(out))})"


@st.composite
def set_value(draw: Any, out: Rendered) -> str:
    kind = draw(st.sampled_from(["value", "path", "plus", "minus", "if_not_exists", "list_append"]))
    if kind == "value":
        return out.value(draw(value))
    if kind == "path":
        return out.path(draw(paths))
    if kind in ("plus", "minus"):
        sign = "+" if kind == "plus" else "-"
        left = out.path(draw(paths)) if draw(st.booleans()) else out.value({"N": draw(number)})
        return f"{left} {sign} {out.value({'N': draw(number)})}"
    if kind == "if_not_exists":
        return f"if_not_exists({out.path(draw(paths))}, {out.value(draw(value))})"
    tail = out.value({"L": draw(st.lists(scalar, max_size=2))})
    return f"list_append({out.path(draw(paths))}, {tail})" if draw(st.booleans()) else \
        f"list_append({tail}, {out.path(draw(paths))})"


@st.composite
def update(draw: Any, out: Rendered) -> str:
    clauses = []
    targets = draw(st.lists(paths, min_size=1, max_size=4))
    sets = [t for t in targets if draw(st.booleans())]
    rest = [t for t in targets if t not in sets]
    if sets:
        clauses.append("SET " + ", ".join(f"{out.path(t)} = {draw(set_value(out))}" for t in sets))
    removes = [t for t in rest if draw(st.booleans())]
    if removes:
        clauses.append("REMOVE " + ", ".join(out.path(t) for t in removes))
    others = [t for t in rest if t not in removes]
    adds = [t for t in others if draw(st.booleans())]
    if adds:
        clauses.append("ADD " + ", ".join(
            f"{out.path(t)} {out.value(draw(st.sampled_from([{'N': '2'}, {'SS': ['a', 'c']}, {'NS': ['1', '4']}])))}"
            for t in adds))
    deletes = [t for t in others if t not in adds]
    if deletes:
        clauses.append("DELETE " + ", ".join(
            f"{out.path(t)} {out.value(draw(st.sampled_from([{'SS': ['a']}, {'NS': ['1', '2']}])))}"
            for t in deletes))
    draw(st.randoms()).shuffle(clauses)
    return " ".join(clauses)
