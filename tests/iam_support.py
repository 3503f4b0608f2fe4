"""IAM as AWS enforces it, for the whole suite (``local.iam``): every request a function's code makes in a test is
checked against that function's role as template.yaml grants it, and one the role does not allow fails where it is
made (AccessDenied), as on AWS.

Which function runs: each handler module ``tests.support.load_function`` loads has its entry points (its module-level
functions: ``lambda_handler``, ``handle``, ``run_matcher``, ...) run under ``acting_as(<its logical id>)``; a test
that drives a function's code without its handler says so with ``acting_as``. Requests of a test's own set-up
(creating tables, seeding items, outside any function) are not checked; a fault hook that writes as someone else
inside a function's run wraps its requests in ``unchecked()``.

Physical names of the suite (``TEST_NAMES``): the tables ``tests.conftest`` and ``tests.agent_support`` create, the
``Topics`` fixture's topics, the least-privilege test's queue, role and stack.

The tally (requests checked per function, grants used, denials) of each test process is written at its end, and the
run's summary adds them up: per function, requests checked, denials, and the grants on the template's own resources
that no request used (``pytest_terminal_summary``).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from local.iam import enforce
from local.iam.enforce import TALLY, Enforcer, acting_as, unchecked
from local.iam.requests import Names

__all__ = ["TALLY", "acting_as", "checked_module", "function_of", "unchecked"]

STACK = "teststack"
TEST_NAMES = Names({
    "test-queue-table": "QueueTable",
    "test-agent-table": "AgentTable",
    "worker-wake-up-topic": "WorkerWakeUpTopic",
    "failed-events": "FailedEventsQueue",
    f"{STACK}-WakeScheduleRole": "WakeScheduleRole",
    f"{STACK}-WakeScheduleGroup-1A2B3C": "WakeScheduleGroup",
    "stack-WakeScheduleGroup-1A2B3C": "WakeScheduleGroup",  # tests/integration/test_delayed_wakeup.py's
}, stack=STACK)
_DIR_ENV = "TASKQUEUE_IAM_TALLY_DIR"


@functools.cache
def stack() -> Any:
    """template.yaml as the SAM transform makes it, with the parameters' defaults (3 s: once per process)."""
    from local.template.template import Template
    from tests.support import TEMPLATE

    return Template(TEMPLATE, {}, stack=STACK)


def roles() -> dict[str, frozenset[tuple[str, str]]]:
    from local.iam.grants import functions, role_grants

    return {f: role_grants(stack(), f).grants for f in functions(stack())}


@functools.cache
def _functions_by_dir() -> dict[str, str]:
    from tests.support import template

    found = {}
    for logical, resource in template()["Resources"].items():
        code = str((resource.get("Properties") or {}).get("CodeUri") or "")
        if resource.get("Type") == "AWS::Serverless::Function" and code.startswith("functions/"):
            found[code.strip("/").split("/")[1]] = logical
    return found


def function_of(directory: str) -> str:
    """The logical id of the function whose code is functions/<directory>/."""
    return _functions_by_dir()[directory]


def checked_module(module: ModuleType, directory: str) -> ModuleType:
    """Run the handler module's entry points (its own module-level functions) as its function."""
    function = function_of(directory)
    for name, value in list(vars(module).items()):
        if inspect.isfunction(value) and value.__module__ == module.__name__ and not name.startswith("_"):
            setattr(module, name, _as(function, value))
    return module


def _as(function: str, entry: Any) -> Any:
    @functools.wraps(entry)
    def run(*args: Any, **kwargs: Any) -> Any:
        with acting_as(function):
            return entry(*args, **kwargs)

    return run


def install() -> None:
    enforce.install(Enforcer(roles, TEST_NAMES))


# ---- pytest: each test fails on a denial; the run's summary ----------------------------------------------------

_accepted = 0  # denials up to this count were expected by the test that caused them
EXPECTED: dict[str, int] = {}  # per function, denials the check's own tests caused on purpose


@contextlib.contextmanager
def denials_expected() -> Iterator[list[dict[str, str]]]:
    """A test of the check itself: the denials inside the block are collected in the list it gives, not failures."""
    global _accepted
    mark = TALLY.denials
    found: list[dict[str, str]] = []
    try:
        yield found
    finally:
        found += TALLY.denied_after(mark)
        _accepted = TALLY.denials
        for denial in found:
            EXPECTED[denial["function"]] = EXPECTED.get(denial["function"], 0) + 1


@pytest.fixture(autouse=True)
def iam_enforced() -> Iterator[None]:
    """A request a function's role does not allow fails the test, even where the code catches the error."""
    mark = TALLY.denials
    yield
    denied = TALLY.denied_after(max(mark, _accepted))
    if denied:
        shown = "; ".join(f"{d['function']}: {d['operation']} needs {d['action']} on {d['resource']}" for d in denied[:5])
        pytest.fail(f"AccessDenied on AWS (the role in template.yaml does not allow it): {shown}", pytrace=False)


def configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller made the directory
        config._iam_dir = config.workerinput[_DIR_ENV]  # type: ignore[attr-defined]
    else:
        config._iam_dir = tempfile.mkdtemp(prefix="iam-tally-")  # type: ignore[attr-defined]


def configure_node(node: Any) -> None:
    node.workerinput[_DIR_ENV] = node.config._iam_dir


def session_finish(session: pytest.Session) -> None:
    directory = getattr(session.config, "_iam_dir", None)
    if directory:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        (Path(directory) / f"{worker}.json").write_text(json.dumps({"tally": TALLY.as_json(), "expected": EXPECTED}))


def summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Per function: requests checked, denials, and grants on the template's resources no request used."""
    directory = getattr(config, "_iam_dir", None)
    if not directory or hasattr(config, "workerinput"):
        return
    from local.iam.enforce import Tally

    total = Tally()
    expected: dict[str, int] = {}
    for path in sorted(Path(directory).glob("*.json")):
        written = json.loads(path.read_text())
        total.merge(written["tally"])
        for function, count in written["expected"].items():
            expected[function] = expected.get(function, 0) + count
    if not total.functions:
        return
    terminalreporter.write_sep("-", "IAM as AWS enforces it: requests checked per function (tests/iam_support.py)")
    try:
        from local.iam.grants import platform_calls

        granted = roles()
    except Exception as exc:  # noqa: BLE001 - the summary must not hide the run's own result
        terminalreporter.write_line(f"(grants unreadable: {exc})")
        return
    for function in sorted(granted):
        tally = total.functions.get(function)
        if tally is None:
            terminalreporter.write_line(f"{function}: no request checked")
            continue
        platform = platform_calls(stack(), function)
        unused = sorted((a, r) for a, r in granted[function] if r != "*" and (a, r) not in platform
                        and not any(a == ua and _covers(r, ur) for ua, ur in tally.used))
        terminalreporter.write_line(
            f"{function}: {tally.requests} requests checked ({tally.authorizations} authorizations), "
            f"{len(tally.denied)} denied ({expected.get(function, 0)} on purpose, by the check's own tests), "
            f"{tally.unmapped} on resources not of the stack; "
            f"granted, never used: {', '.join(f'{a} on {r}' for a, r in unused) or 'none'}")


def _covers(pattern: str, resource: str) -> bool:
    import fnmatch

    return fnmatch.fnmatchcase(resource, pattern)


__all__ += ["configure", "configure_node", "denials_expected", "iam_enforced", "install", "session_finish", "summary"]
