from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from tests.dynamodb_local import worker_access_key  # noqa: E402 - imports only boto3 and the standard library

# Set before any boto3 client or Powertools object is made. Each pytest-xdist worker has its own access key id:
# its own database in the one DynamoDB Local (tests/dynamodb_local.py, worker_access_key).
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": worker_access_key(os.environ.get("PYTEST_XDIST_WORKER")),
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        # botocore 1.44 otherwise sends DynamoDB requests to an account-id endpoint that moto does not intercept.
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_SERVICE_NAME": "taskqueue",
        "POWERTOOLS_METRICS_NAMESPACE": "TaskQueues",
        "POWERTOOLS_DEV": "false",
    }
)

from aws_lambda_powertools import Metrics  # noqa: E402
from aws_lambda_powertools.metrics.provider import cold_start  # noqa: E402
from moto import mock_aws  # noqa: E402

from local.emulator.item_responses import patch_item_responses  # noqa: E402
from local.emulator.moto_patches import patch_dispatch_lookups, patch_sns_signing_key  # noqa: E402
from taskqueue.core.settings import Settings  # noqa: E402
from taskqueue.services import Services  # noqa: E402
from taskqueue.store import TaskStore  # noqa: E402
from taskqueue.wakeups.notify import Notifier  # noqa: E402
from tests import dynamodb_local, iam_support  # noqa: E402
from tests.iam_support import iam_enforced  # noqa: E402,F401 - autouse: a request a role does not allow fails the test
from tests.support import FakeClock, create_queue_table  # noqa: E402

TABLE = "test-queue-table"


def _serialize_in_process_moto() -> None:
    """One request at a time into in-process moto, as DynamoDB applies each request whole: moto is not thread-safe,
    and a worker's runner threads record outcomes while its loop queries (a query deep-copying an item another
    thread is updating failed with "dictionary changed size during iteration"). The serialized server
    (local/emulator/server.py) does the same for the tests that run processes against one emulator."""
    from moto.core.botocore_stubber import BotocoreStubber

    if getattr(BotocoreStubber, "_serialized", False):
        return
    lock = threading.RLock()
    unlocked = BotocoreStubber.process_request

    def process_request(self, request):  # type: ignore[no-untyped-def]
        with lock:
            return unlocked(self, request)

    BotocoreStubber.process_request = process_request  # type: ignore[method-assign]
    BotocoreStubber._serialized = True  # type: ignore[attr-defined]


_serialize_in_process_moto()
# IAM as AWS enforces it: every request a function's code makes is checked against its role (tests/iam_support.py).
iam_support.install()


def _share_botocore_loader() -> None:
    """One botocore data loader for every session of this process. Each new session (the CLI's connection, the
    client's discovery: tests make thousands) loaded botocore's endpoint and service files again, 58 of the 88 ms
    a session and client take; a loader only caches read-only files, so sharing it changes nothing else."""
    import botocore.loaders
    import botocore.session

    if getattr(botocore.session, "_shared_loader", False):
        return
    make_loader = botocore.loaders.create_loader
    botocore.session.create_loader = functools.cache(lambda search_path_string=None: make_loader(search_path_string))
    botocore.session._shared_loader = True  # type: ignore[attr-defined]


_share_botocore_loader()
# In-process moto signs each SNS message it puts on a subscribed queue with a key of the subscription's own, made
# at its first message (50-100 ms): every test's probe subscriptions (Topics) made two. One key, as the emulator.
patch_sns_signing_key()
# moto's generic serializer was a quarter of in-process moto's time (py-spy over tests/integration): DynamoDB's item
# answers are written directly, byte for byte the same (tests/unit/test_local_item_responses.py), as in the emulator.
UNDO_ITEM_RESPONSES = patch_item_responses()  # its undo: for the test that compares with moto's own serializer
# Each request listed its handler's methods to find its action (1.4 % of tests/integration). Its undo: for the test.
UNDO_DISPATCH_LOOKUPS = patch_dispatch_lookups()
# moto resets boto3's default session at each mock_aws by default, so every test reloaded botocore's service
# models (about 50 ms a client): kept across tests. Credentials and endpoints are still read from the environment.
# Nor does it put its own credentials in the environment: a client keeps the worker's access key id (the session
# remembers the first credentials it finds, and DynamoDB Local keeps one database per key).
MOTO_CONFIG = {"core": {"reset_boto3_session": False, "mock_credentials": False}}

