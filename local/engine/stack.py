"""The local stack: ``python -m local up`` keeps the engine running on one endpoint until Ctrl-C (or
``python -m local down``), with the template's resources under stable names, schedules, streams and TTL live,
the Lambda ``Invoke`` API (``local/engine/lambda_api.py``) and, with ``--persist DIR``, its state kept between runs
(``local/engine/persist.py``).

While it runs, ``.taskq/local-stack.json`` at the repository root tells clients (``taskq``, ``make invoke``)
where it is: ``stack_name``, ``endpoint_url``, ``region``, ``pid``, ``started_at``, ``persist_dir``, ``outputs``
(every Outputs key of the template, with its local value) and ``parameters``. It is removed on a clean stop.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from local.delivery.sandbox import Invocation
from local.emulator.server import Emulator
from local.engine.engine import REPO, Engine
from local.engine.lambda_api import PREFIX, LambdaApi
from local.engine.persist import StateDir
from local.template.template import DEFAULT_STACK, REGION

DEFAULT_PORT = 4590
DISCOVERY = REPO / ".taskq" / "local-stack.json"
DISCOVERY_ENV = "TASKQ_LOCAL_STACK_FILE"  # names another discovery file (as taskq reads it)
FUNCTION_LOG = REPO / ".taskq" / "local-stack.functions.log"
SAVE_EVERY_SECONDS = 30.0


class StackError(RuntimeError):
    """The stack cannot start or stop as asked; the message says why and what to do."""


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def discovery_path() -> Path:
    """``$TASKQ_LOCAL_STACK_FILE`` if set, else ``.taskq/local-stack.json`` at the repository root."""
    return Path(os.environ.get(DISCOVERY_ENV) or DISCOVERY)


def read_discovery(path: Path | None = None) -> dict[str, Any] | None:
    """The running stack's discovery record, or None if none runs (a record left by a dead process is ignored)."""
    try:
        record = json.loads((path or discovery_path()).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) and pid_alive(int(record.get("pid", 0))) else None


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is no obstacle
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class LocalStack:
    def __init__(self, template: str | Path, overrides: dict[str, Any], *, port: int = DEFAULT_PORT,
                 persist_dir: str | Path | None = None, faults: Any = None, discovery: Path | None = None,
                 save_every: float = SAVE_EVERY_SECONDS) -> None:
        self.port = port
        self.discovery = discovery or discovery_path()
        self.save_every = save_every
        self.state = StateDir(persist_dir) if persist_dir else None
        self.api = LambdaApi()
        # The functions' logs go beside the discovery file (a test's stack keeps its files in its own directory).
        self.function_log = self.discovery.parent / FUNCTION_LOG.name
        self.function_log.parent.mkdir(parents=True, exist_ok=True)
        self.engine = Engine(template, overrides, emulator=Emulator(port=port, forward={PREFIX: self.api.url}, detached=True),
                             seeder=self.state, faults=faults, log_file=self.function_log, stack=DEFAULT_STACK)
        self._stopping = threading.Event()

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        running = read_discovery(self.discovery)
        if running:
            raise StackError(f"a local stack already runs (pid {running['pid']}, {running['endpoint_url']}): "
                             "use it, or stop it first with `make down` (python -m local down)")
        if not _port_free(self.port):
            raise StackError(f"port {self.port} on 127.0.0.1 is in use: stop what holds it, or choose another with --port N")
        self.api.start()
        self.engine.listeners.append(self._print_invocation)
        self.engine.start()
        self.api.engine = self.engine
        self._write_discovery()

    def _tables(self) -> dict[str, str]:
        return {logical: self.engine.template.resolver.refs[logical] for logical in self.engine.template.of_type("AWS::DynamoDB::Table")}

    def _queues(self) -> dict[str, str]:
        return {logical: self.engine.template.resolver.refs[logical] for logical in self.engine.template.of_type("AWS::SQS::Queue")}

    def discovery_record(self) -> dict[str, Any]:
        return {
            "stack_name": self.engine.stack,
            "endpoint_url": self.endpoint_url,
            "region": REGION,
            "pid": os.getpid(),
            "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "persist_dir": str(self.state.path) if self.state else None,
            "outputs": self.engine.template.outputs(),
            "parameters": dict(self.engine.template.parameters),
        }

    def _write_discovery(self) -> None:
        self.discovery.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.discovery.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.discovery_record(), indent=2) + "\n")
        os.replace(tmp, self.discovery)

    def _print_invocation(self, function: str, source: str, event: Any, inv: Invocation) -> None:
        outcome = "ok" if inv.ok else f"error {(inv.error or {}).get('errorType')}"
        print(f"{time.strftime('%H:%M:%S')} {function} ({source}) {outcome} {inv.duration * 1000:.0f} ms "
              f"request {inv.request_id}", flush=True)

    def save(self, queues: bool) -> None:
        if not self.state:
            return
        tables = self.state.save_tables(self.engine.ddb, self._tables())
        saved = dict(tables)
        if queues:
            saved.update(self.state.save_queues(self.engine.sqs, self._queues()))
        if queues:
            print(f"Saved to {self.state.path}: " + ", ".join(f"{k} {v}" for k, v in saved.items()), flush=True)

    def run_until_stopped(self) -> None:
        """Wait for SIGINT / SIGTERM, saving the tables every ``save_every`` seconds meanwhile."""
        def request_stop(signum: int, frame: Any) -> None:
            self._stopping.set()

        previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            while not self._stopping.wait(self.save_every):
                try:
                    self.save(queues=False)
                except Exception as exc:  # noqa: BLE001 - a failed periodic save is retried at the next one and at stop
                    print(f"periodic save failed: {exc}", file=sys.stderr, flush=True)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def stop(self) -> None:
        self.engine.stop_schedules()
        try:
            self.save(queues=True)
        finally:
            record = read_discovery(self.discovery)
            if record is None or record.get("pid") == os.getpid():
                self.discovery.unlink(missing_ok=True)
            self.api.stop()
            self.engine.stop()


