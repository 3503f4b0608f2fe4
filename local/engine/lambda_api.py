"""The Lambda API of the local stack, as ``sam local start-lambda`` serves it: ``Invoke`` (RequestResponse,
Event, DryRun), plus ``GetFunction`` and ``ListFunctions`` so ``aws lambda`` can see what is there.

It listens on an internal port; the emulator forwards ``/2015-03-31/functions/`` to it (``local/emulator/forward.py``),
so clients use the stack's one endpoint. Functions are named by logical id, physical name, ARN, or
``name:$LATEST``. A synchronous invoke over the function's reserved concurrency is refused with HTTP 429
``TooManyRequestsException``, as Lambda refuses it; a function error is HTTP 200 with ``X-Amz-Function-Error``.
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from local.template.template import ACCOUNT, REGION

PREFIX = "/2015-03-31/functions"  # ListFunctions has no trailing slash
FULL_LOGS_HEADER = "X-Local-Full-Logs"  # not AWS: `python -m local invoke` asks for every log line, not the last 4 KB
TAIL_BYTES = 4096


def function_part(name: str) -> tuple[str, str | None]:
    """``arn:aws:lambda:r:a:function:NAME[:Q]`` / ``NAME[:Q]`` -> (NAME, Q)."""
    if name.startswith("arn:"):
        parts = name.split(":")
        return parts[6], parts[7] if len(parts) > 7 else None
    base, _, qualifier = name.partition(":")
    return base, qualifier or None


class LambdaApi:
    """Serves the engine's functions over HTTP. ``engine`` may be given after the server started (requests
    before that get 503): the emulator must know this server's URL before the engine can start."""

    def __init__(self, engine: Any = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.engine = engine
        api = self

        class Handler(_Handler):
            owner = api

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.url = f"http://{host}:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="lambda-api", daemon=True)

    def start(self) -> LambdaApi:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():  # shutdown() waits for serve_forever, which never ran otherwise
            self._server.shutdown()
        self._server.server_close()

    def configuration(self, logical: str) -> dict[str, Any]:
        spec = self.engine.functions[logical]
        return {"FunctionName": spec.name, "FunctionArn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{spec.name}",
                "Runtime": "python3.13", "Handler": spec.handler, "Timeout": int(spec.timeout), "MemorySize": spec.memory,
                "Version": "$LATEST", "Environment": {"Variables": dict(spec.environment)},
                "Description": f"{logical} (local engine)"}


class _Handler(BaseHTTPRequestHandler):
    owner: LambdaApi
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # the base class's signature
        pass  # the stack prints one line per invocation itself

    # ------------------------------------------------------------------ responses

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
              request_id: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-amzn-RequestId", request_id or str(uuid.uuid4()))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, code: str, message: str, **extra: str) -> None:
        body = json.dumps({"Type": "User", "message": message, **extra}).encode()
        self._send(status, body, {"x-amzn-ErrorType": code})

    def _logical(self, name: str) -> str | None:
        """The function's logical id, or None after answering 404 / 503."""
        engine = self.owner.engine
        if engine is None or not engine.functions:
            self._error(503, "ServiceException", "the local stack is still starting; retry in a moment")
            return None
        base, qualifier = function_part(unquote(name))
        query = parse_qs(urlsplit(self.path).query).get("Qualifier", [None])[0]
        qualifier = query or qualifier
        try:
            logical = str(engine.resolve_function(base))
        except KeyError:
            logical = None
        if logical is None or qualifier not in (None, "$LATEST"):
            self._error(404, "ResourceNotFoundException",
                        f"Function not found: arn:aws:lambda:{REGION}:{ACCOUNT}:function:{base}"
                        + (f":{qualifier} (only $LATEST exists locally)" if qualifier not in (None, "$LATEST") else "")
                        + f". Known: {', '.join(engine.functions)}")
            return None
        return logical

    # ------------------------------------------------------------------ routes

    def do_GET(self) -> None:  # http.server's naming
        path = urlsplit(self.path).path
        if not path.startswith(PREFIX):
            self._error(404, "ResourceNotFoundException", f"no route {path}")
            return
        name = path[len(PREFIX):].strip("/")  # "" for ListFunctions
        if not name:
            engine = self.owner.engine
            functions = [self.owner.configuration(logical) for logical in (engine.functions if engine else {})]
            self._send(200, json.dumps({"Functions": functions}).encode())
            return
        logical = self._logical(name)
        if logical is not None:
            self._send(200, json.dumps({"Configuration": self.owner.configuration(logical)}).encode())

    def do_POST(self) -> None:  # http.server's naming
        path = urlsplit(self.path).path
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not (path.startswith(PREFIX) and path.endswith("/invocations")):
            self._error(404, "ResourceNotFoundException", f"no route POST {path}: only Invoke is served locally")
            return
        logical = self._logical(path[len(PREFIX):-len("/invocations")].strip("/"))
        if logical is None:
            return
        kind = self.headers.get("X-Amz-Invocation-Type") or "RequestResponse"
        if kind not in ("RequestResponse", "Event", "DryRun"):
            self._error(400, "InvalidParameterValueException", f"X-Amz-Invocation-Type {kind!r}: use RequestResponse, Event or DryRun")
            return
        try:
            event = json.loads(body) if body.strip() else {}
        except json.JSONDecodeError as exc:
            self._error(400, "InvalidRequestContentException", f"Could not parse request body into json: {exc}")
            return
        engine = self.owner.engine
        if kind == "DryRun":
            self._send(204)
        elif kind == "Event":
            engine.invoke_async(logical, event)
            self._send(202, headers={"X-Amz-Executed-Version": "$LATEST"})
        else:
            self._request_response(logical, event)

    def _request_response(self, logical: str, event: Any) -> None:
        inv = self.owner.engine.invoke(logical, event)
        if inv.throttled:
            error = inv.error or {}
            self._error(429, "TooManyRequestsException", str(error.get("errorMessage", "Rate Exceeded.")),
                        Reason=str(error.get("reason", "ReservedFunctionConcurrentInvocationLimitExceeded")))
            return
        headers = {"X-Amz-Executed-Version": "$LATEST"}
        if self.headers.get(FULL_LOGS_HEADER):
            headers["X-Amz-Log-Result"] = base64.b64encode("\n".join(inv.logs).encode()).decode()
        elif self.headers.get("X-Amz-Log-Type") == "Tail":
            headers["X-Amz-Log-Result"] = base64.b64encode("\n".join(inv.logs).encode()[-TAIL_BYTES:]).decode()
        if inv.ok:
            self._send(200, json.dumps(inv.result).encode(), headers, inv.request_id)
        else:
            headers["X-Amz-Function-Error"] = "Unhandled"
            self._send(200, json.dumps(inv.error).encode(), headers, inv.request_id)