# ---- the DynamoDB engine of a run: moto (default) or DynamoDB Local (docs/testing.md) ----------------

# Modules whose tests that reach AWS (through the `aws` fixture) also run on DynamoDB Local. A test elsewhere
# opts in with @pytest.mark.dynamodb_engines, or runs only there with @pytest.mark.dynamodb_local_only.
ENGINE_MODULES = {
    "tests/integration/test_store.py",
    "tests/integration/test_agents.py",
    "tests/integration/test_job_semantics.py",
    "tests/integration/test_operations.py",
    "tests/integration/test_process_tasks_handler.py",
    "tests/integration/test_create_tasks_handler.py",
    "tests/integration/test_trigger_handler.py",
    "tests/integration/test_matcher_handler.py",
    "tests/integration/test_cli.py",
    "tests/integration/test_agent_events_handler.py",
    "tests/integration/test_worker_faults.py",
    "tests/integration/test_aws_behaviour.py",
    "tests/integration/test_long_tasks.py",
    "tests/integration/test_client.py",
    "tests/integration/test_progress.py",
    "tests/integration/test_contact_center.py",
    "tests/integration/test_matcher_under_aws_rules.py",
}
# Tests of those modules (or whole modules) that rely on moto itself: shown as skipped, with the reason, on
# DynamoDB Local. A new test says so with @pytest.mark.moto_only(reason="...").
MOTO_ONLY = {
    "tests/integration/test_matcher_concurrency.py": (
        "runs on the serialized moto server (local/emulator/server.py) and replays its commit log, which DynamoDB Local "
        "does not have; the claim race on DynamoDB Local is tests/integration/test_dynamodb_local_concurrency.py"
    ),
}
LOCAL_ONLY_REASON = (
    "DynamoDB Local only: `make test` runs it (scripts/with-dynamodb-local .venv/bin/python -m pytest "
    "--dynamodb=local; docs/testing.md)"
)


# ---- parallel runs (pytest-xdist: `make test` runs -n TEST_WORKERS --dist loadgroup; docs/testing.md) ----------

# Tests that take seconds each: started first in a parallel run, so that no long one is left running alone at the
# end, and left out of `make test-fast`. Elsewhere a test says so with @pytest.mark.slow.
SLOW_PATHS = (
    "tests/e2e/",
    "tests/fuzz/",
    "tests/reliability/",
    "tests/integration/test_matcher_concurrency.py",
    "tests/board/test_browser.py",
    "tests/build/",
)
# Tests whose outcome depends on getting the CPU on time (engines on scaled real time, leases and claim windows of
# a few seconds): they run one at a time, all on one worker (the xdist group "realtime"), while the other workers
# run the rest. Elsewhere a test says so with @pytest.mark.realtime.
REALTIME_PATHS = ("tests/e2e/", "tests/reliability/test_sns_failures.py",
                  # Planner leases of 5 s: a starved Matcher's lease lapses mid-pass and a second one plans beside it.
                  "tests/reliability/test_matcher_conflicts.py")
