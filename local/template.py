"""Read a SAM template: a YAML loader for the short intrinsic tags, an intrinsic resolver, and typed views
of the resources the local engine creates (tables, topics, queues, functions with Globals merged)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

REGION = "us-east-1"
ACCOUNT = "123456789012"
DEFAULT_STACK = "taskqueue-local"


class TemplateError(ValueError):
    """The template uses something the local engine cannot resolve; the message names it."""


# --------------------------------------------------------------------------- YAML loader

_TAGS = ["Ref", "Condition", "GetAtt", "Sub", "Join", "Select", "Split", "If", "Equals", "Not", "And", "Or",
         "FindInMap", "Base64", "GetAZs", "ImportValue", "Cidr", "Length", "ToJsonString"]


class _Loader(yaml.SafeLoader):
    pass


def _make_constructor(tag: str) -> Callable[[yaml.Loader, yaml.Node], Any]:
    key = tag if tag in ("Ref", "Condition") else f"Fn::{tag}"

    def construct(loader: yaml.Loader, node: yaml.Node) -> Any:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
            if tag == "GetAtt":
                value = str(value).split(".", 1)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        return {key: value}

    return construct


for _tag in _TAGS:
    _Loader.add_constructor(f"!{_tag}", _make_constructor(_tag))


def load_yaml(text: str) -> dict[str, Any]:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


# --------------------------------------------------------------------------- intrinsic resolver

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
            return str(sep).join(_text(v) for v in self.resolve(items))
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
            return _text(a) == _text(b)
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
            import base64

            return base64.b64encode(_text(self.resolve(arg)).encode()).decode()
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
                return _text(variables[name])
            if "." in name and name.split(".", 1)[0] not in self.refs:
                logical, attr = name.split(".", 1)
                return _text(self.get_att(logical, attr))
            if name in self.refs:
                return _text(self.ref(name))
            if "." in name:
                logical, attr = name.split(".", 1)
                return _text(self.get_att(logical, attr))
            raise TemplateError(f"Sub ${{{name}}}: no such parameter, resource or variable")

        return _SUB_VAR.sub(replace, text)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# --------------------------------------------------------------------------- typed views


@dataclass
class FunctionSpec:
    logical_id: str
    name: str
    code_dir: Path
    handler: str  # module.function, relative to code_dir
    timeout: float
    memory: int
    reserved_concurrency: int | None
    environment: dict[str, str]
    layer_dirs: list[Path]
    events: dict[str, dict[str, Any]]  # event name -> {"Type": ..., "Properties": {...}} (resolved)
    max_retry_attempts: int = 2  # EventInvokeConfig (asynchronous invocations)
    max_event_age_seconds: int = 21600
    on_failure: str | None = None  # destination ARN for asynchronous invocations

    @property
    def dir_name(self) -> str:
        return self.code_dir.name


class Template:
    """A SAM template with parameter overrides applied. ``resolver`` grows as the engine learns the
    physical ids of what it creates (queue URLs, stream ARNs)."""

    def __init__(self, path: str | Path, overrides: Mapping[str, Any] | None = None, stack: str = DEFAULT_STACK) -> None:
        self.path = Path(path).resolve()
        self.root = self.path.parent
        self.doc = load_yaml(self.path.read_text())
        self.stack = stack
        self.resources: dict[str, dict[str, Any]] = self.doc.get("Resources") or {}
        self.parameters = self._parameters(overrides or {})
        refs: dict[str, Any] = {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::StackName": stack,
            "AWS::StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{stack}/local",
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            **self.parameters,
        }
        self.resolver = Resolver(refs=refs, mappings=self.doc.get("Mappings") or {})
        for name, expr in (self.doc.get("Conditions") or {}).items():
            self.resolver.conditions[name] = bool(self.resolver.resolve(expr))
        for logical, res in self.resources.items():
            self._default_ids(logical, res.get("Type", ""), res.get("Properties") or {})

    def _parameters(self, overrides: Mapping[str, Any]) -> dict[str, str]:
        declared = self.doc.get("Parameters") or {}
        unknown = sorted(set(overrides) - set(declared))
        if unknown:
            raise TemplateError(f"parameter override(s) {', '.join(unknown)} not declared in {self.path.name}")
        values: dict[str, str] = {}
        for name, spec in declared.items():
            if name in overrides:
                value = _text(overrides[name])
            elif "Default" in spec:
                value = _text(spec["Default"])
            else:
                raise TemplateError(f"parameter {name} has no Default: give it with --param-overrides {name}=...")
            allowed = spec.get("AllowedValues")
            if allowed and value not in [_text(a) for a in allowed]:
                raise TemplateError(f"parameter {name}={value!r} is not one of {allowed}")
            if spec.get("Type") == "Number":
                try:
                    number = float(value)
                except ValueError:
                    raise TemplateError(f"parameter {name}={value!r} is not a number") from None
                if "MinValue" in spec and number < float(spec["MinValue"]):
                    raise TemplateError(f"parameter {name}={value} is below its MinValue {spec['MinValue']}")
                if "MaxValue" in spec and number > float(spec["MaxValue"]):
                    raise TemplateError(f"parameter {name}={value} is above its MaxValue {spec['MaxValue']}")
            values[name] = value
        return values

    def physical_name(self, logical: str) -> str:
        return f"{self.stack}-{logical}"

    def _default_ids(self, logical: str, rtype: str, props: Mapping[str, Any]) -> None:
        refs, attrs = self.resolver.refs, self.resolver.attrs
        name = self.physical_name(logical)
        if rtype == "AWS::DynamoDB::Table":
            name = props.get("TableName") if isinstance(props.get("TableName"), str) else name
            refs[logical] = name
            attrs[f"{logical}.Arn"] = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"
        elif rtype == "AWS::SNS::Topic":
            name = props.get("TopicName") if isinstance(props.get("TopicName"), str) else name
            arn = f"arn:aws:sns:{REGION}:{ACCOUNT}:{name}"
            refs[logical] = arn
            attrs.update({f"{logical}.TopicName": name, f"{logical}.TopicArn": arn})
        elif rtype == "AWS::SQS::Queue":
            name = props.get("QueueName") if isinstance(props.get("QueueName"), str) else name
            refs[logical] = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}"
            attrs.update({f"{logical}.QueueName": name, f"{logical}.Arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}",
                          f"{logical}.QueueUrl": refs[logical]})
        elif rtype in ("AWS::Serverless::Function", "AWS::Lambda::Function"):
            name = props.get("FunctionName") if isinstance(props.get("FunctionName"), str) else name
            refs[logical] = name
            attrs[f"{logical}.Arn"] = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
        elif rtype in ("AWS::Serverless::LayerVersion", "AWS::Lambda::LayerVersion"):
            refs[logical] = f"arn:aws:lambda:{REGION}:{ACCOUNT}:layer:{name}:1"

    def of_type(self, *types: str) -> dict[str, dict[str, Any]]:
        """Resources of the given types, properties resolved."""
        return {
            logical: self.resolver.resolve(res.get("Properties") or {})
            for logical, res in self.resources.items()
            if res.get("Type") in types and self._enabled(res)
        }

    def _enabled(self, res: Mapping[str, Any]) -> bool:
        cond = res.get("Condition")
        return True if cond is None else self.resolver.conditions.get(cond, False)

    def functions(self) -> dict[str, FunctionSpec]:
        """Every function with Globals.Function merged as SAM does: maps merged, lists added, scalars overridden."""
        globals_fn = (self.doc.get("Globals") or {}).get("Function") or {}
        specs: dict[str, FunctionSpec] = {}
        for logical, res in self.resources.items():
            if res.get("Type") != "AWS::Serverless::Function" or not self._enabled(res):
                continue
            raw = dict(globals_fn)
            own = res.get("Properties") or {}
            for key, value in own.items():
                inherited = globals_fn.get(key)
                if key == "Environment":
                    merged = dict((globals_fn.get("Environment") or {}).get("Variables") or {})
                    merged.update((value or {}).get("Variables") or {})
                    raw["Environment"] = {"Variables": merged}
                elif isinstance(inherited, list) and isinstance(value, list):
                    raw[key] = inherited + value  # SAM: lists in Globals are additive (e.g. Layers)
                elif isinstance(inherited, dict) and isinstance(value, dict):
                    raw[key] = {**inherited, **value}  # SAM: maps are merged
                else:
                    raw[key] = value
            layer_dirs = [self._layer_dir(layer) for layer in raw.get("Layers") or []]
            props = self.resolver.resolve({k: v for k, v in raw.items() if k != "Layers"})
            code_dir = Path(os.path.abspath(self.root / str(props.get("CodeUri", "."))))
            handler = str(props.get("Handler", "app.lambda_handler"))
            env = {k: _text(v) for k, v in ((props.get("Environment") or {}).get("Variables") or {}).items()}
            reserved = props.get("ReservedConcurrentExecutions")
            eic = props.get("EventInvokeConfig") or {}
            on_failure = ((eic.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
            specs[logical] = FunctionSpec(
                logical_id=logical,
                name=self.resolver.refs[logical],
                code_dir=code_dir,
                handler=handler,
                timeout=float(props.get("Timeout", 3)),
                memory=int(props.get("MemorySize", 128)),
                reserved_concurrency=None if reserved is None else int(reserved),
                environment=env,
                layer_dirs=[d for d in layer_dirs if d is not None],
                events=props.get("Events") or {},
                max_retry_attempts=int(eic.get("MaximumRetryAttempts", 2)),
                max_event_age_seconds=int(eic.get("MaximumEventAgeInSeconds", 21600)),
                on_failure=on_failure,
            )
        return specs

    def _layer_dir(self, layer: Any) -> Path | None:
        """A layer given as a Ref to a LayerVersion in this template -> its ContentUri directory (SAM's
        python build puts that directory's contents on /opt/python). Other layers (ARNs) are skipped."""
        if isinstance(layer, dict) and "Ref" in layer and layer["Ref"] in self.resources:
            res = self.resources[layer["Ref"]]
            props = res.get("Properties") or {}
            uri = props.get("ContentUri") or props.get("Content")
            if isinstance(uri, str):
                return Path(os.path.abspath(self.root / uri))
        return None
