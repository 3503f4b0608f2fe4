"""What each function's role allows, as AWS evaluates it: template.yaml after the SAM transform (the local engine's
``Template``, which runs aws-sam-translator as ``sam deploy`` does), so SAM's policy templates
(SNSPublishMessagePolicy, ...) and the policies SAM adds itself (an event source's stream reads, X-Ray, logs) are the
statements read here; the role's inline policies, its managed policies (the AWS managed ones SAM attaches, by their
published documents) and the ``AWS::IAM::Policy`` resources attached to it, each under its condition as the
template's parameters decide it.

A grant is (action, resource key): actions with their wildcards expanded to the service's operations, resources
as logical ids (``QueueTable``, ``QueueTable/index/ReadyIndex``, ``schedule/${WakeScheduleGroup}/*``,
``*``), the form ``local.iam.requests`` gives a request.
"""

from __future__ import annotations

import fnmatch
import functools
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from local.iam.requests import Grant
from local.template.template import Template

log = logging.getLogger("local.iam")

# The AWS managed policies SAM attaches to the roles it generates, as AWS publishes them (their ARNs are fixed).
MANAGED_POLICIES: dict[str, list[dict[str, Any]]] = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole": [
        {"Effect": "Allow", "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"], "Resource": "*"},
    ],
    "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess": [
        {
            "Effect": "Allow",
            "Action": [
                "xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules",
                "xray:GetSamplingTargets", "xray:GetSamplingStatisticSummaries",
            ],
            "Resource": "*",
        },
    ],
    "arn:aws:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole": [
        {
            "Effect": "Allow",
            "Action": [
                "logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "ec2:CreateNetworkInterface",
                "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets", "ec2:DeleteNetworkInterface",
                "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses",
            ],
            "Resource": "*",
        },
    ],
    "arn:aws:iam::aws:policy/service-role/AWSLambdaDynamoDBExecutionRole": [
        {
            "Effect": "Allow",
            "Action": [
                "dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams",
                "logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents",
            ],
            "Resource": "*",
        },
    ],
}