# The realtime tests form two chains, each one test at a time on a worker of its own: most end-to-end tests (about half
# a core each on average: they mostly wait on scaled real time), and the others (the local stack's two modules, SNS
# failures, claim lanes, the watch's lease). One chain of all took 371 s, longer than the rest of the run; two take
# about 185 s each side by side. The first matching prefix names the chain; a realtime test under none of them
# (marked elsewhere) joins the second.
REALTIME_CHAINS = {"tests/e2e/test_local_stack": "realtime-2", "tests/e2e/": "realtime"}
SECOND_REALTIME_CHAIN = "realtime-2"
# Modules that take tens of seconds of one worker although they are not realtime: handed out right after the realtime
# chains, longest first (measured with --durations on 2026-11-27), so none of them starts late and runs alone at the
# end. Order only: it marks nothing (`make test-fast` still runs the ones not under SLOW_PATHS).
LONG_PATHS = (
    "tests/reliability/test_throttling.py",
    "tests/reliability/test_concurrent_workers.py",
    "tests/integration/test_dynamodb_local_concurrency.py",
    "tests/fuzz/test_fuzz_trigger.py",
    "tests/integration/test_fair_share.py",
    "tests/unit/test_local_index_reads_faults.py",
    "tests/unit/test_local_index_reads.py",
    "tests/board/test_browser.py",
    "tests/build/",
    "tests/integration/test_matcher_concurrency.py",
    "tests/unit/test_template_rules.py",
    "tests/fuzz/test_fuzz_workers.py",
    "tests/fuzz/test_fuzz_create_tasks.py",
    "tests/unit/test_template.py",
    "tests/unit/test_local_stream_records.py",
    "tests/integration/test_wakeup_interleavings.py",
    "tests/reliability/test_item_size.py",
    "tests/fuzz/test_fuzz_agent_events.py",
    "tests/unit/test_iam_least_privilege.py",
)
# While a parallel run's other tests run, they yield the CPU to the realtime ones: niceness 10 for the test and what
# it starts, back to 0 after it. Only where the process may lower its niceness again (root, as CI runs).
# TEST_NICENESS=0 turns it off (on a machine shared with other jobs, niced workers yield to those jobs too).
BACKGROUND_NICENESS = int(os.environ.get("TEST_NICENESS", "10"))
# Modules (or folders) whose tests share an expensive module- or session-scoped fixture (a local stack, a browser,
# a `sam build`): all on one worker, so it is made once (xdist group = the entry). Elsewhere:
# @pytest.mark.xdist_group("a name").
MODULE_GROUPS = ("tests/board/test_browser.py", "tests/build/")


def _parallel_marks(items: list[pytest.Item]) -> None:
    """Marks slow and realtime tests, groups the realtime ones, and puts them first: the realtime chains (each one long
    chain on one worker), then LONG_PATHS longest first, then the other slow tests, then the rest (a stable sort:
    modules stay together)."""
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if path.startswith(SLOW_PATHS) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
        if path.startswith(REALTIME_PATHS) and not item.get_closest_marker("realtime"):
            item.add_marker(pytest.mark.realtime)
        group = next((entry for entry in MODULE_GROUPS if path.startswith(entry)), None)
        if group and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(group))
        if item.get_closest_marker("realtime") and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(_realtime_chain(path)))
    items.sort(key=_hand_out_order)


def _realtime_chain(path: str) -> str:
    return next((name for entry, name in REALTIME_CHAINS.items() if path.startswith(entry)), SECOND_REALTIME_CHAIN)


def _hand_out_order(item: pytest.Item) -> tuple[int, int]:
    path = item.nodeid.split("::", 1)[0]
    if item.get_closest_marker("realtime"):
        return 0, 0 if _realtime_chain(path) == "realtime" else 1
    long = next((rank for rank, entry in enumerate(LONG_PATHS) if path.startswith(entry)), None)
    if long is not None:
        return 1, long
    return (2, 0) if item.get_closest_marker("slow") else (3, 0)


def _xdist_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """What pytest-xdist's worker does for --dist loadgroup (a test's group is the part of its id after "@"), done
    here: xdist 3.8.0 sets ``item._nodeid``, which pytest 9.2 no longer reads (it keeps a structured ``_id``), so
    every xdist_group mark was ignored (checked: two tests of one group ran on two workers)."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")})
        if names and item.nodeid.rfind("@") <= item.nodeid.rfind("]"):
            _set_nodeid(item, f"{item.nodeid}@{'_'.join(names)}")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """--dist loadgroup, handing out the work units (a module, or an xdist group) in the order the conftest sorted
    them (``_hand_out_order``), one unit ahead at most. pytest-xdist's own would re-sort the units by their number
    of tests (so a 2-test module of 80 s went out last and ran alone at the end) and give a worker whose unit has 2
    tests left another unit (so a long unit waited behind another long one while a worker was free)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class InOrder(LoadGroupScheduling):
        def schedule(self) -> None:
            self.config.option.loadscopereorder = False
            super().schedule()

        def _reschedule(self, node: Any) -> None:
            # The worker keeps its last test until it has more (pytest needs the next item to tear down): so a
            # new unit goes out when one test is left, not before.
            if not node.shutting_down and self.workqueue and self._pending_of(self.assigned_work[node]) > 1:
                return
            super()._reschedule(node)

    return InOrder(config, log)


