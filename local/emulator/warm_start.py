"""Emulators forked from a warm process: moto, Flask and the emulator's own modules imported once per parent.

Why: ``python -m local.emulator.server`` imports moto, Flask, werkzeug and boto3 anew (0.7 s of CPU an emulator, most
of it imports), and the tests start one per end-to-end test, reliability scenario and fault test. A multiprocessing fork
server, started at a parent's first emulator, imports them once; every emulator after it is a fork of that process
(about 0.2 s). The emulator itself is the same: ``serve`` with the same arguments, in a process of its own, its
environment and working directory those the parent would have given ``python -m local.emulator.server``. A detached
emulator (the local stack's, which must outlive a Ctrl-C at the terminal) is still started as its own program.

As with any multiprocessing fork server, the emulator's process imports the parent's main module again: a script that
starts an emulator keeps its work under ``if __name__ == "__main__":`` (every entry point here does).
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

# Imported once by the fork server (what an emulator imports before its first request).
PRELOAD = [
    "local.emulator.server",
    "local.emulator.index_reads",
    "local.emulator.item_responses",
    "local.emulator.moto_patches",
    "local.faults.chain",
    "moto.server",
    "moto.dynamodb.responses",
    "moto.dynamodbstreams.responses",
    "moto.sns.responses",
    "moto.sqs.responses",
    "werkzeug.serving",
]

_context: Any = None


def _fork_server() -> Any:
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        _context = context
    return _context


class ForkedEmulator:
    """An emulator forked by the fork server, with the face of the ``subprocess.Popen`` it replaces."""

    def __init__(self, process: Any) -> None:
        self._process = process
        self.pid: int = process.pid

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired("local.emulator.server", timeout or 0.0)
        return int(self._process.exitcode)

    def terminate(self) -> None:
        self._process.terminate()

    def kill(self) -> None:
        self._process.kill()


def start(serve: Callable[..., None], serve_kwargs: dict[str, Any], cwd: str, env: dict[str, str],
          timeout: float) -> tuple[ForkedEmulator, int]:
    """Fork an emulator running ``serve(**serve_kwargs, announce=...)`` (``local.emulator.server.serve``); its process
    and its port, once it listens."""
    context = _fork_server()
    receiving, sending = context.Pipe(duplex=False)
    process = context.Process(target=_serve, args=(serve, sending, serve_kwargs, cwd, env), name="local-emulator",
                              daemon=True)
    process.start()
    sending.close()
    forked = ForkedEmulator(process)
    if not receiving.poll(timeout):
        forked.kill()
        forked.wait(5)
        raise RuntimeError("the emulator did not start within the timeout")
    try:
        port = int(receiving.recv())
    except EOFError:
        forked.wait(5)
        raise RuntimeError(f"the emulator exited before it listened (exit code {forked.poll()})") from None
    finally:
        receiving.close()
    return forked, port


def _serve(serve: Callable[..., None], announce: Connection, serve_kwargs: dict[str, Any], cwd: str,
           env: dict[str, str]) -> None:
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    quiet = os.open(os.devnull, os.O_RDWR)  # as the program's: stdout drained, stderr discarded
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)

    def tell(port: int) -> None:
        announce.send(port)
        announce.close()

    serve(**serve_kwargs, announce=tell)
