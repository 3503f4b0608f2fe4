"""`taskq board`: serve the board on 127.0.0.1 until Ctrl-C, against the stack taskq resolves (the running local
stack by default, or ``--stack-name`` with the operator's AWS credentials).

Flask and its kin are imported only when the board starts, so every other taskq command runs without them."""

from __future__ import annotations

import argparse

from taskq.connection import CliError, Command, Printer, Target

MISSING = ("taskq board needs Flask and Flask-WTF ({missing}): `make venv` installs them, or "
           "pip install -e '.[board]'")


def cmd_board(t: Target, args: argparse.Namespace, say: Printer) -> int:
    try:
        from taskq.board.server import serve, url_of
    except ImportError as exc:
        raise CliError(MISSING.format(missing=exc.name or exc)) from None
    from taskq.board.services import build

    board = build(t, read_only=args.read_only, agent_table_name=args.agent_table_name,
                  failed_events_url=args.queue_url)
    server = serve(board, args.port, args.refresh)
    mode = "read-only" if args.read_only else "actions on"
    say(f"taskq board: {url_of(server)} ({board.where}; {mode}) - Ctrl-C stops it")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} must be from 0 to 65535 (0: a free port)")
    return value


def _refresh(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0.5 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} must be from 0.5 to 3600 seconds")
    return value


def add_parser(command: Command) -> None:
    p = command(
        "board",
        cmd_board,
        "Serve the queue board on 127.0.0.1: per-state counts, charts, task lists and pages, the matching queue and "
        "failed events, with the operator actions (retry, cancel, reprioritize, touch, pause, resume, purge, "
        "retry-all) unless --read-only. Prints its URL; Ctrl-C stops it.",
    )
    p.add_argument("--port", type=_port, default=0, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--read-only", action="store_true", help="show everything, hide and refuse every action")
    p.add_argument("--refresh", type=_refresh, default=3.0, help="seconds between live refreshes (default 3)")
    p.add_argument("--agent-table-name", help="the agent table (default: stack output AgentTableName, or env AGENT_TABLE_NAME)")
    p.add_argument("--queue-url", help="FailedEventsQueue (default: stack output FailedEventsQueueUrl, or env FAILED_EVENTS_QUEUE_URL)")
