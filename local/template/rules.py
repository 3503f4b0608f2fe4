"""A template's ``Rules`` section, evaluated as CloudFormation does before it creates or updates anything: for each
rule whose ``RuleCondition`` holds (or that has none), every ``Assert`` must hold, or the stack is refused with that
assertion's ``AssertDescription``. The local engine evaluates them on the parameter values it is given, so
``make up PARAMS=...`` refuses a combination a deploy would refuse, with the same message.

Only the rule-specific intrinsic functions exist here (CloudFormation allows no other in Rules): ``Fn::And``,
``Fn::Or``, ``Fn::Not``, ``Fn::Equals``, ``Fn::Contains``, ``Fn::EachMemberEquals``, ``Fn::EachMemberIn`` and
``Ref``; ``Fn::ValueOf`` / ``Fn::ValueOfAll`` / ``Fn::RefAll`` read AWS-specific parameter types, which this template
does not use, and are refused rather than guessed. Values compare as the strings CloudFormation holds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from local.template.intrinsics import TemplateError


class RuleViolation(TemplateError):
    """A rule's assertion failed: the message is its AssertDescription, as CloudFormation reports it."""

    def __init__(self, rule: str, description: str) -> None:
        super().__init__(description)
        self.rule = rule
        self.description = description


def check_rules(doc: Mapping[str, Any], parameters: Mapping[str, str]) -> None:
    """Raise RuleViolation for the first failed assertion of ``doc``'s Rules (in the template's order)."""
    declared = doc.get("Parameters") or {}
    for name, rule in (doc.get("Rules") or {}).items():
        evaluate = _Evaluator(name, declared, parameters)
        if "RuleCondition" in rule and not evaluate.boolean(rule["RuleCondition"]):
            continue
        for assertion in rule.get("Assertions") or []:
            if not evaluate.boolean(assertion["Assert"]):
                raise RuleViolation(name, str(assertion.get("AssertDescription") or f"rule {name} failed"))


class _Evaluator:
    def __init__(self, rule: str, declared: Mapping[str, Any], parameters: Mapping[str, str]) -> None:
        self._rule = rule
        self._declared = declared
        self._parameters = parameters

    def boolean(self, expr: Any) -> bool:
        value = self.value(expr)
        if not isinstance(value, bool):
            raise TemplateError(f"rule {self._rule}: {expr!r} is not a condition")
        return value

    def value(self, expr: Any) -> Any:
        if isinstance(expr, (str, int, float)) and not isinstance(expr, bool):
            return str(expr)  # CloudFormation holds parameter values as strings: compare as strings
        if isinstance(expr, list):
            return [self.value(item) for item in expr]
        if isinstance(expr, Mapping) and len(expr) == 1:
            (function, args), = expr.items()
            if function == "Ref":
                return self._ref(str(args))
            if function == "Fn::And":
                return all(self.boolean(arg) for arg in args)
            if function == "Fn::Or":
                return any(self.boolean(arg) for arg in args)
            if function == "Fn::Not":
                (only,) = args
                return not self.boolean(only)
            if function == "Fn::Equals":
                left, right = (self.value(arg) for arg in args)
                return left == right
            if function == "Fn::Contains":
                values, value = self._list(args[0]), self.value(args[1])
                return value in values
            if function == "Fn::EachMemberEquals":
                values, value = self._list(args[0]), self.value(args[1])
                return all(v == value for v in values)
            if function == "Fn::EachMemberIn":
                values, allowed = self._list(args[0]), self._list(args[1])
                return all(v in allowed for v in values)
        raise TemplateError(f"rule {self._rule}: {expr!r} is not a rule function the local engine evaluates")

    def _list(self, expr: Any) -> list[str]:
        value = self.value(expr)
        if not isinstance(value, list):
            raise TemplateError(f"rule {self._rule}: {expr!r} is not a list")
        return value

    def _ref(self, name: str) -> Any:
        if name not in self._parameters:
            raise TemplateError(f"rule {self._rule}: Ref {name} is not a parameter (Rules may refer to parameters only)")
        raw = self._parameters[name]
        if str((self._declared.get(name) or {}).get("Type", "")).startswith(("CommaDelimitedList", "List<")):
            return raw.split(",")  # as CloudFormation splits a list parameter: "" is [""]
        return raw
