"""The embedded AWS emulator: moto's server app behind one global request lock, on 127.0.0.1.

The one serialized moto server of the project: the local engine (``make demo``, the e2e tests), the
matcher concurrency test (``tests/serialized_moto.py``) and the matcher benchmark all run on it.

- **One request at a time.** moto's conditional writes and transactions are not atomic under concurrent
  requests (the plain server double-claims: 508-520 wins for 500 items); serializing every request makes
  them so, as in DynamoDB (measured: docs/local-engine.md, "How it works").
- **Transactions cost what their items cost** (``patch_transactions`` in ``moto_patches.py``, on by default): moto 5.2.5
  deep-copies every table a TransactWriteItems touches, with all of its accumulated stream records, before
  applying it (to roll back if a condition fails). After a few hundred writes each transaction takes 1-2 s
  and long runs become quadratic. The patch checks every condition first, under the lock, and writes only
  a transaction whose conditions all hold, keeping a copy of just the items it touches for a rollback.
- **Commit log** (``record_transactions=True``): the body of every TransactWriteItems that committed, in
  commit order (the order the lock let them through), so a test can replay what happened
  (``tests/matcher_load.py``). Read through ``Emulator.commits``; ``requests`` and ``cancelled`` count
  requests and refused transactions.

- **Faults** (``faults=``, ``local/faults/faults.py``): between the lock and moto, the fault chain
  (``local/faults/chain.py``) can refuse a share of DynamoDB requests and SNS publishes, answer GSI queries
  from the past (index lag) and enforce DynamoDB's 400 KB item-size limit; ``fault_report()`` /
  ``set_faults()`` read and replace the setting while the server runs. Clients made with
  ``client(..., faults=False)`` (``X-Local-Faults: off``) are never faulted.
- **Changes** (``local/emulator/changes.py``): requests that can give the engine's pollers something (item writes,
  SNS and SQS sends, scheduler writes) are counted per kind; ``GET /_local/changes?items=N&timeout=S`` waits,
  outside the lock, until a kind passes the count given, so an idle stack's pollers ask nothing.

It runs as its own process (its own GIL, so the threads that drive it do not slow it down):
``python -m local.emulator.server [--port N] [--record-transactions] [--no-fast-transactions] [--faults JSON]
[--forward PREFIX=URL] [--parent-pid PID]`` prints ``PORT <n>`` once it listens. The control paths under
``/_local/`` (stats, commit log) bypass the lock; ``--forward`` sends a path prefix to another server, ahead of
the lock (``local/emulator/forward.py``: the local stack's Lambda API); ``--parent-pid`` exits when that process is gone.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any, Self

from local.emulator.changes import KINDS, Changes, change_kind
from local.emulator.warm_start import ForkedEmulator
from local.emulator.warm_start import start as start_forked

CONTROL = "/_local/"


class SerializedApp:
    """A WSGI wrapper that lets one request at a time into the wrapped app (body fully built inside), and
    optionally records the body of every committed TransactWriteItems."""

    def __init__(self, app: Any, record_transactions: bool = False, faults: Any = None) -> None:
        self._app = app
        self.faults = faults  # the fault chain (local/faults/chain.py) inside ``app``, for /_local/faults
        self._lock = threading.Lock()
        self.record_transactions = record_transactions
        self.commits: list[dict[str, Any]] = []
        self.requests = 0
        self.cancelled = 0  # TransactWriteItems refused (a condition failed, a conflict, a bad request)
        self.changes = Changes()  # for the engine's pollers: GET /_local/changes

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        if environ.get("PATH_INFO", "").startswith(CONTROL):
            return self._control(environ, start_response)
        kind = change_kind(environ)
        try:
            return self._serialized(environ, start_response)
        finally:
            if kind is not None:  # after the request is applied: a poller woken by it sees what it did
                self.changes.note(kind)

    def _serialized(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        with self._lock:
            self.requests += 1
            if not environ.get("HTTP_X_AMZ_TARGET", "").endswith(".TransactWriteItems"):
                return list(self._app(environ, start_response))  # consumed inside the lock
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(body)
            statuses: list[str] = []

            def remember(status: str, headers: Any, exc_info: Any = None) -> Any:
                statuses.append(status)
                return start_response(status, headers, exc_info)

            response = list(self._app(environ, remember))
            if statuses and statuses[0].startswith("200"):
                if self.record_transactions:
                    self.commits.append(json.loads(body))
            else:
                self.cancelled += 1
            return response

    def _control(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        path = environ["PATH_INFO"][len(CONTROL):]
        if path == "changes":  # a long wait: outside the request lock
            query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
            try:
                seen = {kind: int(query[kind][0]) for kind in KINDS if kind in query}
                timeout = min(float(query.get("timeout", ["0"])[0]), 60.0)
            except ValueError:
                start_response("400 Bad Request", [("Content-Type", "application/json")])
                return [b'{"error": "changes: give each kind seen as an integer and timeout in seconds"}']
            start_response("200 OK", [("Content-Type", "application/json")])
            return [json.dumps(self.changes.wait_past(seen, timeout)).encode()]
        with self._lock:
            if path == "stats":
                answer: Any = {"requests": self.requests, "cancelled": self.cancelled, "commits": len(self.commits),
                               "recording": self.record_transactions}
            elif path == "commits":
                answer = list(self.commits)
            elif path == "commits/clear" and environ.get("REQUEST_METHOD") == "POST":
                self.commits.clear()
                answer = {"cleared": True}
            elif path == "faults" and self.faults is not None:
                if environ.get("REQUEST_METHOD") == "POST":
                    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
                    try:
                        self.faults.configure(json.loads(body or b"{}"))
                    except ValueError as exc:
                        start_response("400 Bad Request", [("Content-Type", "application/json")])
                        return [json.dumps({"error": str(exc)}).encode()]
                answer = self.faults.report()
            else:
                start_response("404 Not Found", [("Content-Type", "application/json")])
                return [b'{"error": "unknown control path"}']
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(answer).encode()]


def serve(host: str = "127.0.0.1", port: int = 0, *, record_transactions: bool = False,
          fast_transactions: bool = True, faults: dict[str, Any] | None = None,
          forward: dict[str, str] | None = None, parent_pid: int | None = None,
          announce: Callable[[int], None] | None = None) -> None:
    """``faults``: a ``local.faults.faults.Faults.server_config()`` (the fault chain is there even when it is empty, so
    the setting can be given later through ``POST /_local/faults``). ``forward``: path prefix -> URL of the server
    that answers it. ``parent_pid``: exit when that process is gone (the stack died without stopping us).
    ``announce``: told the port once the server listens (else ``PORT <port>`` on stdout)."""
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    from local.emulator.index_reads import patch_index_reads
    from local.emulator.item_responses import patch_item_responses
    from local.emulator.moto_patches import (
        patch_comparisons,
        patch_dispatch_lookups,
        patch_sns_signing_key,
        patch_stream_records,
        patch_transactions,
    )
    from local.faults.chain import FaultyApp

    if fast_transactions:
        patch_transactions()
        patch_comparisons()
        patch_index_reads()
        patch_stream_records()
        patch_sns_signing_key()
        patch_dispatch_lookups()
        patch_item_responses()
    try:
        from moto.moto_server.threaded_moto_server import MotoRequestHandler as handler
    except ImportError:  # pragma: no cover
        handler = None
    faulty = FaultyApp(DomainDispatcherApplication(create_backend_app), faults)
    app: Any = SerializedApp(faulty, record_transactions=record_transactions, faults=faulty)
    for prefix, url in (forward or {}).items():
        from local.emulator.forward import Forwarding

        app = Forwarding(app, prefix, url)
    if parent_pid:
        threading.Thread(target=_exit_with_parent, args=(parent_pid,), daemon=True).start()
    kwargs = {"request_handler": handler} if handler else {}
    # werkzeug logs every request line to stderr, which Emulator.start discards: 15-20 % of the server's CPU for a
    # small request (measured with one client), under the one request lock. Warnings and errors are still logged.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = make_server(host, port, app, threaded=True, **kwargs)
    if announce is not None:
        announce(server.server_address[1])
    else:
        print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


def _exit_with_parent(pid: int) -> None:
    while True:
        time.sleep(1.0)
        if os.getppid() != pid:
            os._exit(0)


class Emulator:
    """A serialized moto server in a child process; ``url`` is its endpoint.

    ``record_transactions`` keeps the commit log (``commits``); ``fast_transactions=False`` leaves moto's
    transaction handling as it is (slow, see ``patch_transactions``). ``port``: a fixed port (0: any free one).
    ``forward``: path prefix -> URL answered by another server (the local stack's Lambda API). ``detached``: the
    child runs in its own session, so a Ctrl-C at the terminal reaches only the parent, which still needs the
    emulator to save its state; it exits by itself if the parent dies. Otherwise the emulator is forked from a
    process that has imported moto once (``warm_start.py``). Usable as a context manager.
    """

    def __init__(self, *, record_transactions: bool = False, fast_transactions: bool = True,
                 faults: Any = None, port: int = 0, forward: dict[str, str] | None = None,
                 detached: bool = False) -> None:
        self.record_transactions = record_transactions
        self.fast_transactions = fast_transactions
        self.initial_faults = faults  # a local.faults.faults.Faults, or its server_config() dict, or None
        self.port = port
        self.forward = dict(forward or {})
        self.detached = detached
        self.proc: ForkedEmulator | subprocess.Popen[str] | None = None  # Popen: the detached one
        self.url = ""

    def start(self, timeout: float = 30.0) -> str:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository's
        if not self.detached:  # forked from a warm process (warm_start.py); the same server, 0.5 s less CPU
            faults = _server_config(self.initial_faults) if self.initial_faults is not None else None
            options = {"port": self.port, "record_transactions": self.record_transactions,
                       "fast_transactions": self.fast_transactions, "faults": faults, "forward": self.forward}
            self.proc, port = start_forked(serve, options, root, env, timeout)
            return self._answering(f"http://127.0.0.1:{port}", time.monotonic() + timeout)
        command = [sys.executable, "-m", "local.emulator.server"]
        if self.record_transactions:
            command.append("--record-transactions")
        if not self.fast_transactions:
            command.append("--no-fast-transactions")
        if self.initial_faults is not None:
            command += ["--faults", json.dumps(_server_config(self.initial_faults))]
        if self.port:
            command += ["--port", str(self.port)]
        for prefix, url in self.forward.items():
            command += ["--forward", f"{prefix}={url}"]
        command += ["--parent-pid", str(os.getpid())]
        self.proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
            cwd=root,
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"the emulator did not start (said {line!r})")
        # Drain stdout so the child never blocks on a full pipe.
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        return self._answering(f"http://127.0.0.1:{int(line.split()[1])}", deadline)

    def _answering(self, url: str, deadline: float) -> str:
        self.url = url
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.url + CONTROL + "stats", timeout=2).read()
                return self.url
            except Exception:  # noqa: BLE001 - not listening yet: try again until the deadline
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("the emulator did not answer within the timeout")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def __enter__(self) -> Self:
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, service: str = "dynamodb", max_attempts: int = 6, pool: int = 4, *, faults: bool = True) -> Any:
        """A new boto3 client of the emulator (give each thread its own). ``faults=False``: its requests are never
        faulted (for checking what happened, and for the engine's own machinery)."""
        import boto3
        from botocore.config import Config

        client = boto3.client(service, endpoint_url=self.url, region_name="us-east-1", aws_access_key_id="testing",
                              aws_secret_access_key="testing",
                              config=Config(retries={"mode": "standard", "max_attempts": max_attempts},
                                            max_pool_connections=pool))
        if not faults:
            exempt_from_faults(client)
        return client

    # The control paths: counters and the commit log, read from the server process.

    def _control(self, path: str, method: str = "GET") -> Any:
        request = urllib.request.Request(self.url + CONTROL + path, method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    @property
    def commits(self) -> list[dict[str, Any]]:
        """Every committed TransactWriteItems body so far, in commit order (needs ``record_transactions``)."""
        if not self.record_transactions:
            raise RuntimeError("the emulator was started without record_transactions=True")
        return self._control("commits")

    def clear_commits(self) -> None:
        self._control("commits/clear", "POST")

    @property
    def requests(self) -> int:
        """AWS requests served so far (not counting the control paths)."""
        return int(self._control("stats")["requests"])

    @property
    def cancelled(self) -> int:
        """TransactWriteItems requests refused so far."""
        return int(self._control("stats")["cancelled"])

    def fault_report(self) -> dict[str, Any]:
        """The fault setting in force and its counters (local/faults/chain.py)."""
        return self._control("faults")

    def set_faults(self, faults: Any) -> dict[str, Any]:
        """Replace the fault setting (a ``local.faults.faults.Faults`` or its ``server_config()``); counters restart."""
        request = urllib.request.Request(self.url + CONTROL + "faults", method="POST",
                                         data=json.dumps(_server_config(faults)).encode())
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise ValueError(json.loads(exc.read()).get("error", str(exc))) from None


def _server_config(faults: Any) -> dict[str, Any]:
    return faults.server_config() if hasattr(faults, "server_config") else dict(faults or {})


def exempt_from_faults(client: Any) -> Any:
    """Mark every request of a boto3 client ``X-Local-Faults: off``: the emulator's faults leave it alone."""

    def add_header(request: Any, **_: Any) -> None:
        request.headers["X-Local-Faults"] = "off"

    client.meta.events.register("before-sign.*.*", add_header)
    return client


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m local.emulator.server", description=__doc__.splitlines()[0])
    parser.add_argument("port", nargs="?", type=int, default=0)
    parser.add_argument("--port", dest="port_option", type=int, default=None)
    parser.add_argument("--record-transactions", action="store_true")
    parser.add_argument("--no-fast-transactions", dest="fast_transactions", action="store_false")
    parser.add_argument("--faults", default=None, help="a Faults.server_config() as JSON (local/faults/faults.py)")
    parser.add_argument("--forward", action="append", default=[], metavar="PREFIX=URL",
                        help="send requests under PREFIX to the server at URL")
    parser.add_argument("--parent-pid", type=int, default=None, help="exit when this process is gone")
    args = parser.parse_args(argv)
    port = args.port_option if args.port_option is not None else args.port
    forward = dict(item.split("=", 1) for item in args.forward)
    serve(port=port, record_transactions=args.record_transactions, fast_transactions=args.fast_transactions,
          faults=json.loads(args.faults) if args.faults else None, forward=forward, parent_pid=args.parent_pid)


if __name__ == "__main__":
    main()
