"""DynamoDB's expression languages parsed: condition (and filter, key condition), update and projection.

``parse(kind, text)`` returns a ``Parsed`` (the tree, the ``#name`` and ``:value`` placeholders it uses); results are
cached by text, so the product's few hundred distinct expressions are parsed once per process. The tree is tuples:

- a path: ``("path", elements)``, each element a name (as written: ``#n`` or a plain name) or a list index (int);
- an operand: a path, ``("value", ":v")``, ``("size", path)``; in SET, also ``("if_not_exists", path, operand)``,
  ``("list_append", a, b)``, ``("+", a, b)``, ``("-", a, b)``;
- a condition: ``("cmp", op, a, b)``, ``("between", a, low, high)``, ``("in", a, [operands])``,
  ``("fn", name, [arguments])``, ``("and", c, d)``, ``("or", c, d)``, ``("not", c)``;
- an update: ``{"SET": [(path, operand)], "REMOVE": [path], "ADD": [(path, value)], "DELETE": [(path, value)]}``;
- a projection: ``[path, ...]``.

Precedence as DynamoDB documents it: comparisons, IN, BETWEEN and functions bind tightest, then NOT, AND, OR.
Keywords are case-insensitive; function names are not. A plain name that is a DynamoDB reserved word is refused,
as DynamoDB refuses it (the list is moto's copy of DynamoDB's).
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.ddb_values import Invalid

CONDITION = "ConditionExpression"
FILTER = "FilterExpression"
KEY_CONDITION = "KeyConditionExpression"
UPDATE = "UpdateExpression"
PROJECTION = "ProjectionExpression"



def _reserved_words() -> frozenset[str]:
    """DynamoDB's reserved words, from moto's copy of the list (read as a file: importing moto takes a second)."""
    spec = importlib.util.find_spec("moto")
    assert spec is not None and spec.origin is not None, "moto (a development dependency) is not installed"
    path = Path(spec.origin).parent / "dynamodb" / "parsing" / "reserved_keywords.txt"
    return frozenset(line.strip().upper() for line in path.read_text().splitlines() if line.strip())


RESERVED = _reserved_words()
COMPARATORS = frozenset({"=", "<>", "<", "<=", ">", ">="})
CONDITION_FUNCTIONS = {"attribute_exists": 1, "attribute_not_exists": 1, "attribute_type": 2, "begins_with": 2,
                       "contains": 2}
CLAUSES = ("SET", "REMOVE", "ADD", "DELETE")
_TOKENS = re.compile(r"\s*(?:(#[A-Za-z0-9_]+)|(:[A-Za-z0-9_]+)|(<>|<=|>=|[=<>])|([(),.\[\]+\-])|([0-9]+)"
                     r"|([A-Za-z_][A-Za-z0-9_]*))")


class ExpressionError(Invalid):
    """An expression DynamoDB refuses (ValidationException with this message)."""


@dataclass(frozen=True)
class Parsed:
    tree: Any
    names: frozenset[str]
    values: frozenset[str]


_cache: dict[tuple[str, str], Parsed] = {}


def parse(kind: str, text: str) -> Parsed:
    key = (kind, text)
    found = _cache.get(key)
    if found is None:
        if len(_cache) > 20_000:
            _cache.clear()
        found = _cache[key] = _Parser(kind, text).parse()
    return found


def _tokenize(kind: str, text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    text = text.rstrip()
    if not text:
        raise ExpressionError(f"Invalid {kind}: The expression can not be empty;")
    while position < len(text):
        match = _TOKENS.match(text, position)
        if match is None or match.end() == position:
            bad = text[position:].strip()[:1]
            raise ExpressionError(f'Invalid {kind}: Syntax error; token: "{bad}", near: "{text[max(0, position - 5):position + 5].strip()}"')
        position = match.end()
        kinds = ("name", "value", "op", "punct", "number", "word")
        for index, group in enumerate(match.groups()):
            if group is not None:
                tokens.append((kinds[index], group))
                break
    return tokens


class _Parser:
    def __init__(self, kind: str, text: str) -> None:
        self.kind = kind
        self.text = text
        self.tokens = _tokenize(kind, text)
        self.at = 0
        self.names: set[str] = set()
        self.values: set[str] = set()

    # ---- tokens ----------------------------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> tuple[str, str] | None:
        index = self.at + ahead
        return self.tokens[index] if index < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise self.error(None)
        self.at += 1
        return token

    def is_word(self, *words: str, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token is not None and token[0] == "word" and token[1].upper() in words

    def is_punct(self, mark: str, ahead: int = 0) -> bool:
        return self.peek(ahead) == ("punct", mark)

    def expect_punct(self, mark: str) -> None:
        if not self.is_punct(mark):
            raise self.error(self.peek())
        self.at += 1

    def error(self, token: tuple[str, str] | None) -> ExpressionError:
        shown = "<EOF>" if token is None else f'"{token[1]}"'
        near = " ".join(text for _, text in self.tokens[max(0, self.at - 1):self.at + 2])
        return ExpressionError(f'Invalid {self.kind}: Syntax error; token: {shown}, near: "{near}"')

    # ---- entry -------------------------------------------------------------------------------------------

    def parse(self) -> Parsed:
        if self.kind == UPDATE:
            tree: Any = self.update()
        elif self.kind == PROJECTION:
            tree = self.path_list()
        else:
            tree = self.condition()
        if self.peek() is not None:
            raise self.error(self.peek())
        return Parsed(tree, frozenset(self.names), frozenset(self.values))

    # ---- paths and operands --------------------------------------------------------------------------

    def path(self) -> tuple[str, tuple[Any, ...]]:
        elements: list[Any] = [self.element()]
        while True:
            if self.is_punct("."):
                self.at += 1
                elements.append(self.element())
            elif self.is_punct("["):
                self.at += 1
                token = self.take()
                if token[0] != "number":
                    raise self.error(token)
                self.expect_punct("]")
                elements.append(int(token[1]))
            else:
                return ("path", tuple(elements))

    def element(self) -> str:
        token = self.take()
        if token[0] == "name":
            self.names.add(token[1])
            return token[1]
        if token[0] != "word":
            raise self.error(token)
        if token[1].upper() in RESERVED:
            raise ExpressionError(f"Invalid {self.kind}: Attribute name is a reserved keyword; reserved keyword: "
                                  f"{token[1]}")
        return token[1]

    def operand(self) -> tuple[Any, ...]:
        token = self.peek()
        if token is None:
            raise self.error(None)
        if token[0] == "value":
            self.at += 1
            self.values.add(token[1])
            return ("value", token[1])
        if token[0] == "word" and self.is_punct("(", 1):
            if token[1] != "size":
                raise ExpressionError(f"Invalid {self.kind}: Invalid function name; function: {token[1]}")
            self.at += 2
            path = self.path()
            self.expect_punct(")")
            return ("size", path)
        if token[0] in ("word", "name"):
            return self.path()
        raise self.error(token)

    def path_list(self) -> list[tuple[str, tuple[Any, ...]]]:
        paths = [self.path()]
        while self.is_punct(","):
            self.at += 1
            paths.append(self.path())
        return paths

    # ---- conditions ----------------------------------------------------------------------------------

    def condition(self) -> tuple[Any, ...]:
        left = self.conjunction()
        while self.is_word("OR"):
            self.at += 1
            left = ("or", left, self.conjunction())
        return left

    def conjunction(self) -> tuple[Any, ...]:
        left = self.negation()
        while self.is_word("AND"):
            self.at += 1
            left = ("and", left, self.negation())
        return left

    def negation(self) -> tuple[Any, ...]:
        if self.is_word("NOT"):
            self.at += 1
            return ("not", self.negation())
        return self.primary()

    def primary(self) -> tuple[Any, ...]:
        if self.is_punct("("):
            self.at += 1
            inner = self.condition()
            self.expect_punct(")")
            return inner
        token = self.peek()
        if token is not None and token[0] == "word" and token[1] in CONDITION_FUNCTIONS and self.is_punct("(", 1):
            return self.function(token[1])
        left = self.operand()
        token = self.peek()
        if token is not None and token[0] == "op":
            self.at += 1
            return ("cmp", token[1], left, self.operand())
        if self.is_word("BETWEEN"):
            self.at += 1
            low = self.operand()
            if not self.is_word("AND"):
                raise self.error(self.peek())
            self.at += 1
            return ("between", left, low, self.operand())
        if self.is_word("IN"):
            self.at += 1
            self.expect_punct("(")
            options = [self.operand()]
            while self.is_punct(","):
                self.at += 1
                options.append(self.operand())
            self.expect_punct(")")
            if len(options) > 100:
                raise ExpressionError(f"Invalid {self.kind}: The IN operator is provided with too many operands; "
                                      f"number of operands: {len(options)}")
            return ("in", left, options)
        if left[0] == "size":
            raise ExpressionError(f"Invalid {self.kind}: The function is not allowed to be used this way in an "
                                  "expression; function: size")
        raise self.error(token)

    def function(self, name: str) -> tuple[Any, ...]:
        self.at += 2
        arguments = [self.operand()]
        while self.is_punct(","):
            self.at += 1
            arguments.append(self.operand())
        self.expect_punct(")")
        if len(arguments) != CONDITION_FUNCTIONS[name]:
            raise ExpressionError(f"Invalid {self.kind}: Incorrect number of operands for operator or function; "
                                  f"operator or function: {name}, number of operands: {len(arguments)}")
        if arguments[0][0] != "path":
            raise ExpressionError(f"Invalid {self.kind}: Operator or function requires a document path; operator or "
                                  f"function: {name}")
        return ("fn", name, arguments)

    # ---- updates -------------------------------------------------------------------------------------------

    def update(self) -> dict[str, list[Any]]:
        clauses: dict[str, list[Any]] = {}
        while self.peek() is not None:
            token = self.take()
            clause = token[1].upper() if token[0] == "word" else ""
            if clause not in CLAUSES:
                self.at -= 1
                raise self.error(token)
            if clause in clauses:
                raise ExpressionError(f'Invalid {self.kind}: The "{clause}" section can only be used once in an '
                                      "update expression;")
            actions = [self.action(clause)]
            while self.is_punct(","):
                self.at += 1
                actions.append(self.action(clause))
            clauses[clause] = actions
        return clauses

    def action(self, clause: str) -> Any:
        path = self.path()
        if clause == "REMOVE":
            return path
        if clause == "SET":
            token = self.take()
            if token != ("op", "="):
                raise self.error(token)
            value = self.set_operand()
            if self.is_punct("+") or self.is_punct("-"):
                sign = self.take()[1]
                value = (sign, value, self.set_operand())
            return (path, value)
        value = self.operand()
        if value[0] != "value":
            raise ExpressionError(f"Invalid {self.kind}: Syntax error; {clause} takes a path and a value")
        return (path, value)

    def set_operand(self) -> tuple[Any, ...]:
        token = self.peek()
        if token is not None and token[0] == "word" and self.is_punct("(", 1):
            name = token[1]
            if name not in ("if_not_exists", "list_append"):
                raise ExpressionError(f"Invalid {self.kind}: Invalid function name; function: {name}")
            self.at += 2
            if name == "if_not_exists":
                first: tuple[Any, ...] = self.path()
            else:
                first = self.set_operand()
            self.expect_punct(",")
            second = self.set_operand()
            self.expect_punct(")")
            return (name, first, second)
        return self.operand()
