"""DynamoDB's item answers written as JSON directly: the document moto 5.2.5's serializer writes, without its walk.

moto serializes a response by walking botocore's model of it and looking each member of each AttributeValue up
under half a dozen aliases (``moto.core.serialize``). For the answers that carry items -- GetItem, PutItem,
UpdateItem, DeleteItem, Query, Scan, BatchGetItem, BatchWriteItem, TransactWriteItems -- that walk was a quarter of
in-process moto's time in the integration tests (py-spy) and a twentieth of the emulator's. Here each answer is
written member by member from what the handler returned; a member or value the direct path does not know (an
attribute value of no known type, non-empty ItemCollectionMetrics, pretty-printed responses, a response transformer) leaves
the whole answer to moto's serializer. ``tests/unit/test_local_item_responses.py`` compares both on every
operation. ``attribute_map`` and ``Unknown`` serve the streams' GetRecords too (``moto_patches``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any


class Unknown(Exception):
    """Something the direct path does not write as moto would: moto's serializer writes it."""


def text(value: Any) -> str:  # JSONSerializer._serialize_type_string
    if value is None or isinstance(value, (dict, list)):
        raise Unknown(value)
    return str(value)


def blob(value: Any) -> str:  # ResponseSerializer._base64
    if isinstance(value, str):
        value = value.encode("utf-8")
    if not isinstance(value, bytes):
        raise Unknown(value)
    return base64.b64encode(value).strip().decode("utf-8")


