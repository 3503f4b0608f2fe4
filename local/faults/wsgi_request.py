"""What the emulator's fault mechanisms need to know about one request, read once inside the request lock:
its service and operation, its body, the SDK's call id and attempt, and (for DynamoDB) the moto tables and
items it reads or writes. Runs in the emulator's server process only (it reaches into moto's backend)."""

from __future__ import annotations

import io
import json
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_CREDENTIAL = re.compile(r"Credential=[^/]+/\d+/([^/]+)/([^/]+)/aws4_request")
# Requests carrying this header (the engine's own clients, tests' checking clients) are never faulted.
EXEMPT_HEADER = "HTTP_X_LOCAL_FAULTS"
# DynamoDB operations that write items (their items are read before and after by the mechanisms).
WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})


@dataclass
class Request:
    environ: dict[str, Any]
    service: str  # "dynamodb", "dynamodbstreams", "sns", "sqs", ... ("" if unknown)
    operation: str
    region: str
    body: bytes
    exempt: bool
    invocation_id: str | None  # botocore's amz-sdk-invocation-id: the same for every attempt of one SDK call
    attempt: int | None
    max_attempts: int | None
    _json: Any = field(default=None, repr=False)

    @property
    def json(self) -> dict[str, Any]:
        if self._json is None:
            try:
                self._json = json.loads(self.body or b"{}")
            except ValueError:
                self._json = {}
        return self._json


def signed_scope(environ: dict[str, Any]) -> tuple[str, str] | None:
    """(region, service) of a SigV4-signed request's credential scope, from its Authorization header; None unsigned."""
    match = _CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", ""))
    return (match.group(1), match.group(2)) if match else None


