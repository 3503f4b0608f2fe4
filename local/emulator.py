"""The embedded AWS emulator: moto's server app behind one global request lock, on 127.0.0.1.

The one serialized moto server of the project: the local engine (``make demo``, the e2e tests), the
matcher concurrency test (``tests/serialized_moto.py``) and the matcher benchmark all run on it.

- **One request at a time.** moto's conditional writes and transactions are not atomic under concurrent
  requests (the plain server double-claims: 508-520 wins for 500 items); serializing every request makes
  them so, as in DynamoDB (DESIGN.md, "The local engine").
- **Transactions cost what their items cost** (``patch_transactions``, on by default): moto 5.2.5
  deep-copies every table a TransactWriteItems touches, with all of its accumulated stream records, before
  applying it (to roll back if a condition fails). After a few hundred writes each transaction takes 1-2 s
  and long runs become quadratic. The patch checks every condition first, under the lock, and writes only
  a transaction whose conditions all hold, keeping a copy of just the items it touches for a rollback.
- **Commit log** (``record_transactions=True``): the body of every TransactWriteItems that committed, in
  commit order (the order the lock let them through), so a test can replay what happened
  (``tests/matcher_load.py``). Read through ``Emulator.commits``; ``requests`` and ``cancelled`` count
  requests and refused transactions.

- **Faults** (``faults=``, ``local/faults.py``): between the lock and moto, the fault chain
  (``local/fault_server.py``) can refuse a share of DynamoDB requests and SNS publishes, answer GSI queries
  from the past (index lag) and enforce DynamoDB's 400 KB item-size limit; ``fault_report()`` /
  ``set_faults()`` read and replace the setting while the server runs. Clients made with
  ``client(..., faults=False)`` (``X-Local-Faults: off``) are never faulted.

It runs as its own process (its own GIL, so the threads that drive it do not slow it down):
``python -m local.emulator [--port N] [--record-transactions] [--no-fast-transactions] [--faults JSON]`` prints
``PORT <n>`` once it listens. The control paths under ``/_local/`` (stats, commit log) bypass the lock.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Callable

CONTROL = "/_local/"


class SerializedApp:
    """A WSGI wrapper that lets one request at a time into the wrapped app (body fully built inside), and
    optionally records the body of every committed TransactWriteItems."""

    def __init__(self, app: Any, record_transactions: bool = False, faults: Any = None) -> None:
        self._app = app
        self.faults = faults  # the fault chain (local/fault_server.py) inside ``app``, for /_local/faults
        self._lock = threading.Lock()
        self.record_transactions = record_transactions
        self.commits: list[dict[str, Any]] = []
        self.requests = 0
        self.cancelled = 0  # TransactWriteItems refused (a condition failed, a conflict, a bad request)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        if environ.get("PATH_INFO", "").startswith(CONTROL):
            return self._control(environ, start_response)
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


def patch_transactions() -> Callable[[], None]:
    """Make moto's TransactWriteItems cost what its items cost, not what the whole table costs.

    Why: moto 5.2.5's ``transact_write_items`` deep-copies every table the transaction touches -- items,
    indexes and every stream record accumulated since the table was made -- so that it can roll back if an
    item's condition fails. A few hundred writes into a run, each transaction takes 1-2 s (the matcher's
    concurrency test and the call-center demo run thousands of them).

    What instead: under the global request lock nothing can change between a check and a write, so
    1. every item is checked first: one operation per entry, no item twice in one transaction (moto's
       ``MultipleTransactionsException``), and each ``ConditionExpression`` against the current item; a
       failing condition cancels the transaction with moto's own exception and reasons before anything is
       written;
    2. only a transaction whose conditions all hold is applied -- by moto's own code, with its table copy
       turned off -- after a copy of just the touched items and the length of each touched table's stream;
       should applying fail after all (an invalid update expression, say), those items are put back and
       the stream records written meanwhile dropped, as moto's table-level rollback would, and the error
       raised.
    Returns the undo (the server process never undoes it; in-process users may).
    """
    from moto.dynamodb import models
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import ConditionalCheckFailed, MultipleTransactionsException, \
        TransactionCanceledException
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    from local.wsgi_request import set_item

    original = models.DynamoDBBackend.transact_write_items
    real_copy = models.copy

    class _KeepTables:
        """``copy`` as moto's module sees it while a checked transaction is applied: tables are not copied."""

        @staticmethod
        def deepcopy(value: Any, memo: Any = None) -> Any:
            return value if isinstance(value, Table) else real_copy.deepcopy(value, memo)

    def key_of(table: Any, op_type: str, op: dict[str, Any]) -> dict[str, Any]:
        source = op["Item"] if op_type == "Put" else op["Key"]
        key = {table.hash_key_attr: source[table.hash_key_attr]}
        if table.range_key_attr is not None:
            key[table.range_key_attr] = source[table.range_key_attr]
        return key

    def dynamo_key(table: Any, key: dict[str, Any]) -> tuple[Any, Any]:
        hash_value = DynamoType(key[table.hash_key_attr])
        range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr is not None else None
        return hash_value, range_value

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        if len(transact_items) > 100 or any(len(entry) != 1 for entry in transact_items):
            return original(self, transact_items)  # moto's own errors for these
        reasons: list[tuple[Any, Any, Any]] = []
        seen: set[tuple[str, str]] = set()
        touched: list[tuple[Any, dict[str, Any]]] = []
        for entry in transact_items:
            op_type, op = next(iter(entry.items()))
            if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
                return original(self, transact_items)
            table = self.get_table(op["TableName"])
            try:
                key = key_of(table, op_type, op)
            except KeyError:
                return original(self, transact_items)  # a key attribute missing: moto's own reason
            unique = (str(op["TableName"]), str(dict(sorted(key.items()))))
            if unique in seen:
                raise MultipleTransactionsException()
            seen.add(unique)
            touched.append((table, key))
            condition = op.get("ConditionExpression")
            if condition is not None:
                current = self.get_item(op["TableName"], key)
                check = get_filter_expression(condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues"))
                if not check.expr(current):
                    old = None
                    if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current is not None:
                        old = current.to_json()["Attributes"]
                    reasons.append(("ConditionalCheckFailed", ConditionalCheckFailed().message, old))
                    continue
            reasons.append((None, None, None))
        if any(code is not None for code, _, _ in reasons):
            raise TransactionCanceledException(reasons)
        # Rollback data: the touched items as they are, and how long each touched stream is.
        saved = []
        for table, key in touched:
            hash_value, range_value = dynamo_key(table, key)
            saved.append((table, hash_value, range_value, real_copy.deepcopy(table.get_item(hash_value, range_value))))
        streams = {id(t): (t.stream_shard, len(t.stream_shard.items)) for t, _ in touched if t.stream_shard is not None}
        models.copy = _KeepTables  # type: ignore[assignment]
        try:
            return original(self, transact_items)
        except Exception:
            for table, hash_value, range_value, item in saved:
                set_item(table, (hash_value, range_value), item)
            for shard, length in streams.values():
                del shard.items[length:]
            raise
        finally:
            models.copy = real_copy

    models.DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]

    def undo() -> None:
        models.DynamoDBBackend.transact_write_items = original  # type: ignore[method-assign]

    return undo


