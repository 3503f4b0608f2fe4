"""The check: every botocore request of this process made while a function's code runs is authorized against that
function's role, as AWS would, before it is sent; a request the role does not allow raises the ``ClientError`` AWS
answers (``AccessDeniedException``; SNS: ``AuthorizationError``) where it is made.

Which function runs: ``acting_as(function)`` around its code (the tests wrap each handler's entry points; a local
engine sandbox is one function for its whole life: ``act_as_process``). A thread that says nothing itself (a
runner's thread, a lease heartbeat) counts as the one function running in this process, if exactly one is; the
process's main thread counts only when it says so, so a test's own set-up (creating tables, seeding items) is
never checked. Requests on resources the names do not know are counted as unmapped, not checked.

What was checked is kept in ``TALLY`` (per function: requests, authorizations, the grants used, denials), which the
sandboxes send to their parent after each invocation. Standard library only (botocore is imported by ``install``):
the sandboxes load this module.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from local.iam.requests import Grant, Names, allows, iam_requests, is_mapped

_UNCHECKED = ""  # on a thread's stack: requests of this thread are not a function's (a test's fault hook, set-up)


@dataclass
class FunctionTally:
    requests: int = 0  # API requests checked
    authorizations: int = 0  # (action, resource) pairs checked: a transaction counts one per item
    unmapped: int = 0  # requests on resources the names do not know: not checked
    used: set[Grant] = field(default_factory=set)
    denied: list[dict[str, str]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "authorizations": self.authorizations, "unmapped": self.unmapped,
                "used": sorted([list(g) for g in self.used]), "denied": list(self.denied)}

    def add(self, other: Mapping[str, Any]) -> None:
        self.requests += int(other.get("requests", 0))
        self.authorizations += int(other.get("authorizations", 0))
        self.unmapped += int(other.get("unmapped", 0))
        self.used |= {(str(a), str(r)) for a, r in other.get("used", [])}
        self.denied += [dict(d) for d in other.get("denied", [])]


class Tally:
    """What was checked, per function, and every denial in the order it was recorded (``denials``: a test compares
    their number before and after itself)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.functions: dict[str, FunctionTally] = {}
        self._denials: list[dict[str, str]] = []

    @property
    def denials(self) -> int:
        return len(self._denials)

    def of(self, function: str) -> FunctionTally:
        with self._lock:
            return self.functions.setdefault(function, FunctionTally())

    def record(self, function: str, needed: list[Grant], denied: list[Grant], operation: str, unmapped: bool) -> None:
        with self._lock:
            tally = self.functions.setdefault(function, FunctionTally())
            if unmapped:
                tally.unmapped += 1
                return
            tally.requests += 1
            tally.authorizations += len(needed)
            tally.used |= set(needed) - set(denied)
            refused = [{"action": a, "resource": r, "operation": operation} for a, r in denied]
            tally.denied += refused
            self._denials += [dict(d, function=function) for d in refused]

    def merge(self, data: Mapping[str, Mapping[str, Any]]) -> None:
        """Add another process's tally (``take``'s answer)."""
        with self._lock:
            for function, other in data.items():
                self.functions.setdefault(function, FunctionTally()).add(other)
                self._denials += [dict(d, function=function) for d in other.get("denied", [])]

    def denied_after(self, mark: int) -> list[dict[str, str]]:
        """The denials recorded after ``denials`` was ``mark``, each naming its function."""
        with self._lock:
            return list(self._denials[mark:])

    def take(self) -> dict[str, dict[str, Any]]:
        """Everything recorded so far, as JSON, and forget it (a sandbox sends it to its parent)."""
        with self._lock:
            taken = {f: t.as_json() for f, t in self.functions.items()}
            self.functions.clear()
            return taken

    def as_json(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {f: t.as_json() for f, t in self.functions.items()}


TALLY = Tally()


class Enforcer:
    """Checks requests against ``roles`` (function -> its grants; a function it has none for is not checked),
    naming resources with ``names``. Both may be given as callables, read at the first check (the template's
    transform takes seconds)."""

    def __init__(self, roles: Mapping[str, frozenset[Grant]] | Callable[[], Mapping[str, frozenset[Grant]]],
                 names: Names | Callable[[], Names], tally: Tally = TALLY) -> None:
        self._roles_source = roles
        self._names_source = names
        self._roles: Mapping[str, frozenset[Grant]] | None = None
        self._names: Names | None = None
        self._lock = threading.Lock()
        self.tally = tally

    def roles(self) -> Mapping[str, frozenset[Grant]]:
        if self._roles is None:
            with self._lock:
                if self._roles is None:
                    source = self._roles_source
                    self._roles = source() if callable(source) else source
        return self._roles

    def names(self) -> Names:
        if self._names is None:
            source = self._names_source
            self._names = source() if callable(source) else source
        return self._names

    def check(self, function: str, service: str, operation: str, params: Mapping[str, Any]) -> None:
        granted = self.roles().get(function)
        if granted is None:
            return
        needed = list(iam_requests(service, operation, params, self.names()))
        if not all(is_mapped(r) for _, r in needed):
            self.tally.record(function, needed, [], operation, unmapped=True)
            return
        denied = sorted({(a, r) for a, r in needed if not allows(granted, a, r)})  # once per request and pair
        self.tally.record(function, needed, denied, operation, unmapped=False)
        if denied:
            raise access_denied(function, service, operation, denied[0])


def access_denied(function: str, service: str, operation: str, grant: Grant) -> Exception:
    """The ClientError AWS answers a request its caller's role does not allow."""
    from botocore.exceptions import ClientError

    action, resource = grant
    code, status = ("AuthorizationError", 403) if service == "sns" else ("AccessDeniedException", 400)
    message = (f"User: arn:aws:sts::123456789012:assumed-role/{function}Role/{function} is not authorized to perform: "
               f"{action} on resource: {resource} because no identity-based policy allows the {action} action "
               "(template.yaml grants the function's role no such permission)")
    return ClientError({"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}},
                       operation)


# ---- which function's code runs ------------------------------------------------------------------------------

_state_lock = threading.Lock()
_stacks: dict[int, list[str]] = {}
_process_function: str | None = None
_enforcer: Enforcer | None = None
_original_call: Any = None


@contextlib.contextmanager
def acting_as(function: str) -> Iterator[None]:
    """Requests of this thread (and of threads that say nothing, while only this function runs) are ``function``'s."""
    with _pushed(function):
        yield


@contextlib.contextmanager
def unchecked() -> Iterator[None]:
    """Requests of this thread are nobody's (a test's own requests inside a function's run)."""
    with _pushed(_UNCHECKED):
        yield


@contextlib.contextmanager
def _pushed(entry: str) -> Iterator[None]:
    ident = threading.get_ident()
    with _state_lock:
        _stacks.setdefault(ident, []).append(entry)
    try:
        yield
    finally:
        with _state_lock:
            stack = _stacks[ident]
            stack.pop()
            if not stack:
                del _stacks[ident]


def enforce_process(spec: Mapping[str, Any]) -> Tally:
    """A local engine sandbox: every request of this process is ``spec``'s function's, checked against its grants
    (``local.iam.grants.sandbox_spec``); the tally its responses carry."""
    grants = frozenset((str(a), str(r)) for a, r in spec["grants"])
    install(Enforcer({spec["function"]: grants}, Names(spec["names"], spec.get("stack"))))
    act_as_process(spec["function"])
    return TALLY


def act_as_process(function: str) -> None:
    """Every request of this process is ``function``'s (a local engine sandbox)."""
    global _process_function
    _process_function = function


def current() -> str | None:
    """The function whose request this thread makes now, or None (not checked)."""
    with _state_lock:
        stack = _stacks.get(threading.get_ident())
        if stack:
            return stack[-1] or None
        if _process_function is not None:
            return _process_function
        if threading.current_thread() is threading.main_thread():
            return None
        running = {s[-1] for s in _stacks.values() if s and s[-1]}
    return running.pop() if len(running) == 1 else None


def install(enforcer: Enforcer) -> None:
    """Check every request of this process's botocore clients (made before or after) with ``enforcer``."""
    global _enforcer, _original_call
    from botocore.client import BaseClient

    _enforcer = enforcer
    if _original_call is not None:
        return
    _original_call = BaseClient._make_api_call

    def _make_api_call(self: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
        enforcing = _enforcer
        function = current() if enforcing is not None else None
        if function is not None and enforcing is not None:
            enforcing.check(function, self.meta.service_model.endpoint_prefix, operation_name, api_params)
        return _original_call(self, operation_name, api_params)

    BaseClient._make_api_call = _make_api_call  # type: ignore[method-assign]


def uninstall() -> None:
    global _enforcer, _original_call
    if _original_call is None:
        return
    from botocore.client import BaseClient

    BaseClient._make_api_call = _original_call  # type: ignore[method-assign]
    _original_call = None
    _enforcer = None
