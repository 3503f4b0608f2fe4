"""The board's one piece of JavaScript: htmx, which refreshes the counts and charts in place. It is not kept in
this repository: `make board-assets` (a prerequisite of `make board` and `make test`) installs the npm package
``htmx.org`` at the version pinned in the Makefile into ``.board-assets/`` (git-ignored), and the board serves that
file. ``TASKQ_BOARD_HTMX`` names another copy. Without it the board works the same, without live refresh, and
says how to get it."""

from __future__ import annotations

import os
from pathlib import Path

from flask import Blueprint, abort, send_file
from flask.typing import ResponseReturnValue

HTMX_ENV = "TASKQ_BOARD_HTMX"
REPO = Path(__file__).resolve().parents[3]
DEFAULT_HTMX = REPO / ".board-assets" / "node_modules" / "htmx.org" / "dist" / "htmx.min.js"

blueprint = Blueprint("assets", __name__)


def htmx_path() -> Path:
    named = os.environ.get(HTMX_ENV, "").strip()
    return Path(named) if named else DEFAULT_HTMX


def htmx_available() -> bool:
    return htmx_path().is_file()


@blueprint.get("/assets/htmx.min.js")
def htmx() -> ResponseReturnValue:
    path = htmx_path()
    if not path.is_file():
        abort(404, f"htmx is not installed at {path}: run `make board-assets`")
    response = send_file(path, mimetype="text/javascript", max_age=3600)
    response.headers["Cache-Control"] = "public, max-age=3600"
    return response
