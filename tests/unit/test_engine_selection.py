"""Which engines a test runs on (tests/conftest.py): `make test` runs every test on moto and the engine tests once
more on DynamoDB Local in one run (``--dynamodb=both``); a DynamoDB Local run imports only the modules it selects
from. A test wrongly left out of the [local] runs, or a module left out of a local run's collection, would pass
unseen: these pin the rules."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.conftest import ENGINE_MODULES, MOTO_ONLY, _engine_paths, _engines_of

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Definition:
    """What ``_engines_of`` reads of a test: its id and its marks."""

    def __init__(self, nodeid: str, *marks: str, reason: str = "") -> None:
        self.nodeid = nodeid
        self._marks = {name: pytest.Mark(name, (), {"reason": reason} if reason else {}) for name in marks}

    def get_closest_marker(self, name: str) -> Any:
        return self._marks.get(name)


ENGINE_MODULE = sorted(ENGINE_MODULES)[0]


@pytest.mark.parametrize(
    ("definition", "fixtures", "engines"),
    [
        (Definition(f"{ENGINE_MODULE}::test_x"), ("aws",), ("moto", "local")),
        (Definition(f"{ENGINE_MODULE}::test_x"), ("settings",), ("moto",)),  # never reaches AWS: nothing to compare
        (Definition("tests/unit/test_x.py::test_x", "dynamodb_engines"), ("aws",), ("moto", "local")),
        (Definition("tests/unit/test_x.py::test_x"), ("aws",), ("moto",)),
        (Definition("tests/unit/test_x.py::test_x", "dynamodb_local_only"), ("aws",), ("local",)),
        (Definition(f"{ENGINE_MODULE}::test_x", "moto_only", reason="moto's own log"), ("aws",), ("moto",)),
        (Definition(f"{sorted(MOTO_ONLY)[0]}::test_x", "dynamodb_engines"), ("aws",), ("moto",)),
    ],
)
def test_the_engines_of_a_test_on_a_run_of_both(definition, fixtures, engines):
    assert _engines_of(definition, fixtures) == engines


def test_a_dynamodb_local_run_reads_the_modules_that_can_hold_its_tests_and_no_other():
    paths = _engine_paths(TESTS)
    for module in ENGINE_MODULES | set(MOTO_ONLY):
        assert os.path.join(os.path.dirname(TESTS), module) in paths, module
    marked = os.path.join(TESTS, "integration", "test_dynamodb_local_concurrency.py")  # by its module mark only
    assert marked in paths and os.path.join(TESTS, "integration") in paths
    assert os.path.join(TESTS, "unit", "test_engine_selection.py") not in paths  # no mark, not an engine module
    assert os.path.join(TESTS, "e2e") not in paths  # no module below it runs on DynamoDB Local
