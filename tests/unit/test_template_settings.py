"""template.yaml and the settings loader agree: no parameter value the template accepts is refused by
taskqueue.core.settings at the first invocation, and the lease outlasts any invocation that can hold a claim."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from taskqueue.core.settings import BOUNDS as CORE_BOUNDS
from taskqueue.matching.rules import MATCH_BOUNDS
from tests.support import template

# Every numeric variable's bounds: the queue core's (settings.BOUNDS) and the Matcher's (matching.MATCH_BOUNDS).
BOUNDS = {**CORE_BOUNDS, **MATCH_BOUNDS}
TPL = template()
PARAMETERS: dict[str, dict[str, Any]] = TPL["Parameters"]
FUNCTIONS = {name: r for name, r in TPL["Resources"].items() if r["Type"] == "AWS::Serverless::Function"}
GLOBALS = TPL["Globals"]["Function"]
# The functions that claim tasks: one invocation may hold a claimed task until its timeout.
WORKERS = ("ProcessTasksFunction", "MatcherFunction")


def environments() -> Iterator[tuple[str, Mapping[str, Any]]]:
    yield "Globals", (GLOBALS.get("Environment") or {}).get("Variables") or {}
    for name, resource in FUNCTIONS.items():
        yield name, ((resource["Properties"].get("Environment") or {}).get("Variables") or {})


def number_parameters_fed() -> list[tuple[str, str, str]]:
    """(where, environment variable, parameter) for every Number parameter that sets a variable."""
    fed = []
    for where, variables in environments():
        for variable, value in variables.items():
            if isinstance(value, dict) and set(value) == {"Ref"} and PARAMETERS.get(value["Ref"], {}).get("Type") == "Number":
                fed.append((where, variable, value["Ref"]))
    return fed


def range_problems(parameter: str, spec: Mapping[str, Any], variable: str) -> list[str]:
    """What is wrong with a Number parameter's range for the variable it feeds (empty: nothing)."""
    if variable not in BOUNDS:
        return [f"{parameter} feeds {variable}, which has no bounds in taskqueue.core.settings.BOUNDS or matching.MATCH_BOUNDS"]
    low, high = BOUNDS[variable]
    problems = []
    for field in ("MinValue", "MaxValue"):
        if field not in spec:
            problems.append(f"{parameter} has no {field}: the template admits values {variable} refuses")
    if "MinValue" in spec and float(spec["MinValue"]) < low:
        problems.append(f"{parameter} MinValue {spec['MinValue']} is below {variable}'s lowest value {low}")
    if "MaxValue" in spec and float(spec["MaxValue"]) > high:
        problems.append(f"{parameter} MaxValue {spec['MaxValue']} is above {variable}'s highest value {high}")
    if "Default" in spec and not low <= float(spec["Default"]) <= high:
        problems.append(f"{parameter} Default {spec['Default']} is outside {low}..{high}")
    return problems


def timeout_of(function: str) -> float:
    """A worker's longest Timeout: a literal, or the MaxValue of the parameter that sets it."""
    timeout = FUNCTIONS[function]["Properties"].get("Timeout", GLOBALS.get("Timeout", 3))
    if isinstance(timeout, dict):
        return float(PARAMETERS[timeout["Ref"]]["MaxValue"])
    return float(timeout)


def test_the_template_feeds_the_settings_numbers_from_parameters():
    fed = {variable for _, variable, _ in number_parameters_fed()}
    assert {"QUEUE_SHARDS", "DEFAULT_TTL_SECONDS", "RETENTION_SECONDS", "MAX_ATTEMPTS", "LEASE_SECONDS", "PAGE_SIZE",
            "TIME_BUDGET_SECONDS", "RUNNER_CAPACITY", "FAKE_RUNNER_DURATION_SECONDS", "FAKE_RUNNER_FAILURE_RATE"} <= fed


@pytest.mark.parametrize(("where", "variable", "parameter"), number_parameters_fed())
def test_every_number_parameter_lies_inside_the_bounds_of_its_variable(where, variable, parameter):
    assert range_problems(parameter, PARAMETERS[parameter], variable) == [], where


def test_literal_numbers_in_an_environment_lie_inside_the_bounds_too():
    for where, variables in environments():
        for variable, value in variables.items():
            if variable in BOUNDS and isinstance(value, (int, float, str)) and not isinstance(value, bool):
                low, high = BOUNDS[variable]
                assert low <= float(value) <= high, (where, variable, value)


def test_the_check_refuses_an_open_or_too_wide_range():
    low, high = BOUNDS["LEASE_SECONDS"]
    assert range_problems("P", {"Type": "Number", "MinValue": low}, "LEASE_SECONDS") == [
        "P has no MaxValue: the template admits values LEASE_SECONDS refuses"
    ]
    assert range_problems("P", {"Type": "Number", "MinValue": low, "MaxValue": high + 1}, "LEASE_SECONDS")
    assert range_problems("P", {"Type": "Number", "MinValue": low - 1, "MaxValue": high}, "LEASE_SECONDS")
    assert range_problems("P", {"Type": "Number", "MinValue": low, "MaxValue": high}, "NOT_A_SETTING")
    assert range_problems("P", {"Type": "Number", "MinValue": low, "MaxValue": high}, "LEASE_SECONDS") == []


def test_the_lease_outlasts_the_invocation_that_holds_the_claim():
    """A worker invocation can hold a claimed task until its timeout: a shorter lease would let another
    invocation claim the same task while the first still runs it. The Matcher's Timeout is fixed below LeaseSeconds'
    floor; ProcessTasks' is a parameter up to 900 s, and its claims take a lease of at least its Timeout
    (WORKER_TIMEOUT_SECONDS, the same parameter), whatever LeaseSeconds says."""
    from taskqueue.core.settings import Settings

    lease = PARAMETERS["LeaseSeconds"]
    assert timeout_of("MatcherFunction") == 180 <= float(lease["MinValue"]) <= float(lease["Default"])
    assert ("Globals", "LEASE_SECONDS", "LeaseSeconds") in number_parameters_fed()
    process = FUNCTIONS["ProcessTasksFunction"]["Properties"]
    assert process["Timeout"] == {"Ref": "ProcessTasksTimeout"}
    assert ("ProcessTasksFunction", "WORKER_TIMEOUT_SECONDS", "ProcessTasksTimeout") in number_parameters_fed()
    timeouts = PARAMETERS["ProcessTasksTimeout"]
    for timeout in (timeouts["MinValue"], timeouts["Default"], timeouts["MaxValue"]):
        for lease_seconds in (lease["MinValue"], lease["Default"]):
            settings = Settings.from_env({"QUEUE_TABLE_NAME": "t", "LEASE_SECONDS": str(lease_seconds),
                                          "WORKER_TIMEOUT_SECONDS": str(timeout), "DEFAULT_RUN_SECONDS": "1"})
            assert settings.lease_seconds >= timeout, (timeout, lease_seconds)


def test_the_default_run_fits_every_timeout_the_template_accepts_with_its_default():
    """DefaultRunSeconds must fit what ProcessTasks' Timeout leaves (Settings refuses it otherwise)."""
    from taskqueue.core.run_time import longest_run_seconds

    assert PARAMETERS["DefaultRunSeconds"]["MaxValue"] == longest_run_seconds(PARAMETERS["ProcessTasksTimeout"]["MaxValue"])
    assert PARAMETERS["DefaultRunSeconds"]["Default"] <= longest_run_seconds(PARAMETERS["ProcessTasksTimeout"]["Default"])