LOGS = {"logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"}
STREAM_READ = {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"}
# IAM-only DynamoDB actions (no API operation has these names): a wildcard in a policy also grants them.
_IAM_ONLY = {"dynamodb": {"ConditionCheckItem", "PartiQLSelect", "PartiQLInsert", "PartiQLUpdate", "PartiQLDelete"}}


class UnknownPolicy(ValueError):
    """A role holds a managed policy whose document this module does not know (a deployer's own): its grants
    cannot be told, so the role is not checked."""


@dataclass(frozen=True)
class RoleGrants:
    """What one function's role allows."""

    function: str
    grants: frozenset[Grant]

    def allows(self, action: str, resource: str) -> bool:
        return any(a == action and fnmatch.fnmatchcase(resource, r) for a, r in self.grants)


def logical_of(expr: Any) -> str:
    if isinstance(expr, dict) and "Ref" in expr:
        return str(expr["Ref"])
    if isinstance(expr, dict) and "Fn::GetAtt" in expr:
        target = expr["Fn::GetAtt"]
        return str(target[0] if isinstance(target, list) else target.split(".", 1)[0])
    raise ValueError(f"cannot tell which resource {expr!r} names")


def resource_key(expr: Any) -> str:
    """A policy Resource as '<LogicalId>[/index/<name>]', a schedule pattern, '*', or a literal ARN as written."""
    if isinstance(expr, str):
        return expr
    if isinstance(expr, dict) and ("Ref" in expr or "Fn::GetAtt" in expr):
        return logical_of(expr)
    if isinstance(expr, dict) and "Fn::Sub" in expr:
        body = expr["Fn::Sub"]
        text, variables = (body, {}) if isinstance(body, str) else body
        if text.startswith("arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:"):
            return "schedule/" + text.split(":schedule/", 1)[1]  # schedule/<group>/<name pattern>

        def name(match: re.Match[str]) -> str:
            var = match.group(1)
            if var in variables:
                return f"<{logical_of(variables[var])}>"
            if var.endswith(".Arn"):
                return f"<{var[:-4]}>"
            if var.startswith("AWS::"):
                return var
            raise ValueError(f"unknown variable {var!r} in {expr!r}")

        resolved = re.sub(r"\$\{([^}]+)\}", name, text)
        found = re.search(r"<(\w+)>(.*)$", resolved)
        if not found:
            raise ValueError(f"cannot tell which resource {expr!r} names")
        return found.group(1) + found.group(2)
    raise ValueError(f"cannot read the policy resource {expr!r}")


@functools.cache
def _operations(service: str) -> frozenset[str]:
    import botocore.session

    model = botocore.session.get_session().get_service_model(service)
    return frozenset(model.operation_names) | _IAM_ONLY.get(service, set())


def expand(action: str) -> set[str]:
    """'sqs:SendMessage*' -> {'sqs:SendMessage', 'sqs:SendMessageBatch'}; other services' actions as written."""
    service, _, pattern = action.partition(":")
    if service in ("dynamodb", "sns", "sqs") and any(c in pattern for c in "*?"):
        return {f"{service}:{op}" for op in _operations(service) if fnmatch.fnmatchcase(op, pattern)}
    return {action}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _chosen(value: Any, template: Template) -> list[Any]:
    """A statement's part with ``Fn::If`` decided by the template's conditions and a parameter's ``Ref`` replaced
    by its value (a comma-delimited list: each item); ``AWS::NoValue`` dropped."""
    out: list[Any] = []
    for item in _as_list(value):
        if isinstance(item, dict) and "Fn::If" in item:
            condition, if_true, if_false = item["Fn::If"]
            out += _chosen(if_true if template.resolver.conditions.get(condition, False) else if_false, template)
        elif isinstance(item, dict) and item.get("Ref") == "AWS::NoValue":
            continue
        elif isinstance(item, dict) and item.get("Ref") in (template.cfn.get("Parameters") or {}):
            value = template.parameters.get(item["Ref"], "")
            out += [v.strip() for v in str(value).split(",") if v.strip()] if isinstance(value, str) else _as_list(value)
        else:
            out.append(item)
    return out


def statements(template: Template, function: str) -> list[dict[str, Any]]:
    """Every statement the role of ``function`` (``<function>Role``, SAM's generated role) holds."""
    resources = template.cfn["Resources"]
    role_id = f"{function}Role"
    role = resources[role_id]["Properties"]
    found = [s for p in role.get("Policies", []) for s in p["PolicyDocument"]["Statement"]]
    for arn in _chosen(role.get("ManagedPolicyArns", []), template):
        if arn not in MANAGED_POLICIES:
            raise UnknownPolicy(f"{function}: managed policy {arn} has no known document here")
        found += MANAGED_POLICIES[arn]
    for resource in resources.values():
        props = resource.get("Properties") or {}
        if resource.get("Type") != "AWS::IAM::Policy" or {"Ref": role_id} not in props.get("Roles", []):
            continue
        if resource.get("Condition") and not template.resolver.conditions.get(resource["Condition"], False):
            continue
        found += _as_list(props["PolicyDocument"]["Statement"])
    return found


def role_grants(template: Template, function: str) -> RoleGrants:
    """(action, resource key) pairs the function's role allows, wildcards in actions expanded."""
    found: set[Grant] = set()
    for statement in statements(template, function):
        if statement.get("Effect") != "Allow" or "NotAction" in statement or "NotResource" in statement:
            raise ValueError(f"{function}: only Allow statements with Action and Resource are read here, got {statement!r}")
        if not _condition_holds(statement.get("Condition")):
            continue
        for action in _chosen(statement["Action"], template):
            for resource in _chosen(statement["Resource"], template):
                found |= {(a, resource_key(resource)) for a in expand(str(action))}
    return RoleGrants(function, frozenset(found))


def _condition_holds(condition: Mapping[str, Any] | None) -> bool:
    """The one condition the roles use: ``iam:PassedToService`` on a PassRole. The code passes a role only in its
    EventBridge Scheduler requests (``local.iam.requests``), so it holds when it names that service."""
    if not condition:
        return True
    if list(condition) != ["StringEquals"] or list(condition["StringEquals"]) != ["iam:PassedToService"]:
        raise ValueError(f"a statement's condition this module cannot evaluate: {condition!r}")
    return bool(condition["StringEquals"]["iam:PassedToService"] == "scheduler.amazonaws.com")


def platform_calls(template: Template, function: str) -> set[Grant]:
    """What Lambda itself does with the function's role (its logs, X-Ray, a stream event source's reads, an
    on-failure destination), read from the translated template."""
    out = template.cfn["Resources"]
    calls = {(a, f"log-group:/aws/lambda/{function}") for a in LOGS}
    if (out[function]["Properties"].get("TracingConfig") or {}).get("Mode") == "Active":
        calls |= {("xray:PutTraceSegments", "*"), ("xray:PutTelemetryRecords", "*")}

    def on_failure(props: Mapping[str, Any]) -> set[Grant]:
        destination = ((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        if destination is None:
            return set()
        target = logical_of(destination)
        action = {"AWS::SQS::Queue": "sqs:SendMessage", "AWS::SNS::Topic": "sns:Publish"}[out[target]["Type"]]
        return {(action, target)}

    for resource in out.values():
        props = resource.get("Properties") or {}
        if props.get("FunctionName") != {"Ref": function}:
            continue
        if resource["Type"] == "AWS::Lambda::EventSourceMapping":
            table = logical_of(props["EventSourceArn"])
            calls |= {(a, f"{table}/stream/*") for a in STREAM_READ} | on_failure(props)
        elif resource["Type"] == "AWS::Lambda::EventInvokeConfig":
            calls |= on_failure(props)
    return calls


def functions(template: Template) -> list[str]:
    """The template's functions (logical ids) whose role SAM generates."""
    return sorted(logical for logical, r in template.cfn["Resources"].items()
                  if r.get("Type") == "AWS::Lambda::Function" and f"{logical}Role" in template.cfn["Resources"])


def physical_names(template: Template) -> dict[str, str]:
    """Physical name -> logical id for every resource the engine named (tables, topics' ARNs and names, queues'
    URLs, roles' and functions' ARNs)."""
    names: dict[str, str] = {}
    for key, value in [*template.resolver.attrs.items(), *((f"{k}.Ref", v) for k, v in template.resolver.refs.items())]:
        logical = key.split(".", 1)[0]
        if isinstance(value, str) and logical in template.resources and value:
            names.setdefault(value, logical)
    return names


def sandbox_spec(template: Template, function: str) -> dict[str, Any] | None:
    """What a local engine sandbox of ``function`` checks its requests against (``local.iam.enforce.enforce_process``):
    its role's grants and the stack's physical names, as JSON; None (logged) for a role whose grants cannot be told
    (a deployer's own managed policy) or a function without a generated role."""
    try:
        grants = role_grants(template, function).grants
    except (UnknownPolicy, KeyError, ValueError) as exc:
        log.warning("%s: its requests are not checked against its role (%s)", function, exc)
        return None
    return {"function": function, "grants": sorted(grants), "names": physical_names(template), "stack": template.stack}
