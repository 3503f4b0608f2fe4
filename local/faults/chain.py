"""The emulator's fault chain: the mechanisms ``local.faults.faults.Faults`` asks for, between the request lock and moto.

Order of a request through it: ``request_faults`` (an injected error: nothing else runs, nothing is applied),
then ``item_size`` (refuse, or undo, a write over 400 KB), then ``index_lag`` (remember writes, answer GSI reads
from the past), then moto. With no fault set a request goes straight to moto. The setting can be read and
replaced while the server runs (``GET``/``POST /_local/faults``, ``Emulator.faults`` / ``set_faults``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from local.faults.faults import Faults
from local.faults.index_lag import IndexLag
from local.faults.item_size import ItemSizeLimit
from local.faults.request_faults import RequestFaults
from local.faults.wsgi_request import Request, read_request


class FaultyApp:
    def __init__(self, app: Callable[..., Any], config: dict[str, Any] | None = None) -> None:
        self._app = app
        self.errors: RequestFaults | None = None
        self.size: ItemSizeLimit | None = None
        self.lag: IndexLag | None = None
        self.faults = Faults()
        self.configure(config or {})

    def configure(self, config: dict[str, Any]) -> Faults:
        """Replace the setting (a ``Faults.server_config()``); counters start again from zero."""
        faults = Faults.from_dict({k: v for k, v in config.items() if k != "ttl_lateness"})
        if self.size is not None:
            self.size.close()
        self.faults = faults
        self.errors = RequestFaults(faults.seed, list(faults.dynamodb_errors), faults.sns_publish_errors)
        self.size = ItemSizeLimit() if faults.item_size_limit else None
        self.lag = IndexLag(faults.index_lag, faults.index_lag_indexes) if faults.index_lag else None
        return faults

    @property
    def active(self) -> bool:
        return bool((self.errors and self.errors.active) or self.size or self.lag)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if not self.active:
            return self._app(environ, start_response)
        request = read_request(environ)
        if self.errors is not None:
            refused = self.errors.answer(request)
            if refused is not None:
                start_response(refused.status, refused.headers)
                return [refused.body]
        chain = self._app
        for mechanism in (self.lag, self.size):  # innermost first
            if mechanism is not None:
                chain = _layer(mechanism, request, chain)
        return chain(environ, start_response)

    def report(self) -> dict[str, Any]:
        return {
            "config": self.faults.server_config(),
            "description": self.faults.describe(),
            "errors": self.errors.snapshot() if self.errors else {},
            "item_size": self.size.snapshot() if self.size else {},
            "index_lag": self.lag.snapshot() if self.lag else {},
        }


def _layer(mechanism: Any, request: Request, inner: Callable[..., Any]) -> Callable[..., Any]:
    def app(environ: dict[str, Any], start_response: Any) -> Any:
        response = mechanism.handle(request, inner)
        if response is None:
            return inner(environ, start_response)
        start_response(response.status, response.headers)
        return [response.body]

    return app
