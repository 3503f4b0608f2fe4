"""template.yaml's Rules (issue 28): every parameter combination the code would refuse at run time is refused at deploy,
each with a message naming both parameters, and the defaults and the demo's parameters pass. The Rules are evaluated
as CloudFormation does by local/template/rules.py, which the local engine runs before anything starts (``make up PARAMS=...``)."""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from local.template.intrinsics import text_of
from local.template.rules import RuleViolation, check_rules
from local.template.template import load_yaml
from taskqueue.core.errors import ConfigError
from taskqueue.core.settings import Settings
from tests.support import ROOT

DOC = load_yaml((ROOT / "template.yaml").read_text())
PARAMETERS: dict[str, dict[str, Any]] = DOC["Parameters"]


def values(overrides: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Every parameter's value as CloudFormation holds it: the override, else the Default."""
    overrides = overrides or {}
    return {name: text_of(overrides.get(name, spec.get("Default", ""))) for name, spec in PARAMETERS.items()}


def refusal(overrides: Mapping[str, Any]) -> RuleViolation | None:
    try:
        check_rules(DOC, values(overrides))
    except RuleViolation as exc:
        return exc
    return None


def allowed(name: str) -> list[str]:
    return [text_of(v) for v in PARAMETERS[name]["AllowedValues"]]


def test_the_defaults_pass():
    assert refusal({}) is None


def demo_configurations() -> Iterator[tuple[str, dict[str, Any]]]:
    from local.__main__ import SCENARIOS, load_scenario, scenario_parameters
    from local.scenarios import callcenter
    from local.scenarios.demo_defaults import LOCAL_STACK
    from tests.e2e.conftest import FAST

    yield "make up", dict(LOCAL_STACK)
    yield "e2e", dict(FAST)
    for path in sorted(SCENARIOS.glob("*.json")):
        scenario = load_scenario(path.stem)
        maker = callcenter.scenario_parameters if scenario.get("kind") == "callcenter" else scenario_parameters
        yield f"demo {path.stem}", maker(scenario)


@pytest.mark.parametrize(("where", "parameters"), list(demo_configurations()), ids=lambda v: v if isinstance(v, str) else "")
def test_the_demos_and_the_local_stacks_parameters_pass(where, parameters):
    assert refusal(parameters) is None, where


def test_every_timeout_and_default_run_pair_is_refused_exactly_when_the_settings_refuse_it():
    """DefaultRunSeconds <= ProcessTasksTimeout - 15 (taskqueue.core.run_time): over every pair the template accepts."""
    refused_pairs = 0
    for timeout, run in itertools.product(allowed("ProcessTasksTimeout"), allowed("DefaultRunSeconds")):
        try:
            Settings.from_env({"QUEUE_TABLE_NAME": "t", "WORKER_TIMEOUT_SECONDS": timeout, "DEFAULT_RUN_SECONDS": run})
            settings_refuse = False
        except ConfigError:
            settings_refuse = True
        found = refusal({"ProcessTasksTimeout": timeout, "DefaultRunSeconds": run})
        assert (found is not None) == settings_refuse, (timeout, run, found)
        if found:
            refused_pairs += 1
            assert f"DefaultRunSeconds {run}" in str(found) and "ProcessTasksTimeout" in str(found)
    assert refused_pairs > 50  # the lists really overlap where it matters (30..74 with the default 60, say)
    assert refusal({"ProcessTasksTimeout": "60"}) is not None  # issue 28's case: 30..74 with the default 60


def test_provisioned_max_capacity_below_either_minimum_is_refused():
    capacities = allowed("ProvisionedMaxCapacity")
    assert capacities == allowed("ProvisionedReadCapacity") == allowed("ProvisionedWriteCapacity")
    for read, write, most in itertools.product(capacities, repeat=3):
        asked = {"ProvisionedReadCapacity": read, "ProvisionedWriteCapacity": write, "ProvisionedMaxCapacity": most}
        found = refusal({**asked, "BillingMode": "PROVISIONED"})
        broken = float(most) < max(float(read), float(write))
        assert (found is not None) == broken, (asked, found)
        if found:
            low = "ProvisionedReadCapacity" if float(read) > float(most) else "ProvisionedWriteCapacity"
            assert f"ProvisionedMaxCapacity {most}" in str(found) and low in str(found)
        # On demand, no scalable target exists: the capacities are not used, nothing to refuse.
        assert refusal({**asked, "BillingMode": "PAY_PER_REQUEST"}) is None


@pytest.mark.parametrize(
    ("actions", "resources", "refused_naming"),
    [
        ("", "", None),
        ("s3:GetObject,sqs:SendMessage", "arn:aws:s3:::b/*,arn:aws:sqs:us-east-1:1:q", None),
        ("s3:GetObject", "", ("RunnerPolicyActions", "RunnerPolicyResources")),
        ("", "arn:aws:s3:::b/*", ("RunnerPolicyResources", "RunnerPolicyActions")),
        ("s3:GetObject,", "arn:aws:s3:::b/*", ("RunnerPolicyActions", "RunnerPolicyResources")),
        ("s3:GetObject", "arn:aws:s3:::b/*,", ("RunnerPolicyActions", "RunnerPolicyResources")),
    ],
)
def test_a_runner_policy_needs_both_its_actions_and_its_resources(actions, resources, refused_naming):
    found = refusal({"RunnerPolicyActions": actions, "RunnerPolicyResources": resources})
    if refused_naming is None:
        assert found is None
    else:
        assert found is not None and all(name in str(found) for name in refused_naming), found


@pytest.mark.parametrize(
    ("subnets", "groups", "refused"),
    [("", "", False), ("subnet-1,subnet-2", "sg-1", False), ("subnet-1", "", True), ("", "sg-1", True)],
)
def test_a_runner_vpc_needs_both_subnets_and_security_groups(subnets, groups, refused):
    found = refusal({"RunnerSubnetIds": subnets, "RunnerSecurityGroupIds": groups})
    assert (found is not None) == refused
    if found:
        assert "RunnerSubnetIds" in str(found) and "RunnerSecurityGroupIds" in str(found)


def refs(expr: Any) -> set[str]:
    if isinstance(expr, dict):
        return {expr["Ref"]} if set(expr) == {"Ref"} else set().union(*(refs(v) for v in expr.values()))
    if isinstance(expr, list):
        return set().union(set(), *(refs(v) for v in expr))
    return set()


def test_each_assertion_names_every_parameter_it_compares():
    assertions = [(name, a) for name, rule in DOC["Rules"].items() for a in rule["Assertions"]]
    assert len(assertions) >= 10
    for name, assertion in assertions:
        compared = refs(assertion["Assert"])
        assert len(compared) >= 2, (name, compared)
        for parameter in compared:
            assert parameter in assertion["AssertDescription"], (name, parameter, assertion["AssertDescription"])


def test_make_up_refuses_a_bad_combination_with_the_rules_message(tmp_path):
    """``python -m local up`` (what ``make up PARAMS=...`` runs) refuses before it starts anything."""
    run = subprocess.run(
        [sys.executable, "-m", "local", "up", "--port", "1", "--discovery", str(tmp_path / "stack.json"),
         "--param-overrides", "ProcessTasksTimeout=60"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert "DefaultRunSeconds 60 needs a ProcessTasksTimeout of at least 75" in run.stderr
    assert not (tmp_path / "stack.json").exists()
