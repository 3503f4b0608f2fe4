"""A WSGI wrapper that sends requests under one path prefix to another HTTP server and everything else to
the wrapped app. The local stack uses it so one endpoint serves both the emulator's AWS APIs and the engine's
Lambda ``Invoke`` API (``/2015-03-31/functions/...``): it sits in front of the serializing lock, because an
invoked function calls DynamoDB through the same server while its invocation is in flight."""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit

# Headers that describe one HTTP connection, not the message: never copied across the hop.
_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
        "transfer-encoding", "upgrade", "content-length", "host"}


class Forwarding:
    def __init__(self, app: Any, prefix: str, target: str, timeout: float = 960.0) -> None:
        self._app = app
        self.prefix = prefix
        target_parts = urlsplit(target)
        self._host, self._port = target_parts.hostname or "127.0.0.1", target_parts.port or 80
        self.timeout = timeout  # above Lambda's 900 s maximum function timeout

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if not path.startswith(self.prefix):
            return self._app(environ, start_response)
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        headers = {key[5:].replace("_", "-").title(): value for key, value in environ.items()
                   if key.startswith("HTTP_") and key[5:].replace("_", "-").lower() not in _HOP}
        if environ.get("CONTENT_TYPE"):
            headers["Content-Type"] = environ["CONTENT_TYPE"]
        query = environ.get("QUERY_STRING")
        connection = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
        try:
            connection.request(environ["REQUEST_METHOD"], path + (f"?{query}" if query else ""), body=body, headers=headers)
            response = connection.getresponse()
            payload = response.read()
            start_response(f"{response.status} {response.reason}",
                           [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP]
                           + [("Content-Length", str(len(payload)))])
            return [payload]
        except OSError as exc:
            message = json.dumps({"Type": "Service", "message": f"the local Lambda service did not answer: {exc}"}).encode()
            start_response("502 Bad Gateway", [("Content-Type", "application/json"), ("x-amzn-ErrorType", "ServiceException"),
                                               ("Content-Length", str(len(message)))])
            return [message]
        finally:
            connection.close()