def up(template: str | Path, overrides: dict[str, Any], port: int, persist_dir: str | None, faults: Any = None,
       discovery: Path | None = None) -> int:
    stack = LocalStack(template, overrides, port=port, persist_dir=persist_dir, faults=faults, discovery=discovery)
    try:
        stack.start()
    except StackError as exc:
        print(f"up: {exc}", file=sys.stderr)
        stack.api.stop()
        stack.engine.stop()
        return 2
    restored = stack.state.restored if stack.state else {}
    outputs = stack.engine.template.outputs()
    print(f"Local stack {stack.engine.stack} up at {stack.endpoint_url} (region {REGION}, any credentials)")
    print(f"  functions: {', '.join(f'{k} = {v.name}' for k, v in stack.engine.functions.items())}")
    for key in ("QueueTableName", "AgentTableName", "FailedEventsQueueUrl"):
        if key in outputs:
            print(f"  {key}: {outputs[key]}")
    if stack.state:
        print(f"  state: {stack.state.path} (restored: {', '.join(f'{k} {v}' for k, v in restored.items()) or 'nothing'})")
    print(f"  discovery: {stack.discovery}; function logs: {stack.function_log}")
    print("  try: make invoke FN=CreateTasksFunction EVENT=events/create_tasks-direct.json  |  Ctrl-C or `make down` stops it",
          flush=True)
    try:
        stack.run_until_stopped()
    finally:
        print("Stopping the local stack...", flush=True)
        stack.stop()
    print("Stopped.")
    return 0


def down(timeout: float = 60.0) -> int:
    """Stop the running stack (SIGTERM to its process, which saves its state and removes the discovery file)."""
    path = discovery_path()
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        print(f"down: no local stack is running (no {path})")
        return 0
    pid = int(record.get("pid", 0))
    if not pid_alive(pid):
        path.unlink(missing_ok=True)
        print(f"down: the stack's process {pid} is gone; removed the stale {path}")
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid) and not path.exists():
            print(f"down: stopped the local stack (pid {pid})")
            return 0
        time.sleep(0.2)
    print(f"down: the stack (pid {pid}) did not stop within {timeout:.0f} s; `kill {pid}` it", file=sys.stderr)
    return 1
