"""CloudFormation intrinsic functions, resolved locally: ``Ref``, ``Fn::GetAtt``, ``Fn::Sub`` (both forms),
``Join``, ``Select``, ``Split``, ``If``/``Equals``/``Not``/``And``/``Or``, ``FindInMap``, ``ToJsonString``,
``Base64``, ``GetAZs``, ``AWS::NoValue``, against the physical names and attributes the engine gives the stack's
resources. What the SAM transform leaves in its CloudFormation output is what this resolves."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

REGION = "us-east-1"
ACCOUNT = "123456789012"


class TemplateError(ValueError):
    """The template uses something the local engine cannot resolve; the message names it."""


_SUB_VAR = re.compile(r"\$\{([^}]*)\}")
NO_VALUE = object()


@dataclass
class Resolver:
    """Resolves intrinsics against ``refs`` (parameter / resource / pseudo-parameter name -> value),
    ``attrs`` ("Logical.Attr" -> value) and ``conditions`` (name -> bool)."""

    refs: dict[str, Any]
    attrs: dict[str, Any] = field(default_factory=dict)
    conditions: dict[str, bool] = field(default_factory=dict)
    mappings: dict[str, Any] = field(default_factory=dict)

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            out = [self.resolve(v) for v in value]
            return [v for v in out if v is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            (key, arg), = value.items()
            if key == "Ref" or key.startswith("Fn::") or key == "Condition":
                return self._intrinsic(key, arg)
        out = {k: self.resolve(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not NO_VALUE}

    def ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return NO_VALUE
        if name not in self.refs:
            raise TemplateError(f"Ref {name!r}: no such parameter or resource (or it is not supported locally)")
        return self.refs[name]

    def get_att(self, logical: str, attr: str) -> Any:
        key = f"{logical}.{attr}"
        if key not in self.attrs:
            raise TemplateError(f"GetAtt {key}: unknown resource or attribute")
        return self.attrs[key]

    def _intrinsic(self, key: str, arg: Any) -> Any:
        if key == "Ref":
            return self.ref(self.resolve(arg))
        if key == "Condition":
            return self._condition(arg)
        fn = key[4:]
        if fn == "GetAtt":
            arg = self.resolve(arg)
            if isinstance(arg, str):
                arg = arg.split(".", 1)
            return self.get_att(arg[0], arg[1])
        if fn == "Sub":
            if isinstance(arg, list):
                text, variables = arg[0], {k: self.resolve(v) for k, v in (arg[1] or {}).items()}
            else:
                text, variables = arg, {}
            return self._sub(text, variables)
        if fn == "Join":
            sep, items = arg
            return str(sep).join(text_of(v) for v in self.resolve(items))
        if fn == "Select":
            index, items = self.resolve(arg)
            return items[int(index)]
        if fn == "Split":
            sep, text = self.resolve(arg)
            return str(text).split(sep)
        if fn == "If":
            name, yes, no = arg
            return self.resolve(yes if self._condition(name) else no)
        if fn == "Equals":
            a, b = self.resolve(arg)
            return text_of(a) == text_of(b)
        if fn == "Not":
            return not self._truth(arg[0])
        if fn == "And":
            return all(self._truth(a) for a in arg)
        if fn == "Or":
            return any(self._truth(a) for a in arg)
        if fn == "FindInMap":
            m, k1, k2 = self.resolve(arg)
            return self.mappings[m][k1][k2]
        if fn == "ToJsonString":
            return json.dumps(self.resolve(arg), separators=(",", ":"))
        if fn == "Base64":
            return base64.b64encode(text_of(self.resolve(arg)).encode()).decode()
        if fn == "GetAZs":
            return [f"{REGION}a", f"{REGION}b", f"{REGION}c"]
        raise TemplateError(f"Fn::{fn} is not supported by the local engine")

    def _truth(self, value: Any) -> bool:
        if isinstance(value, dict) and set(value) == {"Condition"}:
            return self._condition(value["Condition"])
        return bool(self.resolve(value))

    def _condition(self, name: str) -> bool:
        if name not in self.conditions:
            raise TemplateError(f"Condition {name!r} is not defined")
        return self.conditions[name]

    def _sub(self, text: str, variables: Mapping[str, Any]) -> str:
        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return text_of(variables[name])
            if "." in name and name.split(".", 1)[0] not in self.refs:
                logical, attr = name.split(".", 1)
                return text_of(self.get_att(logical, attr))
            if name in self.refs:
                return text_of(self.ref(name))
            if "." in name:
                logical, attr = name.split(".", 1)
                return text_of(self.get_att(logical, attr))
            raise TemplateError(f"Sub ${{{name}}}: no such parameter, resource or variable")

        return _SUB_VAR.sub(replace, text)


def text_of(value: Any) -> str:
    """A value as CloudFormation turns it into text (booleans lower case, 3.0 as 3)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
