"""Lambda execution environments: one long-lived subprocess per function instance.

The parent (``Sandbox``) starts ``python local/delivery/sandbox.py`` with the function's own environment; the child
puts the function's code directory and its layers on ``sys.path`` (as /var/task and /opt/python), imports the handler
once (init), then serves invocations: a JSON request line on stdin, a JSON response line on a separate result pipe.
The handler's stdout/stderr (its logs) go to the child's stdout, which the parent reads and attributes to the
invocation in progress. A ``FunctionPool`` keeps one function's idle sandboxes, up to its concurrency limit; an
invocation past the function's timeout (its init not counted, as on Lambda) kills its sandbox.

Function clocks (opt-in, ``time_scale`` below 1 with ``scale_clocks``): the child's clock (``time.time``,
``time.monotonic``, ``time.sleep``, threading's wait timeouts, the context's remaining time) runs 1/time_scale as fast
as the real one, from one epoch every sandbox shares: a 900 s Timeout passes in 900 x time_scale real seconds, and the
platform's durations (schedules, batching windows, retries) are scaled alike, so the stack keeps its proportions.

IAM as AWS enforces it (``local/iam``): the child checks every request of the function's code against the grants and
names the parent hands it (``LOCAL_SANDBOX_IAM``): one its role does not allow fails with AccessDenied. Each response
carries what was checked; the parent adds it to ``local.iam.enforce.TALLY`` and logs each denial. This file is also
the child's program, so the child half uses the standard library only (and ``local.iam``'s).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback
import uuid
from typing import Any

END_MARK = "\x00local-sandbox-end "
READY_MARK = "\x00local-sandbox-ready"  # the child's init (the handler's import) is over
INIT_WAIT_SECONDS = 60.0  # a cold start's init, before its timeout starts (Lambda: 10 s; a loaded laptop is slower)


def scale_clock(scale: float, epoch: float) -> None:
    """Make this process's clock run 1/``scale`` as fast as the real one from ``epoch`` (see the docstring)."""
    import threading

    real_time, real_mono, real_sleep = time.time, time.monotonic, time.sleep
    mono_epoch = real_mono()

    def virtual_time() -> float:
        return epoch + (real_time() - epoch) / scale

    def virtual_monotonic() -> float:
        return mono_epoch + (real_mono() - mono_epoch) / scale

    def scaled(timeout: float | None) -> float | None:
        return None if timeout is None else max(0.0, timeout) * scale

    condition_wait, thread_join = threading.Condition.wait, threading.Thread.join
    time.time = virtual_time
    time.time_ns = lambda: int(virtual_time() * 1e9)
    time.monotonic = virtual_monotonic
    time.monotonic_ns = lambda: int(virtual_monotonic() * 1e9)
    time.sleep = lambda seconds: real_sleep(scaled(seconds) or 0.0)
    threading.Condition.wait = lambda self, timeout=None: condition_wait(self, scaled(timeout))
    threading.Thread.join = lambda self, timeout=None: thread_join(self, scaled(timeout))


# --------------------------------------------------------------------------- child


class LambdaContext:
    def __init__(self, request: dict) -> None:
        self.function_name = request["function_name"]
        self.function_version = "$LATEST"
        self.invoked_function_arn = request["function_arn"]
        self.memory_limit_in_mb = int(request["memory"])
        self.aws_request_id = request["request_id"]
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = f"local/{os.getpid()}"
        self.identity = None
        self.client_context = None
        self._deadline = time.time() + float(request["timeout"])

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.time()) * 1000))


def _enforce_iam(spec: str) -> Any:
    """Check every request against the function's role (``local.iam.enforce.enforce_process``); the repository's root
    goes last on the import path, after the function's code and layers, for ``local.iam`` alone."""
    sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from local.iam.enforce import enforce_process

    return enforce_process(json.loads(spec))


