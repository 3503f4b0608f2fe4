"""moto's server on 127.0.0.1 with ONE global lock around the WSGI app, for tests and benchmarks of concurrency.

moto's conditional writes and transactions are not atomic under concurrent requests; served one request at a
time they are, like DynamoDB's. Optionally records the body of every TransactWriteItems that committed, in
commit order (the order the lock let them through), so a test can replay what happened.
"""

from __future__ import annotations

import io
import json
import threading
from typing import Any

import boto3
from botocore.config import Config


class SerializedMoto:
    def __init__(self, record_transactions: bool = False, fast_transactions: bool = True) -> None:
        from moto.server import DomainDispatcherApplication, create_backend_app

        self._unpatch = _patch_transactions() if fast_transactions else None
        from werkzeug.serving import WSGIRequestHandler, make_server

        class QuietHandler(WSGIRequestHandler):
            def log_request(self, *args: Any, **kwargs: Any) -> None:
                pass

        app = DomainDispatcherApplication(create_backend_app)
        lock = threading.Lock()
        self.commits: list[dict[str, Any]] = []
        self.requests = 0
        self.cancelled = 0  # TransactWriteItems refused (recorded only with record_transactions)

        def serialized(environ: dict[str, Any], start_response: Any) -> list[bytes]:
            with lock:
                self.requests += 1
                target = environ.get("HTTP_X_AMZ_TARGET", "")
                if not (record_transactions and target.endswith(".TransactWriteItems")):
                    return list(app(environ, start_response))  # consumed inside the lock
                body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
                environ["wsgi.input"] = io.BytesIO(body)
                statuses: list[str] = []

                def remember(status: str, headers: Any, exc_info: Any = None) -> Any:
                    statuses.append(status)
                    return start_response(status, headers, exc_info)

                response = list(app(environ, remember))
                if statuses and statuses[0].startswith("200"):
                    self.commits.append(json.loads(body))
                else:
                    self.cancelled += 1
                return response

        self._server = make_server("127.0.0.1", 0, serialized, threaded=True, request_handler=QuietHandler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="serialized-moto", daemon=True)
        self._thread.start()

    def client(self, service: str = "dynamodb") -> Any:
        """A new client (one per thread: boto3 clients are thread-safe, but each matcher gets its own)."""
        return boto3.client(
            service,
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(retries={"mode": "standard", "max_attempts": 6}, max_pool_connections=4),
        )

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        if self._unpatch is not None:
            self._unpatch()
            self._unpatch = None

    def __enter__(self) -> SerializedMoto:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _patch_transactions() -> Any:
    """Make moto's TransactWriteItems cost what its items cost, not what the whole table costs.

    moto 5.2.5 deep-copies every table a transaction touches (with its stream records) before applying it, to
    roll back if an item's condition fails: a few hundred items make each transaction take 0.1-1 s. Here every
    condition is checked first against the current items (they are independent: one transaction may touch an
    item only once), a failing one cancels the transaction with moto's own exception and reasons before
    anything is written, and only a transaction whose conditions all hold is applied, without the table copy.
    Under the global request lock nothing can change between the check and the writes. Returns the undo.
    """
    from moto.dynamodb import models
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import TransactionCanceledException
    from moto.dynamodb.models.table import Table

    original = models.DynamoDBBackend.transact_write_items
    real_copy = models.copy

    class _KeepTables:
        """copy as moto's module sees it during an applied transaction: tables are not copied."""

        @staticmethod
        def deepcopy(value: Any, memo: Any = None) -> Any:
            return value if isinstance(value, Table) else real_copy.deepcopy(value, memo)

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        if len(transact_items) > 100:
            return original(self, transact_items)
        reasons: list[tuple[Any, Any, Any]] = []
        for entry in transact_items:
            op_type, op = next(iter(entry.items()))
            table = self.get_table(op["TableName"])
            if op_type == "Put":
                key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = op["Item"][table.range_key_attr]
            else:
                key = op["Key"]
            condition = op.get("ConditionExpression")
            if condition is not None:
                check = get_filter_expression(condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues"))
                if not check.expr(self.get_item(op["TableName"], key)):
                    reasons.append(("ConditionalCheckFailed", "The conditional request failed", None))
                    continue
            reasons.append((None, None, None))
        if any(code is not None for code, _, _ in reasons):
            raise TransactionCanceledException(reasons)
        models.copy = _KeepTables  # type: ignore[assignment]
        try:
            return original(self, transact_items)
        finally:
            models.copy = real_copy

    models.DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]

    def undo() -> None:
        models.DynamoDBBackend.transact_write_items = original  # type: ignore[method-assign]

    return undo