def patch_comparisons() -> Callable[[], None]:
    """Make moto sort items by native values, and compare strings as strings, instead of casting both sides of
    every ``DynamoType`` comparison.

    Why: every Query of a global secondary index in moto 5.2.5 sorts the whole table (``Table.all_items``),
    compares each item's index key with the query's (``DynamoType.__ne__``) and sorts the matches
    (``Table.sorted_items``), each comparison casting both values: with 2,000 items a ReadyIndex query held the
    server's one lock ~40 ms, and a few workers polling the index saturated it. The same orders, by a key
    computed once per item (numbers as Decimal, strings as str -- the same order as DynamoDB's UTF-8 bytes --
    binaries as bytes), and string equality without the cast, cost a fraction of that. Returns the undo.
    """
    from decimal import Decimal, InvalidOperation

    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    original_all, original_sorted = Table.all_items, Table.sorted_items
    original_eq, original_ne = DynamoType.__eq__, DynamoType.__ne__

    def eq(self: Any, other: Any) -> bool:
        if self.type == "S" and getattr(other, "type", None) == "S":
            return bool(self.value == other.value)
        return bool(original_eq(self, other))

    def ne(self: Any, other: Any) -> bool:
        if self.type == "S" and getattr(other, "type", None) == "S":
            return bool(self.value != other.value)
        return bool(original_ne(self, other))

    def native(value: Any) -> tuple[Any, ...]:
        if value is None:
            return (0,)
        kind, raw = value.type, value.value
        if kind == "N":
            try:
                return (1, Decimal(raw))
            except InvalidOperation:
                return (5, str(raw))
        if kind == "S":
            return (2, raw)
        if kind == "B":
            return (3, raw if isinstance(raw, bytes) else str(raw).encode())
        return (4, str(raw))

    def all_items(self: Any) -> list[Any]:
        items: list[Any] = []
        for hash_set in self.items.values():
            if self.range_key_attr:
                items.extend(hash_set.values())
            else:
                items.append(hash_set)
        return sorted(items, key=lambda item: (native(item.hash_key), native(item.range_key)))

    def sorted_items(self: Any, hash_key_attrs: list[str], range_key_attrs: list[str | None], items: list[Any]) -> list[Any]:
        attrs = self._generate_attr_to_sort_by(hash_key_attrs, range_key_attrs)
        items.sort(key=lambda item: tuple(native(item.attrs.get(name)) for name in attrs))
        return items

    Table.all_items = all_items  # type: ignore[method-assign]
    Table.sorted_items = sorted_items  # type: ignore[method-assign]
    DynamoType.__eq__ = eq  # type: ignore[method-assign,assignment]
    DynamoType.__ne__ = ne  # type: ignore[method-assign,assignment]

    def undo() -> None:
        Table.all_items = original_all  # type: ignore[method-assign]
        Table.sorted_items = original_sorted  # type: ignore[method-assign]
        DynamoType.__eq__ = original_eq  # type: ignore[method-assign]
        DynamoType.__ne__ = original_ne  # type: ignore[method-assign]

    return undo