def _set_nodeid(item: pytest.Item, nodeid: str) -> None:
    try:
        from _pytest.nodeid import coerce_node_id  # pytest >= 9.2
    except ImportError:  # pragma: no cover - older pytest reads _nodeid
        item._nodeid = nodeid
    else:
        item._id = coerce_node_id(nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """In a parallel run, a test that is not realtime runs at a lower priority (and so do the emulators and engines
    it starts): measured under load, realtime tests starved of the CPU by the other workers failed (the e2e overload
    test served 2 tasks instead of more than 10)."""
    if not (BACKGROUND_NICENESS and os.environ.get("PYTEST_XDIST_WORKER") and hasattr(os, "geteuid")
            and os.geteuid() == 0) \
            or item.get_closest_marker("realtime"):
        return (yield)
    os.setpriority(os.PRIO_PROCESS, 0, BACKGROUND_NICENESS)
    try:
        return (yield)
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, 0)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--dynamodb",
        choices=("moto", "local", "both"),
        default="moto",
        help="DynamoDB engine of this run: moto (default, every test), local (DynamoDB Local: only the tests "
        "marked dynamodb_engines or dynamodb_local_only) or both (every test on moto, and those again on DynamoDB "
        "Local, in one run: `make test`); local and both through scripts/with-dynamodb-local",
    )


def pytest_configure(config: pytest.Config) -> None:
    iam_support.configure(config)
    for line in (
        "dynamodb_engines: also runs on DynamoDB Local (pytest --dynamodb=local)",
        "dynamodb_local_only: runs only on DynamoDB Local (pytest --dynamodb=local)",
        "moto_only(reason): relies on moto's own behaviour; skipped on DynamoDB Local with the reason",
        "slow: takes seconds: runs first in a parallel run, left out of `make test-fast` (SLOW_PATHS)",
        "realtime: fails when starved of CPU (real-time waits): one at a time on one worker (REALTIME_PATHS)",
    ):
        config.addinivalue_line("markers", line)


def engine_of(config: pytest.Config) -> str:
    return config.getoption("dynamodb")


def _moto_only_reason(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("moto_only")
    if marker is not None:
        return marker.kwargs.get("reason") or (marker.args[0] if marker.args else "relies on moto")
    node = item.nodeid.split("[", 1)[0]
    return MOTO_ONLY.get(node) or MOTO_ONLY.get(node.split("::", 1)[0])


def _engines_of(definition: Any, fixturenames: Any) -> tuple[str, ...]:
    """The engines a test runs on when a run has both (``--dynamodb=both``)."""
    if definition.get_closest_marker("dynamodb_local_only"):
        return ("local",)
    if _moto_only_reason(definition):
        return ("moto",)
    module = definition.nodeid.split("::", 1)[0]
    if definition.get_closest_marker("dynamodb_engines") or (module in ENGINE_MODULES and "aws" in fixturenames):
        return ("moto", "local")
    return ("moto",)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """On a run of both engines, a test that reaches DynamoDB through ``dynamodb_engine`` (the ``aws`` fixture asks
    for it) and runs on DynamoDB Local becomes one test per engine: ``test_x[moto]`` and ``test_x[local]``."""
    if engine_of(metafunc.config) != "both" or "dynamodb_engine" not in metafunc.fixturenames:
        return
    engines = _engines_of(metafunc.definition, metafunc.fixturenames)
    if "local" in engines:
        metafunc.parametrize("dynamodb_engine", engines, indirect=True, scope="function")


def _engine_of_item(item: pytest.Item, run: str) -> str:
    if run != "both":
        return run
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "dynamodb_engine" in callspec.params:
        return str(callspec.params["dynamodb_engine"])
    # A DynamoDB Local test that finds the engine itself (tests/dynamodb_local.py), not through the fixture.
    return "local" if item.get_closest_marker("dynamodb_local_only") else "moto"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _parallel_marks(items)
    run = engine_of(config)
    selected, deselected = [], []
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        if module in ENGINE_MODULES and "aws" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.dynamodb_engines)
        moto_reason = _moto_only_reason(item)
        if run == "both":
            selected.append(item)
        elif run == "moto":
            if item.get_closest_marker("dynamodb_local_only"):
                item.add_marker(pytest.mark.skip(reason=LOCAL_ONLY_REASON))
            selected.append(item)
        elif moto_reason:
            item.add_marker(pytest.mark.skip(reason=f"moto only: {moto_reason}"))
            selected.append(item)
        elif item.get_closest_marker("dynamodb_engines") or item.get_closest_marker("dynamodb_local_only"):
            selected.append(item)
        else:
            deselected.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected
    reason = dynamodb_local.unavailable_reason()
    if reason and run != "moto":
        for item in items:
            if _engine_of_item(item, run) == "local":
                item.add_marker(pytest.mark.skip(reason=reason))
    _xdist_groups(config, items)


