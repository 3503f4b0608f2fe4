"""How a look reads the ReadyIndex: what it still misses (``Need``), and the first pages of a fair look's partitions
read side by side (``FirstPages``).

A fair look serves the groups of the ring round-robin, one candidate from each in turn; with a few candidates wanted
and most groups empty or nearly, its first round reads every group of the turn anyway, one query after another: six
or so sequential requests a look in the tenants scenario. Started together, those first pages cost the same reads and
one request's wait. A group's partition read only for a look that filled up on the groups before it is the price
(index entries are small: half a read unit each such query)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

# The most entries one index read of a look asks for (a look wants PAGE_SIZE or a lane window: tens of entries).
MAX_QUERY_LIMIT = 100
# First pages in flight at once for one store (one process): a look's groups beyond these wait for a thread.
FIRST_PAGE_THREADS = 8


class Need:
    """How many entries one look still misses; each index read it drives asks for that many (at most
    MAX_QUERY_LIMIT). A look stops reading once none is missing, so a read always misses at least one."""

    def __init__(self, wanted: int) -> None:
        self.left = wanted

    def page(self) -> int:
        return max(1, min(MAX_QUERY_LIMIT, self.left))


def page_request(
    table: str, index: str, partition: str, *, newest_first: bool, until: str | None = None, limit: int | None = None
) -> dict[str, Any]:
    """A Query of one ReadyIndex partition, newest key first or oldest, up to ``until`` (a delayed partition's due
    entries)."""
    condition = "readyKey = :k" + (" AND readySort <= :until" if until is not None else "")
    values: dict[str, Any] = {":k": {"S": partition}}
    if until is not None:
        values[":until"] = {"S": until}
    request: dict[str, Any] = {
        "TableName": table,
        "IndexName": index,
        "KeyConditionExpression": condition,
        "ExpressionAttributeValues": values,
        "ScanIndexForward": not newest_first,
    }
    if limit is not None:
        request["Limit"] = max(1, min(MAX_QUERY_LIMIT, limit))
    return request


class FirstPages:
    """Index queries started before their turn: ``start`` sends one on a small pool and returns its future, which the
    partition's reader takes as its first response (its errors raised there, as a query's own would be)."""

    def __init__(self, call: Callable[..., dict[str, Any]]) -> None:
        self._call = call
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def start(self, request: dict[str, Any]) -> Future[dict[str, Any]]:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=FIRST_PAGE_THREADS, thread_name_prefix="first-page")
            return self._pool.submit(self._call, "query", **request)
