"""The project's package (pyproject.toml) installs what the CLI and the producer client import: every package their
modules import, following the imports between the project's own modules, is a declared dependency or comes with one
(so `pip install .` then `from taskqueue.client import TaskQueueClient` works outside this repository)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions, requires
from pathlib import Path

from packaging.requirements import Requirement

from tests.support import ROOT

SOURCES = {"taskqueue": ROOT / "layers" / "taskqueue" / "taskqueue", "taskq": ROOT / "cli" / "taskq"}
ENTRY_POINTS = ("taskqueue.client", "taskq.main")


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
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
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


def test_every_package_the_cli_and_the_client_import_is_installed_by_the_projects_package():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    installed = set().union(*(installed_with(requirement) for requirement in declared))
    distributions = packages_distributions()
    imports = imported_by(ENTRY_POINTS)
    assert {"boto3", "fastjsonschema", "aws_lambda_powertools"} <= imports  # the walk follows the project's imports
    missing = {top: distributions.get(top) for top in imports
               if not {canonical(d) for d in distributions.get(top, [top])} & installed}
    assert missing == {}, f"imported by taskqueue.client / taskq but not installed by pyproject.toml: {missing}"