# What a test module holds when some of its tests run (or show as skipped) on a DynamoDB Local run: a mark, as
# written (``pytest.mark.dynamodb_engines`` on a test or as the module's ``pytestmark``).
ENGINE_MARKS = ("mark.dynamodb_engines", "mark.dynamodb_local_only", "mark.moto_only")


@functools.cache
def _engine_paths(tests_dir: str) -> frozenset[str]:
    """The test modules a DynamoDB Local run selects from (ENGINE_MODULES, MOTO_ONLY, modules naming a mark of
    ENGINE_MARKS) and the folders holding them."""
    root = os.path.dirname(tests_dir)
    paths: set[str] = set()
    for folder, _, files in os.walk(tests_dir):
        for name in files:
            if not (name.startswith("test_") and name.endswith(".py")):
                continue
            path = os.path.join(folder, name)
            module = os.path.relpath(path, root).replace(os.sep, "/")
            with open(path, encoding="utf-8") as source:
                text = source.read()
            if module in ENGINE_MODULES or module in MOTO_ONLY or any(mark in text for mark in ENGINE_MARKS):
                paths.add(path)
                while (path := os.path.dirname(path)) != root:
                    paths.add(path)
    return frozenset(paths)


def pytest_ignore_collect(collection_path: Any, config: pytest.Config) -> bool | None:
    """A DynamoDB Local run does not import the modules it would deselect whole (each xdist worker collecting all
    of them took about 4 s of CPU). pytest never asks this of a path given on the command line."""
    if engine_of(config) != "local":
        return None
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    path = str(collection_path)
    if not path.startswith(tests_dir + os.sep) or not (collection_path.is_dir() or path.endswith(".py")):
        return None
    if collection_path.is_file() and not collection_path.name.startswith("test_"):
        return None
    return None if path in _engine_paths(tests_dir) else True


def pytest_report_header(config: pytest.Config) -> str:
    return f"dynamodb engine: {_engine_line(config)}"


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    iam_support.summary(terminalreporter, config)
    terminalreporter.write_sep("-", f"DynamoDB engine of this run: {_engine_line(config)}")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: each worker writes its IAM tally where the controller reads them."""
    iam_support.configure_node(node)


def pytest_sessionfinish(session: pytest.Session) -> None:
    iam_support.session_finish(session)


def _engine_line(config: pytest.Config) -> str:
    run = engine_of(config)
    if run == "moto":
        return "moto (in process, mock_aws)"
    url = dynamodb_local.endpoint()
    local = f"DynamoDB Local at {url} (private network namespace)" if url else "DynamoDB Local: not available, tests skipped"
    return f"moto (in process, mock_aws), and for the engine tests [local] {local}" if run == "both" else local


@pytest.fixture
def dynamodb_engine(request: pytest.FixtureRequest) -> str:
    """'moto' or 'local': the DynamoDB engine of this test (on a run of both, each engine test runs on each)."""
    run = engine_of(request.config)
    return str(getattr(request, "param", "moto" if run == "both" else run))


@functools.cache
def _probe_clients() -> tuple[Any, Any]:
    """The probe's SNS and SQS clients, one pair per test process (8 ms a client, and most tests make the probe):
    moto answers every client while a test's mock runs, and no test changes these two."""
    return boto3.client("sns"), boto3.client("sqs")