def serve(host: str = "127.0.0.1", port: int = 0, *, record_transactions: bool = False,
          fast_transactions: bool = True, faults: dict[str, Any] | None = None) -> None:
    """``faults``: a ``local.faults.Faults.server_config()`` (the fault chain is there even when it is empty, so
    the setting can be given later through ``POST /_local/faults``)."""
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    from local.fault_server import FaultyApp

    if fast_transactions:
        patch_transactions()
        patch_comparisons()
    try:
        from moto.moto_server.threaded_moto_server import MotoRequestHandler as handler
    except ImportError:  # pragma: no cover
        handler = None
    faulty = FaultyApp(DomainDispatcherApplication(create_backend_app), faults)
    app = SerializedApp(faulty, record_transactions=record_transactions, faults=faulty)
    kwargs = {"request_handler": handler} if handler else {}
    server = make_server(host, port, app, threaded=True, **kwargs)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


class Emulator:
    """A serialized moto server in a child process; ``url`` is its endpoint.

    ``record_transactions`` keeps the commit log (``commits``); ``fast_transactions=False`` leaves moto's
    transaction handling as it is (slow, see ``patch_transactions``). Usable as a context manager.
    """

    def __init__(self, *, record_transactions: bool = False, fast_transactions: bool = True,
                 faults: Any = None) -> None:
        self.record_transactions = record_transactions
        self.fast_transactions = fast_transactions
        self.initial_faults = faults  # a local.faults.Faults, or its server_config() dict, or None
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self, timeout: float = 30.0) -> str:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        command = [sys.executable, "-m", "local.emulator"]
        if self.record_transactions:
            command.append("--record-transactions")
        if not self.fast_transactions:
            command.append("--no-fast-transactions")
        if self.initial_faults is not None:
            command += ["--faults", json.dumps(_server_config(self.initial_faults))]
        self.proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"the emulator did not start (said {line!r})")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"
        # Drain stdout so the child never blocks on a full pipe.
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.url + CONTROL + "stats", timeout=2).read()
                return self.url
            except Exception:
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

    def __enter__(self) -> Emulator:
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
        """The fault setting in force and its counters (local/fault_server.py)."""
        return self._control("faults")

    def set_faults(self, faults: Any) -> dict[str, Any]:
        """Replace the fault setting (a ``local.faults.Faults`` or its ``server_config()``); counters restart."""
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
    parser = argparse.ArgumentParser(prog="python -m local.emulator", description=__doc__.splitlines()[0])
    parser.add_argument("port", nargs="?", type=int, default=0)
    parser.add_argument("--port", dest="port_option", type=int, default=None)
    parser.add_argument("--record-transactions", action="store_true")
    parser.add_argument("--no-fast-transactions", dest="fast_transactions", action="store_false")
    parser.add_argument("--faults", default=None, help="a Faults.server_config() as JSON (local/faults.py)")
    args = parser.parse_args(argv)
    port = args.port_option if args.port_option is not None else args.port
    serve(port=port, record_transactions=args.record_transactions, fast_transactions=args.fast_transactions,
          faults=json.loads(args.faults) if args.faults else None)


if __name__ == "__main__":
    main()
