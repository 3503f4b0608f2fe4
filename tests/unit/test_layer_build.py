"""The layer's build (layers/taskqueue/Makefile, pip --no-deps): every package its requirements need is named,
none that the python3.13 runtime provides is shipped, and the wheels are chosen for the functions' platform."""

from __future__ import annotations

import re
from importlib.metadata import requires

from packaging.requirements import Requirement

from tests.support import ROOT, template

LAYER = ROOT / "layers" / "taskqueue"
# What the Lambda Python runtime provides: the AWS SDK and its dependencies.
RUNTIME_PROVIDED = {"boto3", "botocore", "jmespath", "python-dateutil", "s3transfer", "six", "urllib3"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def layer_requirements() -> list[Requirement]:
    lines = (LAYER / "requirements.txt").read_text().splitlines()
    return [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]


def test_every_dependency_of_the_layers_packages_is_named_or_comes_with_the_runtime():
    named = {canonical(r.name) for r in layer_requirements()}
    missing: dict[str, str] = {}
    for requirement in layer_requirements():
        for line in requires(requirement.name) or []:
            dependency = Requirement(line)
            wanted = dependency.marker is None or any(
                dependency.marker.evaluate({"extra": extra}) for extra in requirement.extras or {""}
            )
            name = canonical(dependency.name)
            if wanted and name not in named and name not in RUNTIME_PROVIDED:
                missing[name] = requirement.name
    assert missing == {}, f"needed by the layer's packages but not in requirements.txt (pip --no-deps): {missing}"


def test_the_layer_ships_nothing_the_runtime_provides():
    assert {canonical(r.name) for r in layer_requirements()} & RUNTIME_PROVIDED == set()


def test_the_layer_is_built_for_the_functions_runtime_and_architecture():
    makefile = (LAYER / "Makefile").read_text()
    build = re.search(r"^build-QueueLayer:\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert build and "--no-deps" in build.group(1) and "-r requirements.txt" in build.group(1)
    functions = template()["Globals"]["Function"]
    version = functions["Runtime"].removeprefix("python")
    assert f"--python-version {version}" in makefile
    platform = {"arm64": "manylinux2014_aarch64", "x86_64": "manylinux2014_x86_64"}[functions["Architectures"][0]]
    assert f"--platform {platform}" in makefile