class Topics:
    """The wake-up topic, with an SQS queue subscribed so tests can read what was published."""

    def __init__(self) -> None:
        self.sns, self.sqs = _probe_clients()
        self.wake_up_arn, self.wake_up_queue = self._topic("worker-wake-up-topic")

    def _topic(self, name: str) -> tuple[str, str]:
        arn = self.sns.create_topic(Name=name)["TopicArn"]
        url = self.sqs.create_queue(QueueName=f"{name}-probe")["QueueUrl"]
        queue_arn = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint=queue_arn)
        return arn, url

    def messages(self, url: str) -> list[dict[str, Any]]:
        """Every notification published so far (drains the probe queue)."""
        found: list[dict[str, Any]] = []
        while True:
            batch = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            if not batch:
                return found
            for message in batch:
                found.append(json.loads(message["Body"]))
                self.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    def wakeups(self) -> list[str]:
        """Queues named by the messages on WorkerWakeUpTopic."""
        return [m["MessageAttributes"]["queue"]["Value"] for m in self.messages(self.wake_up_queue)]

    def tail_calls(self) -> list[str]:
        """Queues named by the tail calls published (WorkerWakeUpTopic, reason tail-call)."""
        return [json.loads(m["Message"])["queue"] for m in self.messages(self.wake_up_queue)
                if json.loads(m["Message"]).get("reason") == "tail-call"]


@pytest.fixture
def aws(dynamodb_engine: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto for every AWS service; on a DynamoDB Local run, DynamoDB (and its streams) go to DynamoDB Local:
    every client made during the test reads its endpoint from the environment. This process's in-memory database
    (one per pytest-xdist worker) is emptied before and after each test, so tests never see each other's tables
    or items."""
    if dynamodb_engine != "local":
        with mock_aws(config=MOTO_CONFIG):
            yield
        return
    admin = dynamodb_local.client()
    for name in dynamodb_local.CLIENT_ENDPOINT_ENVS:
        monkeypatch.setenv(name, dynamodb_local.endpoint())
    dynamodb_local.delete_all_tables(admin)
    with mock_aws(config=MOTO_CONFIG):
        yield
        stray = dynamodb_local.moto_dynamodb_tables()
    dynamodb_local.delete_all_tables(admin)
    assert not stray, f"a DynamoDB request of this DynamoDB Local test went to moto instead: moto tables {stray}"


@pytest.fixture(autouse=True)
def warm_execution_environment() -> None:
    """Handlers run as in a warm execution environment: the ColdStart metric (Powertools flags the first
    invocation of a process) shows only where a test asks for a cold start, so metric totals do not depend
    on which test ran first."""
    cold_start.is_cold_start = False


@pytest.fixture(autouse=True)
def fresh_metrics() -> None:
    """Every test starts with Powertools' metric set empty. Every Metrics instance shares one set, which only a flush
    (a handler's log_metrics wrapper) empties: a handler a test drove without its wrapper (``handle``, not
    ``lambda_handler``) left its counts to whichever test flushed next (seen on DynamoDB Local: a ProcessTasks run's
    TasksShed 0 for queue work in a later test's Trigger invocation)."""
    Metrics().clear_metrics()


@pytest.fixture(autouse=True)
def fresh_queue_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts with no memory of the queue metrics a safety net published (taskqueue.observe.queue_metrics
    keeps when each queue last held tasks, per process): a test's busy queue would have a later test's idle one
    publish its trailing zeros."""
    from taskqueue.observe import queue_metrics

    monkeypatch.setattr(queue_metrics, "_published", queue_metrics.Published())


@pytest.fixture
def dynamodb(aws: None) -> Any:
    client = boto3.client("dynamodb")
    create_queue_table(client, TABLE)
    return client


@pytest.fixture
def topics(aws: None) -> Topics:
    return Topics()


@pytest.fixture
def clock(dynamodb_engine: str) -> FakeClock:
    # DynamoDB Local deletes expired items on the real clock: start a day ahead of it (see fake_clock_start_ms).
    return FakeClock(dynamodb_local.fake_clock_start_ms()) if dynamodb_engine == "local" else FakeClock()


def make_settings(topics: Topics | None = None, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "queue_table_name": TABLE,
        "worker_wake_up_topic_arn": topics.wake_up_arn if topics else None,
        "retry_base_seconds": 0.0,
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def settings(topics: Topics) -> Settings:
    return make_settings(topics)


@pytest.fixture
def store(dynamodb: Any, settings: Settings, clock: FakeClock) -> TaskStore:
    return TaskStore(dynamodb, settings, clock)


@pytest.fixture
def services(store: TaskStore, settings: Settings, clock: FakeClock) -> Services:
    return Services(settings, store, Notifier(boto3.client("sns"), settings), clock)
