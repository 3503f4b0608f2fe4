"""The embedded AWS emulator: moto's server app behind one global request lock, on 127.0.0.1.

moto's conditional writes and transactions are not atomic under concurrent requests; serializing every
request makes them so (DESIGN.md, "The local engine"). Run as its own process (its own GIL):
``python -m local.emulator`` prints ``PORT <n>`` once it listens.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Any


class SerializedApp:
    """A WSGI wrapper that lets one request at a time into the wrapped app (body fully built inside)."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        with self._lock:
            return list(self._app(environ, start_response))


def serve(host: str = "127.0.0.1", port: int = 0) -> None:
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    try:
        from moto.moto_server.threaded_moto_server import MotoRequestHandler as handler
    except ImportError:  # pragma: no cover
        handler = None
    app = SerializedApp(DomainDispatcherApplication(create_backend_app))
    kwargs = {"request_handler": handler} if handler else {}
    server = make_server(host, port, app, threaded=True, **kwargs)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


class Emulator:
    """A serialized moto server in a child process; ``url`` is its endpoint."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self, timeout: float = 30.0) -> str:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "local.emulator"],
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
                urllib.request.urlopen(self.url + "/moto-api/", timeout=2).read()
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


if __name__ == "__main__":
    serve(port=int(sys.argv[1]) if len(sys.argv) > 1 else 0)