def read_request(environ: dict[str, Any]) -> Request:
    """Reads the body (and puts it back for the app) and what the headers say."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    region, service = signed_scope(environ) or ("us-east-1", "")
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    operation = ""
    if target:
        prefix, _, operation = target.partition(".")
        if prefix.startswith("DynamoDBStreams"):
            service = "dynamodbstreams"
        elif prefix.startswith("DynamoDB"):
            service = "dynamodb"
    elif service in ("sns", "sqs") or body.startswith(b"Action="):
        form = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
        operation = (form.get("Action") or [""])[0]
    attempt = max_attempts = None
    for part in environ.get("HTTP_AMZ_SDK_REQUEST", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == "attempt" and value.isdigit():
            attempt = int(value)
        elif name == "max" and value.isdigit():
            max_attempts = int(value)
    return Request(environ, service, operation, region, body, environ.get(EXEMPT_HEADER, "").lower() == "off",
                   environ.get("HTTP_AMZ_SDK_INVOCATION_ID") or None, attempt, max_attempts)


@dataclass
class Response:
    status: str
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def ok(self) -> bool:
        return self.status.startswith("200")


def call_app(app: Callable[..., Any], environ: dict[str, Any]) -> Response:
    """Runs the wrapped app to the end and keeps its answer, so a mechanism can look at it (or replace it)."""
    captured: list[Any] = []

    def start_response(status: str, headers: Any, exc_info: Any = None) -> Callable[[bytes], None]:
        captured[:] = [status, list(headers)]
        return lambda data: None

    body = b"".join(app(environ, start_response))
    return Response(captured[0], captured[1], body)


def dynamodb_error(code: str, message: str, status: int = 400, **extra: Any) -> Response:
    body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": message, **extra}).encode()
    return Response(_status(status), [("Content-Type", "application/x-amz-json-1.0"),
                                      ("x-amzn-RequestId", "local-fault")], body)


def query_error(code: str, message: str, status: int = 400, namespace: str = "http://sns.amazonaws.com/doc/2010-03-31/") -> Response:
    """An error of a query-protocol service (SNS), as its XML says it."""
    kind = "Sender" if status < 500 else "Receiver"
    body = (f'<ErrorResponse xmlns="{namespace}"><Error><Type>{kind}</Type><Code>{code}</Code>'
            f"<Message>{_xml(message)}</Message></Error><RequestId>local-fault</RequestId></ErrorResponse>").encode()
    return Response(_status(status), [("Content-Type", "text/xml")], body)


def _status(code: int) -> str:
    return {400: "400 Bad Request", 500: "500 Internal Server Error", 503: "503 Service Unavailable"}.get(code, f"{code} Error")


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# --------------------------------------------------------------------------- moto's tables


def backend(request: Request) -> Any:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    return dynamodb_backends[DEFAULT_ACCOUNT_ID][request.region]


def table_of(dynamodb: Any, name: str) -> Any | None:
    return dynamodb.tables.get(name)


def key_of(table: Any, attributes: dict[str, Any]) -> dict[str, Any] | None:
    """The key attributes (DynamoDB JSON) of an item or key, or None if one is missing."""
    try:
        key = {table.hash_key_attr: attributes[table.hash_key_attr]}
        if table.range_key_attr is not None:
            key[table.range_key_attr] = attributes[table.range_key_attr]
    except (KeyError, TypeError):
        return None
    return key


def slot(table: Any, key: dict[str, Any]) -> tuple[Any, Any]:
    from moto.dynamodb.models.dynamo_type import DynamoType

    hash_value = DynamoType(key[table.hash_key_attr])
    range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr is not None else None
    return hash_value, range_value


def get_item(table: Any, where: tuple[Any, Any]) -> Any | None:
    hash_value, range_value = where
    if range_value is not None:
        return table.items.get(hash_value, {}).get(range_value)
    return table.items.get(hash_value)


def set_item(table: Any, where: tuple[Any, Any], item: Any | None) -> None:
    """Put ``item`` (a moto Item, or None for no item) in its place, with no stream record and no check."""
    hash_value, range_value = where
    if range_value is not None:
        if item is not None:
            table.items[hash_value][range_value] = item
        else:
            table.items.get(hash_value, {}).pop(range_value, None)
    elif item is not None:
        table.items[hash_value] = item
    else:
        table.items.pop(hash_value, None)


@dataclass(frozen=True)
class Write:
    table: str
    kind: str  # "Put", "Update", "Delete"
    key: dict[str, Any]
    item: dict[str, Any] | None  # the item a Put writes
    position: int = 0  # its place in the request (TransactItems index; 0 otherwise)


def writes_of(request: Request, dynamodb: Any) -> list[Write]:
    """The item writes a DynamoDB write request asks for (tables that do not exist are left out)."""
    body = request.json
    op = request.operation
    found: list[Write] = []

    def add(table_name: str, kind: str, source: dict[str, Any] | None, item: dict[str, Any] | None = None,
            position: int = 0) -> None:
        table = table_of(dynamodb, table_name) if isinstance(table_name, str) else None
        if table is None or not isinstance(source, dict):
            return
        key = key_of(table, source)
        if key is not None:
            found.append(Write(table_name, kind, key, item, position))

    if op == "PutItem":
        add(body.get("TableName"), "Put", body.get("Item"), body.get("Item"))
    elif op in ("UpdateItem", "DeleteItem"):
        add(body.get("TableName"), op[:-4], body.get("Key"))
    elif op == "BatchWriteItem":
        for table_name, requests in (body.get("RequestItems") or {}).items():
            for entry in requests or []:
                if "PutRequest" in entry:
                    item = (entry["PutRequest"] or {}).get("Item")
                    add(table_name, "Put", item, item)
                elif "DeleteRequest" in entry:
                    add(table_name, "Delete", (entry["DeleteRequest"] or {}).get("Key"))
    elif op == "TransactWriteItems":
        for position, entry in enumerate(body.get("TransactItems") or []):
            for kind in ("Put", "Update", "Delete"):
                if kind in entry:
                    op_body = entry[kind] or {}
                    source = op_body.get("Item") if kind == "Put" else op_body.get("Key")
                    add(op_body.get("TableName"), kind, source, op_body.get("Item") if kind == "Put" else None, position)
    return found
