"""Production defaults stay the template's; the demo and the local stack turn on what they need themselves, and
docs/operations.md lists every default that differs between them and a production deploy."""

from __future__ import annotations

import re

import pytest

from local.__main__ import SCENARIOS, load_scenario, scenario_parameters
from local.scenarios import callcenter
from local.scenarios.demo_defaults import DEMO, LOCAL_STACK, PRESENCE, RUNNER, SCHEDULE
from tests.support import ROOT, template

PARAMETERS = template()["Parameters"]
SECTION = "## Demo and local stack versus a production deploy"


def text(value: object) -> str:
    """A parameter value as the table writes it: numbers without a trailing .0."""
    try:
        return f"{float(str(value)):g}" if str(value).strip() else ""
    except ValueError:
        return str(value)


def default_of(name: str) -> str:
    return text(PARAMETERS[name]["Default"])


def documented() -> dict[str, list[str]]:
    """The section's table: parameter -> its cells (production, make up, make demo, callcenter, why)."""
    text = (ROOT / "docs" / "operations.md").read_text()
    assert SECTION in text, f"docs/operations.md has no section {SECTION!r}"
    body = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in body.splitlines():
        cells = [c.strip().replace("`", "") if i else c.strip() for i, c in enumerate(line.strip().strip("|").split("|"))]
        match = re.fullmatch(r"`(\w+)`", cells[0]) if line.startswith("|") else None
        if match:
            rows[match.group(1)] = cells[1:]
    return rows


def differing(parameters: dict[str, object]) -> dict[str, str]:
    return {name: text(value) for name, value in parameters.items() if text(value) != default_of(name)}


def configurations() -> list[tuple[str, dict[str, object]]]:
    found: list[tuple[str, dict[str, object]]] = [("make up", dict(LOCAL_STACK))]
    for path in sorted(SCENARIOS.glob("*.json")):
        scenario = load_scenario(path.stem)
        if scenario.get("kind") == "callcenter":
            found.append((f"demo {path.stem}", callcenter.scenario_parameters(scenario)))
        else:
            found.append((f"demo {path.stem}", scenario_parameters(scenario)))
    return found


def test_the_template_defaults_are_the_quiet_production_ones():
    assert default_of("CreateTasksScheduleState") == "DISABLED"
    for name in ("CreateTasksConcurrency", "ProcessTasksConcurrency", "MatcherConcurrency"):
        assert default_of(name) == "", name
    # Every parameter the demo or the local stack sets is one the template declares.
    for _, parameters in configurations():
        assert set(parameters) <= set(PARAMETERS)


def test_the_demo_and_the_local_stack_turn_on_the_schedule_and_run_the_default_start_path():
    assert LOCAL_STACK == {**SCHEDULE, **PRESENCE, **RUNNER} and DEMO == {**SCHEDULE, **RUNNER}
    assert SCHEDULE["CreateTasksScheduleState"] == "ENABLED" and SCHEDULE["CreateTasksCount"] == "15"
    for name, parameters in configurations():
        for key in ("ProcessTasksConcurrency", "MatcherConcurrency"):  # how work starts: as a default deploy
            assert text(parameters.get(key, default_of(key))) == default_of(key), (name, key)
        own_arrivals = "callcenter" in name or load_scenario(name.removeprefix("demo ")).get("arrivals") in ("poisson", "groups") \
            if name.startswith("demo ") else False
        expected = "DISABLED" if own_arrivals else "ENABLED"
        assert parameters.get("CreateTasksScheduleState", default_of("CreateTasksScheduleState")) == expected, name


@pytest.mark.parametrize(("where", "parameters"), configurations(), ids=[name for name, _ in configurations()])
def test_every_default_the_demo_or_local_stack_changes_is_documented(where, parameters):
    rows = documented()
    for name, value in differing(parameters).items():
        assert name in rows, f"{where} sets {name}={value} (default {default_of(name)!r}): not in docs/operations.md, {SECTION}"
        production = rows[name][0]
        assert production.startswith(default_of(name) or "empty"), (name, production)
        column = rows[name][1] if where == "make up" else rows[name][3] if "callcenter" in where else rows[name][2]
        assert value in column, f"{where}: {name}={value}, but the table says {column!r}"


def test_the_template_names_no_runner_and_every_local_configuration_runs_the_fake_one():
    """Issue 28: a deploy without TaskRunner claims nothing; the demo, the local stack and the tests ask for the fake
    legacy system themselves (the e2e engines' parameters too)."""
    from tests.e2e.conftest import FAST

    assert default_of("TaskRunner") == "" and RUNNER == {"TaskRunner": "taskqueue.runner:fake_legacy_system"}
    for name, parameters in [*configurations(), ("e2e", FAST)]:
        assert parameters.get("TaskRunner") == RUNNER["TaskRunner"], name