def _child() -> None:
    results = os.fdopen(int(os.environ.pop("LOCAL_SANDBOX_RESULT_FD")), "w", buffering=1)
    clock = os.environ.pop("LOCAL_SANDBOX_CLOCK", "")
    if clock:  # "<scale> <epoch>": before anything of the function is imported
        scale, epoch = (float(part) for part in clock.split())
        scale_clock(scale, epoch)
    code_dir = os.environ["LAMBDA_TASK_ROOT"]
    layers = [p for p in os.environ.pop("LOCAL_SANDBOX_LAYERS", "").split(os.pathsep) if p]
    sys.path[:] = [code_dir, *layers] + [p for p in sys.path[1:] if p]
    iam = os.environ.pop("LOCAL_SANDBOX_IAM", "")
    tally = _enforce_iam(iam) if iam else None
    module_name, _, function_name = os.environ["_HANDLER"].rpartition(".")
    handler = None
    init_error = None
    try:
        handler = getattr(importlib.import_module(module_name), function_name)
    except Exception as exc:  # noqa: BLE001 - reported on every invocation, as Lambda does
        init_error = {"errorType": "Runtime.ImportModuleError",
                      "errorMessage": f"Unable to import module '{module_name}': {type(exc).__name__}: {exc}",
                      "stackTrace": traceback.format_exc().splitlines()}
        traceback.print_exc()
    print(READY_MARK, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if init_error:
            response = {"ok": False, **init_error}
        else:
            try:
                result = handler(request["event"], LambdaContext(request))
                response = {"ok": True, "result": json.loads(json.dumps(result))}
            except Exception as exc:  # noqa: BLE001 - the function's error, returned as Lambda returns it
                traceback.print_exc()
                response = {"ok": False, "errorType": type(exc).__name__, "errorMessage": str(exc),
                            "stackTrace": traceback.format_exc().splitlines()}
        if tally is not None:
            response["iam"] = tally.take()
        sys.stdout.flush()
        sys.stderr.flush()
        print(END_MARK + request["request_id"], flush=True)
        results.write(json.dumps(response, default=str) + "\n")


# --------------------------------------------------------------------------- parent

if __name__ != "__main__":
    import queue
    import subprocess
    import threading
    from collections.abc import Callable
    from dataclasses import dataclass, field
    from pathlib import Path

    from local.iam.enforce import TALLY
    from local.template.template import ACCOUNT, REGION, FunctionSpec

    @dataclass
    class Invocation:
        function: str
        request_id: str
        ok: bool = False
        result: Any = None
        error: dict[str, Any] | None = None
        logs: list[str] = field(default_factory=list)
        duration: float = 0.0
        timed_out: bool = False
        throttled: bool = False
        cold_start: bool = False
        denied: list[dict[str, str]] = field(default_factory=list)  # requests its role did not allow (AccessDenied)

    def sandbox_environment(spec: FunctionSpec, endpoint_url: str, clock: tuple[float, float] | None = None,
                            iam: dict[str, Any] | None = None) -> dict[str, str]:
        """The function's environment, as Lambda would set it, pointed at the emulator. ``clock``: (scale, epoch) of
        a scaled function clock (see the module's docstring); ``iam``: the function's grants and the stack's names
        (``local.engine``), checked on every request of its code."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "TZ": "UTC",
            "HOME": os.environ.get("HOME", "/tmp"),
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_ENDPOINT_URL": endpoint_url,
            "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
            "AWS_LAMBDA_FUNCTION_NAME": spec.name,
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory),
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{spec.name}",
            "LAMBDA_TASK_ROOT": str(spec.code_dir),
            "_HANDLER": spec.handler,
            "LOCAL_SANDBOX_LAYERS": os.pathsep.join(str(d) for d in spec.layer_dirs),
        }
        env.update(spec.environment)
        env["POWERTOOLS_TRACE_DISABLED"] = "true"
        if clock is not None:
            env["LOCAL_SANDBOX_CLOCK"] = f"{clock[0]!r} {clock[1]!r}"
        if iam is not None:
            env["LOCAL_SANDBOX_IAM"] = json.dumps(iam)
        return env

    class Sandbox:
        """One execution environment (a child process) of one function."""

        def __init__(self, spec: FunctionSpec, env: dict[str, str], log_sink: Callable[[str, str], None] | None) -> None:
            self.spec = spec
            self.log_sink = log_sink
            # A scaled function clock (LOCAL_SANDBOX_CLOCK): the Timeout passes in Timeout x scale real seconds.
            self.clock_scale = float(env["LOCAL_SANDBOX_CLOCK"].split()[0]) if env.get("LOCAL_SANDBOX_CLOCK") else 1.0
            read_fd, write_fd = os.pipe()
            env = dict(env, LOCAL_SANDBOX_RESULT_FD=str(write_fd))
            self.proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve())],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                env=env, pass_fds=(write_fd,), cwd=str(spec.code_dir), text=True, bufsize=1,
            )
            os.close(write_fd)
            self._results: queue.Queue[dict[str, Any] | None] = queue.Queue()
            self._logs: list[str] = []
            self._logs_lock = threading.Lock()
            self._end = threading.Event()
            self.ready = threading.Event()  # its init is over (or it exited)
            self.prewarmed = False  # started before traffic: its first invocation finds its init done
            self.invocations = 0
            threading.Thread(target=self._read_results, args=(read_fd,), daemon=True).start()
            threading.Thread(target=self._read_logs, daemon=True).start()

        def _read_results(self, fd: int) -> None:
            with os.fdopen(fd) as stream:
                for line in stream:
                    self._results.put(json.loads(line))
            self._results.put(None)

        def _read_logs(self) -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                if line.startswith(END_MARK):
                    self._end.set()
                    continue
                if line.startswith(READY_MARK):
                    self.ready.set()
                    continue
                with self._logs_lock:
                    self._logs.append(line.rstrip("\n"))
                if self.log_sink:
                    self.log_sink(self.spec.logical_id, line.rstrip("\n"))
            self._end.set()
            self.ready.set()

        @property
        def alive(self) -> bool:
            return self.proc.poll() is None

        def invoke(self, event: Any, timeout: float | None = None, request_id: str | None = None) -> Invocation:
            """``request_id``: the invocation's id (Lambda keeps it when it retries an asynchronous event)."""
            spec = self.spec
            request_id = request_id or str(uuid.uuid4())
            inv = Invocation(spec.logical_id, request_id, cold_start=self.invocations == 0 and not self.prewarmed)
            self.invocations += 1
            timeout = spec.timeout if timeout is None else timeout
            request = {"event": event, "request_id": request_id, "function_name": spec.name, "memory": spec.memory,
                       "timeout": timeout, "function_arn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{spec.name}"}
            self._end.clear()
            started = time.monotonic()
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps(request) + "\n")
                self.proc.stdin.flush()
                if inv.cold_start and self.ready.wait(INIT_WAIT_SECONDS):  # init: not the invocation's time (Lambda)
                    started = time.monotonic()
                response = self._results.get(timeout=timeout * self.clock_scale + (5.0 if inv.cold_start else 0.5))
            except queue.Empty:
                response = None
                inv.timed_out = True
            except (BrokenPipeError, OSError):
                response = None
            inv.duration = time.monotonic() - started
            if response is None:
                self.kill()
                inv.error = ({"errorType": "Sandbox.Timedout", "errorMessage": f"Task timed out after {timeout:.2f} seconds"}
                             if inv.timed_out else {"errorType": "Runtime.ExitError", "errorMessage": "the runtime exited"})
            else:
                self._end.wait(2.0)
                checked = response.pop("iam", None) or {}
                TALLY.merge(checked)
                inv.denied = [d for tally in checked.values() for d in tally.get("denied", [])]
                inv.ok = bool(response.pop("ok"))
                if inv.ok:
                    inv.result = response.get("result")
                else:
                    inv.error = response
            with self._logs_lock:
                inv.logs, self._logs = self._logs, []
            return inv

        def kill(self) -> None:
            if self.proc.poll() is None:
                self.proc.kill()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass

        def close(self) -> None:
            if self.proc.poll() is None:
                try:
                    assert self.proc.stdin is not None
                    self.proc.stdin.close()
                    self.proc.wait(2)
                except (OSError, subprocess.TimeoutExpired):
                    self.kill()

    class FunctionPool:
        """The execution environments of one function, at most ``limit`` of them busy at once."""

        def __init__(self, spec: FunctionSpec, endpoint_url: str, limit: int,
                     log_sink: Callable[[str, str], None] | None = None, clock: tuple[float, float] | None = None,
                     iam: dict[str, Any] | None = None) -> None:
            self.spec = spec
            self.env = sandbox_environment(spec, endpoint_url, clock, iam)
            self.limit = limit
            self.log_sink = log_sink
            self._idle: list[Sandbox] = []
            self._all: list[Sandbox] = []
            self._busy = 0
            self._lock = threading.Lock()
            self._closed = False
            self.stats = {"invocations": 0, "errors": 0, "timeouts": 0, "throttles": 0, "cold_starts": 0,
                          "duration_seconds": 0.0, "max_concurrency": 0, "access_denied": 0}

        @property
        def busy(self) -> int:
            return self._busy

        def try_invoke(self, event: Any, on_throttle_count: bool = True, request_id: str | None = None) -> Invocation:
            """Invoke now if a slot is free; else return a throttled Invocation (nothing ran): Lambda's HTTP 429
            TooManyRequestsException, with the reason it gives (reserved concurrency, or the account's)."""
            with self._lock:
                if self._closed or self._busy >= self.limit:
                    if on_throttle_count:
                        self.stats["throttles"] += 1
                    reason = ("ReservedFunctionConcurrentInvocationLimitExceeded" if self.spec.reserved_concurrency is not None
                              else "ConcurrentInvocationLimitExceeded")
                    return Invocation(self.spec.logical_id, "", throttled=True,
                                      error={"errorType": "TooManyRequestsException", "errorMessage": "Rate Exceeded.",
                                             "statusCode": 429, "reason": reason})
                self._busy += 1
                self.stats["max_concurrency"] = max(self.stats["max_concurrency"], self._busy)
                sandbox = self._idle.pop() if self._idle else None
            try:
                if sandbox is None or not sandbox.alive:
                    sandbox = Sandbox(self.spec, self.env, self.log_sink)
                    with self._lock:
                        self._all = [s for s in self._all if s.alive] + [sandbox]
                inv = sandbox.invoke(event, request_id=request_id)
                for denied in inv.denied if self.log_sink else ():
                    self.log_sink(self.spec.logical_id, f"AccessDenied (as on AWS): {denied['operation']} needs {denied['action']} on {denied['resource']}")
            finally:
                with self._lock:
                    self._busy -= 1
            with self._lock:
                self.stats["invocations"] += 1
                self.stats["errors"] += 0 if inv.ok else 1
                self.stats["access_denied"] += len(inv.denied)
                self.stats["timeouts"] += int(inv.timed_out)
                self.stats["cold_starts"] += int(inv.cold_start)
                self.stats["duration_seconds"] += inv.duration
                if sandbox.alive and not self._closed:
                    self._idle.append(sandbox)
                else:
                    sandbox.close()
            return inv

        def prewarm(self, count: int, timeout: float = 60.0) -> int:
            """Start sandboxes until ``count`` are idle and wait for their init (a function that serves steady
            traffic has warm environments; a laptop that cold-starts ten at once on two cores takes seconds each).
            Returns how many are idle and alive."""
            with self._lock:
                wanted = max(0, min(count, self.limit) - len(self._idle))
            started = [Sandbox(self.spec, self.env, self.log_sink) for _ in range(wanted)]
            deadline = time.monotonic() + timeout
            for sandbox in started:
                sandbox.ready.wait(max(0.0, deadline - time.monotonic()))
            with self._lock:
                for sandbox in started:
                    if sandbox.alive and sandbox.ready.is_set() and not self._closed:
                        sandbox.prewarmed = True
                        self._all.append(sandbox)
                        self._idle.append(sandbox)
                    else:
                        sandbox.kill()
                return sum(1 for s in self._idle if s.alive)

        def close(self) -> None:
            with self._lock:
                self._closed = True
                idle, self._idle = self._idle, []
                busy = [s for s in self._all if s not in idle]
            for sandbox in idle:
                sandbox.close()
            for sandbox in busy:
                sandbox.kill()


if __name__ == "__main__":
    _child()
