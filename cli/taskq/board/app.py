"""The board's web application (Flask): pages (views.py), actions (actions.py), and the rules every response
follows.

- Jinja2 autoescapes every template: nothing from the table (payloads, errors, ids, agent names) is ever
  rendered as markup; a payload holding ``<script>`` shows as text.
- Every state change is a POST carrying the session's CSRF token (Flask-WTF's ``CSRFProtect``; the session is a
  signed cookie whose key is new each time the board starts); a POST without it is refused with 400 and changes
  nothing. ``--read-only`` hides the actions and refuses them with 403.
- The Content-Security-Policy allows scripts from the board itself only (htmx, installed from npm; see
  ``assets.py``): no inline script, no other origin. Only requests naming the loopback host are answered
  (``TRUSTED_HOSTS``), so a page elsewhere cannot reach the board through a DNS name pointed at 127.0.0.1.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from flask import Flask, render_template, request
from flask_wtf.csrf import CSRFError, CSRFProtect
from werkzeug.exceptions import HTTPException, SecurityError

from taskq import failed_events, output
from taskq.board import actions, assets, views
from taskq.board.services import AGENTS_EVERY_S, Board
from taskq.connection import CliError
from taskqueue.core.errors import TaskNotFound, TaskQueueError

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
LOOPBACK_HOSTS = ["127.0.0.1", "localhost"]


def create_app(board: Board, *, secret_key: bytes | None = None, refresh_seconds: float = 3.0) -> Flask:
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=secret_key or secrets.token_bytes(32),
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        WTF_CSRF_TIME_LIMIT=None,  # the token lives as long as the session (the board's run)
        TRUSTED_HOSTS=LOOPBACK_HOSTS,
        MAX_CONTENT_LENGTH=64 * 1024,
    )
    app.jinja_env.autoescape = True  # every template, whatever its name
    # JSON as text (escaped by the template like any text), not Flask's ``tojson``, which marks its output safe and
    # writes "<" as "\\u003c": a payload's "<script>" must read as it was written, and never run.
    app.jinja_env.filters["json_text"] = lambda value: json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    app.jinja_env.filters["json_line"] = lambda value: json.dumps(value, sort_keys=True, ensure_ascii=False)
    app.extensions["board"] = board
    CSRFProtect(app)
    app.register_blueprint(views.pages)
    app.register_blueprint(actions.blueprint)
    app.register_blueprint(assets.blueprint)

    @app.before_request
    def meter_this_request() -> None:
        board.meter.start()  # the page says what its own reads cost

    @app.context_processor
    def page_context() -> dict[str, Any]:
        return {
            "meter": board.meter,
            "task_url": views.task_url,
            "count_cap": f"{board.counts.cap:,}",
            "agents_every_s": AGENTS_EVERY_S,
            "board": board,
            "read_only": board.read_only,
            "htmx": assets.htmx_available(),
            "refresh_ms": int(refresh_seconds * 1000),
            "iso": lambda ms: output.iso(ms) or "-",
            "age": output.age,
            "source_text": failed_events.source_text,
            "stream_commands": failed_events.stream_commands,
            "table_of": failed_events.table_of,
        }

    @app.after_request
    def security_headers(response: Any) -> Any:
        response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers.setdefault("Cache-Control", "no-store")
        return response

    @app.errorhandler(CSRFError)
    def refused_without_token(exc: CSRFError) -> tuple[str, int]:
        return render_template("refused.html", title="Refused", reason=f"{exc.description} Nothing was changed: "
                               "reload the page and try again from it."), 400

    @app.errorhandler(TaskNotFound)
    def not_found(exc: TaskNotFound) -> tuple[str, int]:
        return render_template("refused.html", title="Not found", reason=str(exc)), 404

    @app.errorhandler(TaskQueueError)
    @app.errorhandler(CliError)
    def refused(exc: Exception) -> tuple[str, int]:
        return render_template("refused.html", title="Refused", reason=str(exc)), 400

    @app.errorhandler(ClientError)
    def aws_refused(exc: ClientError) -> tuple[str, int]:
        error = exc.response.get("Error", {})
        reason = f"AWS refused {exc.operation_name}: {error.get('Code', '')}: {error.get('Message', '')}"
        return render_template("refused.html", title="AWS error", reason=reason), 502

    @app.errorhandler(BotoCoreError)
    def aws_unreachable(exc: BotoCoreError) -> tuple[str, int]:
        return render_template("refused.html", title="AWS error", reason=f"AWS: {exc}"), 502

    @app.errorhandler(SecurityError)
    def untrusted_host(exc: SecurityError) -> tuple[str, int, dict[str, str]]:
        # No page: the request named a host other than the loopback one, so no URL of the board can be built for it.
        return "this board answers only requests for 127.0.0.1 or localhost\n", 400, {"Content-Type": "text/plain"}

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> tuple[str, int]:
        if request.path.startswith("/static/") or request.path.startswith("/assets/"):
            return exc.description or "", exc.code or 500
        return render_template("refused.html", title=exc.name, reason=exc.description), exc.code or 500

    return app
