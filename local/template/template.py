"""The stack the local engine runs: a SAM template, its parameters checked, expanded by the SAM transform
(``local/template/sam_transform.py``, what ``sam deploy`` runs) into CloudFormation, and read from there: physical names
for every resource, typed views of the functions (with what SAM made of Globals, layers, EventInvokeConfig and
event sources) and the stack's outputs. Intrinsics are resolved by ``local/template/intrinsics.py``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cfnlint.decode import cfn_yaml

from local.template.intrinsics import ACCOUNT, NO_VALUE, REGION, Resolver, TemplateError, text_of
from local.template.rules import check_rules
from local.template.sam_transform import LOCAL_BUCKET, transform

__all__ = ["ACCOUNT", "DEFAULT_STACK", "NO_VALUE", "REGION", "FunctionSpec", "Resolver", "Template", "TemplateError",
           "load_yaml"]

DEFAULT_STACK = "taskqueue-local"


def load_yaml(text: str) -> dict[str, Any]:
    """A template's YAML with the short intrinsic tags (``!Ref``, ``!GetAtt A.B``...) in their long form: cfn-lint's loader."""
    return cfn_yaml.loads(text)


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
    events: dict[str, dict[str, Any]]  # event name -> {"Type": SAM event type, "Properties": {...}} (resolved)
    max_retry_attempts: int = 2  # EventInvokeConfig (asynchronous invocations)
    max_event_age_seconds: int = 21600
    on_failure: str | None = None  # destination ARN for asynchronous invocations

    @property
    def dir_name(self) -> str:
        return self.code_dir.name


class Template:
    """A SAM template with parameter overrides applied, as CloudFormation. ``resolver`` grows as the engine
    learns the physical ids of what it creates (queue URLs, stream ARNs)."""

    def __init__(self, path: str | Path, overrides: Mapping[str, Any] | None = None, stack: str = DEFAULT_STACK) -> None:
        self.path = Path(path).resolve()
        self.root = self.path.parent
        self.doc = load_yaml(self.path.read_text())
        self.stack = stack
        self.parameters = self._parameters(overrides or {})
        # As CloudFormation: a combination the template's Rules refuse creates nothing (local/template/rules.py).
        check_rules(self.doc, self.parameters)
        self.cfn = transform(self.doc, self.parameters, self.path.name)
        self.resources: dict[str, dict[str, Any]] = self.cfn.get("Resources") or {}
        refs: dict[str, Any] = {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::StackName": stack,
            "AWS::StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{stack}/local",
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            **self.parameters,
        }
        self.resolver = Resolver(refs=refs, mappings=self.cfn.get("Mappings") or {})
        for name, expr in (self.cfn.get("Conditions") or {}).items():
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
                value = text_of(overrides[name])
            elif "Default" in spec:
                value = text_of(spec["Default"])
            else:
                raise TemplateError(f"parameter {name} has no Default: give it with --param-overrides {name}=...")
            allowed = spec.get("AllowedValues")
            if allowed and value not in [text_of(a) for a in allowed]:
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
        """The physical id (Ref) and attributes (GetAtt) each resource gets, before the engine creates it."""
        refs, attrs = self.resolver.refs, self.resolver.attrs
        name_props = {"AWS::DynamoDB::Table": "TableName", "AWS::SNS::Topic": "TopicName", "AWS::SQS::Queue": "QueueName",
                      "AWS::Lambda::Function": "FunctionName"}
        given = props.get(name_props.get(rtype, ""))
        name = given if isinstance(given, str) else self.physical_name(logical)
        service = rtype.split("::")[1].lower() if rtype.count("::") == 2 else "cloudformation"
        refs[logical] = name
        attrs[f"{logical}.Arn"] = f"arn:aws:{service}:{REGION}:{ACCOUNT}:{name}"
        if rtype == "AWS::DynamoDB::Table":
            attrs[f"{logical}.Arn"] = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"
        elif rtype == "AWS::SNS::Topic":
            refs[logical] = f"arn:aws:sns:{REGION}:{ACCOUNT}:{name}"
            attrs.update({f"{logical}.TopicName": name, f"{logical}.TopicArn": refs[logical]})
        elif rtype == "AWS::SQS::Queue":
            refs[logical] = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}"
            attrs.update({f"{logical}.QueueName": name, f"{logical}.Arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}",
                          f"{logical}.QueueUrl": refs[logical]})
        elif rtype == "AWS::Lambda::Function":
            attrs[f"{logical}.Arn"] = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
        elif rtype == "AWS::Lambda::LayerVersion":
            refs[logical] = f"arn:aws:lambda:{REGION}:{ACCOUNT}:layer:{name}:1"
        elif rtype == "AWS::Events::Rule":
            attrs[f"{logical}.Arn"] = f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{name}"
        elif rtype == "AWS::IAM::Role":
            attrs[f"{logical}.Arn"] = f"arn:aws:iam::{ACCOUNT}:role/{name}"
        elif rtype == "AWS::IAM::ManagedPolicy":  # its Ref is the ARN (output ProducerPolicyArn)
            refs[logical] = f"arn:aws:iam::{ACCOUNT}:policy/{name}"

    def _enabled(self, res: Mapping[str, Any]) -> bool:
        cond = res.get("Condition")
        return True if cond is None else self.resolver.conditions.get(cond, False)

    def of_type(self, *types: str) -> dict[str, dict[str, Any]]:
        """Resources of the given (CloudFormation) types, properties resolved."""
        return {
            logical: self.resolver.resolve(res.get("Properties") or {})
            for logical, res in self.resources.items()
            if res.get("Type") in types and self._enabled(res)
        }

    def outputs(self) -> dict[str, Any]:
        """The stack's Outputs, resolved (an output whose Condition is false is left out, as CloudFormation does)."""
        return {name: self.resolver.resolve(out.get("Value"))
                for name, out in (self.cfn.get("Outputs") or {}).items() if self._enabled(out)}

    def functions(self) -> dict[str, FunctionSpec]:
        """Every function whose code is in this repository, as the SAM transform made it."""
        specs: dict[str, FunctionSpec] = {}
        for logical, res in self.resources.items():
            props = res.get("Properties") or {}
            code = props.get("Code") or {}
            if res.get("Type") != "AWS::Lambda::Function" or not self._enabled(res) or code.get("S3Bucket") != LOCAL_BUCKET:
                continue
            own = self.resolver.resolve({k: props[k] for k in ("Handler", "Timeout", "MemorySize", "Environment",
                                                                "ReservedConcurrentExecutions") if k in props})
            reserved = own.get("ReservedConcurrentExecutions")
            name, arn = self.resolver.refs[logical], self.resolver.attrs[f"{logical}.Arn"]
            config = next((p for p in self.of_type("AWS::Lambda::EventInvokeConfig").values()
                           if p.get("FunctionName") in (name, arn)), {})
            on_failure = ((config.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
            specs[logical] = FunctionSpec(
                logical_id=logical,
                name=name,
                code_dir=self._local_path(code["S3Key"]),
                handler=str(own.get("Handler", "app.lambda_handler")),
                timeout=float(own.get("Timeout", 3)),
                memory=int(own.get("MemorySize", 128)),
                reserved_concurrency=None if reserved is None else int(reserved),
                environment={k: text_of(v) for k, v in ((own.get("Environment") or {}).get("Variables") or {}).items()},
                layer_dirs=[d for layer in props.get("Layers") or [] for d in self._layer_dirs(layer)],
                events=self._events(logical, name, arn),
                max_retry_attempts=int(config.get("MaximumRetryAttempts", 2)),
                max_event_age_seconds=int(config.get("MaximumEventAgeInSeconds", 21600)),
                on_failure=on_failure,
            )
        return specs

    def _local_path(self, key: str) -> Path:
        return Path(os.path.abspath(self.root / key))

    def _layer_dirs(self, layer: Any) -> list[Path]:
        """A layer of this template -> the directories Lambda puts on the import path from it (``/opt/python`` and
        ``/opt/python/lib/python3.x/site-packages``), as ``sam build`` would lay them out. Layers given by ARN (not
        built from this repository) are skipped. A layer whose Python code would not be found on Lambda is refused
        (``layer_problem``): here it would import, there it would not."""
        if not (isinstance(layer, dict) and layer.get("Ref") in self.resources):
            return []
        content = (self.resources[layer["Ref"]].get("Properties") or {}).get("Content") or {}
        if content.get("S3Bucket") != LOCAL_BUCKET:
            return []
        directory = self._local_path(content["S3Key"])
        build_method = self._layer_build_method(content["S3Key"])
        problem = layer_problem(directory, build_method)
        if problem:
            raise TemplateError(f"layer {layer['Ref']} (ContentUri {content['S3Key']}): {problem}")
        if build_method is not None:
            # sam build puts a python3.x layer's content (and its requirements) under python/; this repository's
            # makefile layer (QueueLayer) does the same with its taskqueue/ package.
            return [directory]
        return [d for d in (directory / "python", *sorted(directory.glob("python/lib/python3*/site-packages"))) if d.is_dir()]

    def _layer_build_method(self, content_uri: str) -> str | None:
        """Metadata.BuildMethod of the SAM layer built from ``content_uri`` (the transform drops Metadata)."""
        for resource in (self.doc.get("Resources") or {}).values():
            props = resource.get("Properties") or {}
            if resource.get("Type") == "AWS::Serverless::LayerVersion" and _same_dir(props.get("ContentUri"), content_uri):
                method = (resource.get("Metadata") or {}).get("BuildMethod")
                return str(method) if method else None
        return None

    def _events(self, logical: str, name: str, arn: str) -> dict[str, dict[str, Any]]:
        """The function's event sources, read back from the resources the SAM transform generated for them
        (event source mappings, scheduled rules, SNS subscriptions), keyed by the SAM event name."""
        events: dict[str, dict[str, Any]] = {}

        def key(resource: str) -> str:
            return resource.removeprefix(logical) or resource

        for res_id, props in self.of_type("AWS::Lambda::EventSourceMapping").items():
            if props.get("FunctionName") in (name, arn):
                kind = "DynamoDB" if ":dynamodb:" in str(props.get("EventSourceArn")) else "Unsupported"
                rest = {k: v for k, v in props.items() if k not in ("FunctionName", "EventSourceArn")}
                events[key(res_id)] = {"Type": kind, "Properties": {"Stream": props.get("EventSourceArn"), **rest}}
        for res_id, props in self.of_type("AWS::Events::Rule").items():
            for target in props.get("Targets") or []:
                if target.get("Arn") == arn:
                    kind = "Schedule" if "ScheduleExpression" in props else "EventBridgeRule"
                    events[key(res_id)] = {"Type": kind, "Properties": {
                        "Schedule": props.get("ScheduleExpression"), "State": props.get("State", "ENABLED"),
                        **({"Input": target["Input"]} if "Input" in target else {})}}
        for res_id, props in self.of_type("AWS::SNS::Subscription").items():
            if props.get("Protocol") == "lambda" and props.get("Endpoint") == arn:
                events[key(res_id)] = {"Type": "SNS", "Properties": {
                    "Topic": props.get("TopicArn"),
                    **{k: props[k] for k in ("FilterPolicy", "FilterPolicyScope") if k in props}}}
        return events


def _same_dir(a: Any, b: str) -> bool:
    return isinstance(a, str) and a.rstrip("/") == b.rstrip("/")


def layer_problem(directory: Path, build_method: str | None) -> str | None:
    """Why Lambda would not find a layer's Python code where the local engine would, or None.

    Lambda puts only ``python/`` and ``python/lib/python3.x/site-packages`` of a layer's content on the import path.
    A layer without a BuildMethod is zipped as it is, so modules at its root are never imported there; a layer with
    ``BuildMethod: python3.x`` is laid out under python/ by ``sam build``."""
    if build_method is not None:
        if not build_method.startswith("python") and build_method != "makefile":
            return f"BuildMethod {build_method} does not build a Python layer"
        return None
    if not directory.is_dir():
        return None
    found = sorted(p.name for p in directory.iterdir()
                   if (p.is_file() and p.suffix == ".py") or (p.is_dir() and (p / "__init__.py").is_file()))
    if found:
        return (f"Python code at the layer's root ({', '.join(found)}) is not on a Lambda function's import path, which "
                "holds only the layer's python/ folder: move it under python/, or give the layer "
                "`Metadata: BuildMethod: python3.13` so that sam build puts it there (with its requirements.txt)")
    return None