def attribute_value(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or len(value) != 1:
        raise Unknown(value)
    (kind, content), = value.items()
    if content is None:
        raise Unknown(value)
    if kind in ("S", "N"):
        return {kind: text(content)}
    if kind == "B":
        return {kind: blob(content)}
    if kind in ("SS", "NS"):
        return {kind: [text(v) for v in content]}
    if kind == "BS":
        return {kind: [blob(v) for v in content]}
    if kind == "M":
        return {kind: attribute_map(content)}
    if kind == "L":
        return {kind: [attribute_value(v) for v in content]}
    if kind in ("NULL", "BOOL") and isinstance(content, bool):
        return {kind: content}
    raise Unknown(value)


def attribute_map(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Unknown(value)
    return {name: attribute_value(v) for name, v in value.items()}


def _items(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise Unknown(value)
    return [attribute_map(item) for item in value]


def _number(value: Any) -> float:  # the Capacity shape's members are doubles
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Unknown(value)
    return float(value)


def _struct(members: dict[str, Callable[[Any], Any]], ignored: frozenset[str] | set[str] = frozenset()
            ) -> Callable[[Any], dict[str, Any]]:
    """A structure of known members, in the model's order as moto's serializer writes them (None members left out);
    ``ignored``: keys moto's handler returns that are no member (its serializer drops them); any other: Unknown."""
    known = members.keys() | ignored

    def write(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict) or not value.keys() <= known:
            raise Unknown(value)
        return {name: write_member(value[name]) for name, write_member in members.items()
                if value.get(name) is not None}
    return write


def _map_of(write_value: Callable[[Any], Any]) -> Callable[[Any], dict[str, Any]]:
    def write(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise Unknown(value)
        return {text(name): write_value(v) for name, v in value.items()}
    return write


def _list_of(write_value: Callable[[Any], Any]) -> Callable[[Any], list[Any]]:
    def write(value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise Unknown(value)
        return [write_value(v) for v in value]
    return write


def _nothing(value: Any) -> dict[str, Any]:
    """ItemCollectionMetrics (tables with local secondary indexes, which the queue's tables have not): only empty."""
    if value != {}:
        raise Unknown(value)
    return {}


_capacity = _struct({"ReadCapacityUnits": _number, "WriteCapacityUnits": _number, "CapacityUnits": _number})
_consumed = _struct({"TableName": text, "CapacityUnits": _number, "ReadCapacityUnits": _number,
                     "WriteCapacityUnits": _number, "Table": _capacity,
                     "LocalSecondaryIndexes": _map_of(_capacity), "GlobalSecondaryIndexes": _map_of(_capacity)})
_keys_and_attributes = _struct({"Keys": _items, "AttributesToGet": _list_of(text), "ConsistentRead": bool,
                                "ProjectionExpression": text, "ExpressionAttributeNames": _map_of(text)})
_write_request = _struct({"PutRequest": _struct({"Item": attribute_map}),
                          "DeleteRequest": _struct({"Key": attribute_map})})

# The output members of each operation the direct path writes (botocore's dynamodb model, 2012-08-10).
OUTPUTS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "GetItem": _struct({"Item": attribute_map, "ConsumedCapacity": _consumed}),
    "PutItem": _struct({"Attributes": attribute_map, "ConsumedCapacity": _consumed, "ItemCollectionMetrics": _nothing}),
    "UpdateItem": _struct({"Attributes": attribute_map, "ConsumedCapacity": _consumed, "ItemCollectionMetrics": _nothing}),
    # moto's DeleteItem also returns ConsumedCapacityUnits, no member of the model: its serializer leaves it out.
    "DeleteItem": _struct({"Attributes": attribute_map, "ConsumedCapacity": _consumed, "ItemCollectionMetrics": _nothing},
                          ignored={"ConsumedCapacityUnits"}),
    "Query": _struct({"Items": _items, "Count": int, "ScannedCount": int, "LastEvaluatedKey": attribute_map,
                      "ConsumedCapacity": _consumed}),
    "Scan": _struct({"Items": _items, "Count": int, "ScannedCount": int, "LastEvaluatedKey": attribute_map,
                     "ConsumedCapacity": _consumed}),
    "BatchGetItem": _struct({"Responses": _map_of(_items), "UnprocessedKeys": _map_of(_keys_and_attributes),
                             "ConsumedCapacity": _list_of(_consumed)}),
    "BatchWriteItem": _struct({"UnprocessedItems": _map_of(_list_of(_write_request)),
                               "ItemCollectionMetrics": _nothing, "ConsumedCapacity": _list_of(_consumed)}),
    "TransactWriteItems": _struct({"ConsumedCapacity": _list_of(_consumed), "ItemCollectionMetrics": _nothing}),
}


def direct_body(operation: str, result: Any) -> str | None:
    """The JSON body of ``operation``'s answer ``result`` (a handler's ActionResult.result), or None when moto's
    serializer must write it."""
    write = OUTPUTS.get(operation)
    if write is None:
        return None
    try:
        return json.dumps(write(result))
    except Unknown:
        return None


def serializer_is_plain(handler: Any) -> bool:
    """Whether moto would write ``handler``'s answer as plain JSON (no pretty-printing, no response transformer): only
    then does a direct path write what it writes."""
    from moto import settings

    return not settings.PRETTIFY_RESPONSES and not getattr(handler, "RESPONSE_KEY_PATH_TO_TRANSFORMER", None)


def patch_item_responses() -> Callable[[], None]:
    """Let DynamoDB's item answers skip moto's serializer (see the module's docstring). Returns the undo."""
    from moto.core.responses import ActionResult
    from moto.dynamodb.responses import DynamoHandler, DynamoResult

    had_own = "serialized" in vars(DynamoHandler)
    original = DynamoHandler.serialized

    def serialized(self: Any, action_result: Any) -> Any:
        if type(action_result) in (ActionResult, DynamoResult) and serializer_is_plain(self):
            body = direct_body(self._get_action(), action_result.result)
            if body is not None:
                headers = {"Content-Type": "application/x-amz-json-1.0"}
                headers.update(self.response_headers)
                return 200, headers, body
        return original(self, action_result)

    DynamoHandler.serialized = serialized  # type: ignore[method-assign]

    def undo() -> None:
        if had_own:
            DynamoHandler.serialized = original  # type: ignore[method-assign]
        else:
            del DynamoHandler.serialized

    return undo
