"""The project's package (pyproject.toml) installs what the CLI and the producer client import: every package their
modules import, following the imports between the project's own modules, is a declared dependency or comes with one
(so `pip install .` then `from taskqueue.client import TaskQueueClient` works outside this repository)."""

from __future__ import annotations

import re
import sys
import tomllib
from importlib.metadata import packages_distributions, requires
from pathlib import Path

from packaging.requirements import Requirement

from tests.support import ROOT, imports_of

# Imported by taskqueue.tracing where they are installed (pyproject.toml's `tracing` extra), never required.
OPTIONAL = {"aws_xray_sdk", "opentelemetry"}
SOURCES = {"taskqueue": ROOT / "layers" / "taskqueue" / "taskqueue", "taskq": ROOT / "cli" / "taskq"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def module_file(name: str) -> Path | None:
    top, _, rest = name.partition(".")
    if top not in SOURCES:
        return None
    base = SOURCES[top].joinpath(*rest.split(".")) if rest else SOURCES[top]
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported_by(entry_points: tuple[str, ...]) -> set[str]:
    """Top-level names of the packages (not the project's, not the standard library's) these modules import,
    directly or through the project's own modules."""
    seen: set[str] = set()
    outside: set[str] = set()
    todo = list(entry_points)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = module_file(name)
        if path is None:
            continue
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for base, names in imports_of(path, package):
            for target in [base] + [f"{base}.{name}" for name in names]:
                top = target.split(".")[0]
                if top in SOURCES:
                    todo.append(target)
                elif top and top not in sys.stdlib_module_names and top != "__future__":
                    outside.add(top)
    return outside


def installed_with(requirement: str) -> set[str]:
    """A distribution and, recursively, what it requires (with the extras asked for)."""
    found: set[str] = set()
    todo = [Requirement(requirement)]
    while todo:
        req = todo.pop()
        name = canonical(req.name)
        if name in found:
            continue
        found.add(name)
        for line in requires(req.name) or []:
            dependency = Requirement(line)
            if dependency.marker is None or any(dependency.marker.evaluate({"extra": e}) for e in req.extras or {""}):
                todo.append(dependency)
    return found


def missing_from(entry_points: tuple[str, ...], requirements: list[str]) -> dict[str, object]:
    installed = set().union(*(installed_with(requirement) for requirement in requirements))
    distributions = packages_distributions()
    return {top: distributions.get(top) for top in imported_by(entry_points)
            if not {canonical(d) for d in distributions.get(top, [top])} & installed}


def test_every_package_the_client_imports_is_installed_by_the_projects_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert {"boto3", "fastjsonschema", "aws_lambda_powertools"} <= imported_by(("taskqueue.client",))  # the walk works
    missing = missing_from(("taskqueue.client",), project["dependencies"])
    # ... but what taskqueue.tracing imports only where it is installed (the `tracing` extra; docs/tracing.md)
    assert set(missing) <= OPTIONAL, f"imported by taskqueue.client but not installed by pyproject.toml: {missing}"
    with_tracing = missing_from(("taskqueue.client",), project["dependencies"] + project["optional-dependencies"]["tracing"])
    assert with_tracing == {}, f"imported by taskqueue.client but not installed with the tracing extra: {with_tracing}"


def test_the_optional_packages_are_imported_only_where_they_are_installed():
    """taskqueue.observe.tracing imports them inside functions, behind a check: a client without them runs."""
    source = (ROOT / "layers" / "taskqueue" / "taskqueue" / "observe" / "tracing.py").read_text()
    assert not re.search(r"^(from|import) (aws_xray_sdk|opentelemetry)", source, re.M)


def test_every_package_the_cli_imports_is_installed_by_the_package_with_its_extras():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = [r for requirements in (project.get("optional-dependencies") or {}).values() for r in requirements]
    missing = missing_from(("taskq.main",), project["dependencies"] + extras)
    assert missing == {}, f"imported by taskq but not installed by pyproject.toml (with its extras): {missing}"
