"""A small HTTP service for runner tests: answers each POST by its path (/ok, /missing, /broken, /slow), on a free
port of 127.0.0.1, and records what it was sent."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWERS = {"/ok": 200, "/missing": 404, "/broken": 503, "/busy": 429}


@contextmanager
def http_service(slow_seconds: float = 2.0) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The service's base URL and the bodies it received, while the block runs."""
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server protocol
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null")
            received.append({"path": self.path, "body": body, "key": self.headers.get("Idempotency-Key"),
                             "traceparent": self.headers.get("traceparent"), "xray": self.headers.get("X-Amzn-Trace-Id")})
            if self.path == "/slow":
                time.sleep(slow_seconds)
            status = ANSWERS.get(self.path, 200)
            answer = json.dumps({"path": self.path, "status": status}).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
            except (BrokenPipeError, ConnectionResetError):  # the caller gave up (its timeout): nothing to answer
                pass

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
