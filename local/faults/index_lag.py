"""Global secondary indexes that see writes late, as DynamoDB's GSIs do (they are updated asynchronously).

Every item write to a table with a lagged index is remembered for ``lag`` seconds: the item as it was just
before the write, and when. A Query or Scan on a lagged GSI is then answered from the table as it was ``lag``
seconds ago: for the duration of that one request (inside the emulator's request lock) each item written since
is put back as it was before its first write since then (or taken out if it did not exist), moto answers, and
the items are put back as they are. So an entry written in the last ``lag`` seconds is not seen yet, and the
stale entry of a task claimed (or deleted) meanwhile is still returned, with its old projected attributes --
what a real GSI does. Reads of the table itself (GetItem, a Query without IndexName) stay strongly consistent.

Writes made before the lag was switched on are not remembered: the lag applies from then on.
"""

from __future__ import annotations

import copy
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from local.faults.wsgi_request import (
    WRITES,
    Request,
    Response,
    backend,
    call_app,
    get_item,
    set_item,
    slot,
    table_of,
    writes_of,
)


class IndexLag:
    def __init__(self, seconds: float, indexes: tuple[str, ...] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = float(seconds)
        self.indexes = set(indexes) if indexes is not None else None
        self._clock = clock
        # table name -> deque of (time of the write, slot key, (hash, range) slot, item before the write or None)
        self._history: dict[str, deque[tuple[float, Any, tuple[Any, Any], Any]]] = {}
        self.stats: Counter[str] = Counter()

    @property
    def active(self) -> bool:
        return self.seconds > 0

    def _lagged(self, table: Any, index_name: str | None = None) -> bool:
        names = {index.name for index in (table.global_indexes or [])}
        if index_name is not None:
            return index_name in names and (self.indexes is None or index_name in self.indexes)
        return bool(names if self.indexes is None else names & self.indexes)

    def handle(self, request: Request, app: Callable[..., Any]) -> Response | None:
        """Answers a lagged index read, or runs a write remembering what it overwrote; None: not concerned."""
        if request.service != "dynamodb":
            return None
        if request.operation in ("Query", "Scan") and request.json.get("IndexName"):
            return self._read(request, app)
        if request.operation in WRITES:
            return self._write(request, app)
        return None

    def _write(self, request: Request, app: Callable[..., Any]) -> Response | None:
        dynamodb = backend(request)
        before = []
        for write in writes_of(request, dynamodb):
            table = table_of(dynamodb, write.table)
            if table is None or not self._lagged(table):
                continue
            where = slot(table, write.key)
            before.append((write.table, where, copy.deepcopy(get_item(table, where))))
        if not before:
            return None
        response = call_app(app, request.environ)
        now = self._clock()
        # Remembered whether the write was applied or not: "as it was before" is right either way.
        for table_name, where, item in before:
            history = self._history.setdefault(table_name, deque())
            history.append((now, _key(where), where, item))
            while history and history[0][0] < now - self.seconds - 1.0:
                history.popleft()
        return response

    def _read(self, request: Request, app: Callable[..., Any]) -> Response | None:
        dynamodb = backend(request)
        table = table_of(dynamodb, request.json.get("TableName"))
        if table is None or not self._lagged(table, request.json["IndexName"]):
            return None
        history = self._history.get(table.name)
        since = self._clock() - self.seconds
        restore: dict[Any, tuple[tuple[Any, Any], Any]] = {}
        if history:
            for written_at, key, where, item in reversed(history):
                if written_at <= since:
                    break
                restore[key] = (where, item)  # walking back: the earliest write after `since` is kept last
        self.stats["lagged_reads"] += 1
        if not restore:
            return call_app(app, request.environ)
        self.stats["items_shown_as_before"] += len(restore)
        current = [(where, get_item(table, where)) for where, _ in restore.values()]
        try:
            for where, item in restore.values():
                set_item(table, where, item)
            return call_app(app, request.environ)
        finally:
            for where, item in current:
                set_item(table, where, item)

    def snapshot(self) -> dict[str, int]:
        return dict(self.stats)


def _key(where: tuple[Any, Any]) -> Any:
    hash_value, range_value = where
    return (hash_value.type, str(hash_value.value),
            None if range_value is None else (range_value.type, str(range_value.value)))
