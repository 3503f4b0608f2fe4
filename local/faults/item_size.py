"""DynamoDB's item-size limit, enforced as DynamoDB enforces it: an item may not be over 400 KB (409,600 bytes),
counting attribute names and values as DynamoDB counts them; a write whose resulting item would be larger is
refused with ``ValidationException`` and nothing of it is applied.

- PutItem, and the puts of BatchWriteItem and TransactWriteItems: the item is measured before moto sees it
  (``Item size has exceeded the maximum allowed size``; a BatchWriteItem is refused whole, as DynamoDB does).
- UpdateItem, and the updates of TransactWriteItems: the resulting item is only known once the update ran, so
  the touched items (and the length of their table's stream) are copied first; if an item comes out too large,
  every touched item is put back and the stream records written meanwhile dropped, and the request is refused
  (``Item size to update has exceeded the maximum allowed size``; a transaction is cancelled with a
  ``ValidationError`` reason on that item).

moto's own check (405,000 bytes by its own count, raised halfway through an UpdateItem, whose earlier actions
stay applied) is switched off while this is on, so there is one limit and it is DynamoDB's.
"""

from __future__ import annotations

import base64
import copy
from collections import Counter
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from local.faults.wsgi_request import (
    Request,
    Response,
    backend,
    call_app,
    dynamodb_error,
    get_item,
    set_item,
    slot,
    table_of,
    writes_of,
)

LIMIT_BYTES = 400 * 1024
PUT_MESSAGE = "Item size has exceeded the maximum allowed size"
UPDATE_MESSAGE = "Item size to update has exceeded the maximum allowed size"


def value_size(value: dict[str, Any]) -> int:
    """The size DynamoDB counts for one attribute value (low-level JSON form)."""
    (kind, content), = value.items()
    if kind == "S":
        return len(content.encode("utf-8"))
    if kind == "N":
        return number_size(content)
    if kind == "B":
        return len(base64.b64decode(content)) if isinstance(content, str) else len(content)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(v.encode("utf-8")) for v in content)
    if kind == "NS":
        return sum(number_size(v) for v in content)
    if kind == "BS":
        return sum(len(base64.b64decode(v)) if isinstance(v, str) else len(v) for v in content)
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in content)
    if kind == "M":
        return 3 + sum(1 + len(k.encode("utf-8")) + value_size(v) for k, v in content.items())
    raise ValueError(f"not an attribute value: {value!r}")


def number_size(text: str) -> int:
    """About 1 byte per two significant digits, plus 1 (DynamoDB's rule for numbers)."""
    try:
        digits = Decimal(str(text)).normalize().as_tuple().digits
    except InvalidOperation:
        return len(str(text))
    significant = len(digits) if digits != (0,) else 1
    return (significant + 1) // 2 + 1


def item_size(attributes: dict[str, Any]) -> int:
    """The size of an item: the UTF-8 length of each attribute name plus the size of its value."""
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in attributes.items())


def switch_off_motos_check() -> Callable[[], None]:
    from moto.dynamodb.models import dynamo_type

    original = dynamo_type.LimitedSizeDict.__setitem__
    dynamo_type.LimitedSizeDict.__setitem__ = dict.__setitem__  # type: ignore[method-assign,assignment]

    def undo() -> None:
        dynamo_type.LimitedSizeDict.__setitem__ = original  # type: ignore[method-assign]

    return undo


class ItemSizeLimit:
    def __init__(self, limit_bytes: int = LIMIT_BYTES) -> None:
        self.limit = limit_bytes
        self.stats: Counter[str] = Counter()
        self._undo = switch_off_motos_check()

    def close(self) -> None:
        self._undo()

    def handle(self, request: Request, app: Callable[..., Any]) -> Response | None:
        if request.service != "dynamodb" or request.operation not in (
                "PutItem", "UpdateItem", "BatchWriteItem", "TransactWriteItems"):
            return None
        dynamodb = backend(request)
        writes = writes_of(request, dynamodb)
        for write in writes:
            if write.kind == "Put" and write.item is not None and item_size(write.item) > self.limit:
                return self._refuse(request, PUT_MESSAGE, write.position)
        updates = [w for w in writes if w.kind == "Update"]
        if not updates:
            return None
        # Copies of every touched item and of the length of each touched table's stream, to undo the request.
        saved = []
        streams: dict[int, tuple[Any, int]] = {}
        for write in writes:
            table = table_of(dynamodb, write.table)
            where = slot(table, write.key)
            saved.append((table, where, copy.deepcopy(get_item(table, where))))
            if table.stream_shard is not None:
                streams.setdefault(id(table), (table.stream_shard, len(table.stream_shard.items)))
        response = call_app(app, request.environ)
        if not response.ok:
            return response
        for write in writes:
            if write.kind != "Update":
                continue
            table = table_of(dynamodb, write.table)
            item = get_item(table, slot(table, write.key))
            if item is not None and item_size(item.to_json()["Attributes"]) > self.limit:
                for table, where, before in saved:
                    set_item(table, where, before)
                for shard, length in streams.values():
                    del shard.items[length:]
                return self._refuse(request, UPDATE_MESSAGE, write.position)
        return response

    def _refuse(self, request: Request, message: str, position: int) -> Response:
        self.stats[f"{request.operation}"] += 1
        if request.operation != "TransactWriteItems":
            return dynamodb_error("ValidationException", message)
        count = len(request.json.get("TransactItems") or [])
        reasons: list[dict[str, Any]] = [{"Code": "None"} for _ in range(count)]
        if 0 <= position < count:
            reasons[position] = {"Code": "ValidationError", "Message": message}
        codes = ", ".join(r["Code"] for r in reasons)
        return dynamodb_error("TransactionCanceledException",
                              f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]",
                              400, CancellationReasons=reasons)

    def snapshot(self) -> dict[str, int]:
        return {f"refused_{k}": v for k, v in self.stats.items()}
