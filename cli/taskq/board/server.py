"""Serving the board: a threaded WSGI server (werkzeug's, as Flask's own) on 127.0.0.1 only."""

from __future__ import annotations

import threading

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from taskq.board.app import create_app
from taskq.board.services import Board
from taskq.connection import CliError

HOST = "127.0.0.1"  # loopback only, whatever the flags: the board has no login


class _QuietHandler(WSGIRequestHandler):
    """No access log line per request (the board polls every few seconds); errors are still logged."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return None


def serve(board: Board, port: int = 0, refresh_seconds: float = 3.0) -> BaseWSGIServer:
    """A server of ``board`` bound to 127.0.0.1:``port`` (0: a free one), not yet serving: ``serve_forever`` runs it."""
    try:
        return make_server(HOST, port, create_app(board, refresh_seconds=refresh_seconds), threaded=True,
                           request_handler=_QuietHandler)
    except OSError as exc:
        raise CliError(f"cannot listen on {HOST}:{port}: {exc.strerror}; choose another --port (or none: a free one)") from None


def url_of(server: BaseWSGIServer) -> str:
    return f"http://{HOST}:{server.server_port}/"


def run_in_thread(server: BaseWSGIServer) -> threading.Thread:
    """Serve in a daemon thread (tests and the benchmark); ``server.shutdown()`` stops it."""
    thread = threading.Thread(target=server.serve_forever, name="taskq-board", daemon=True)
    thread.start()
    return thread
