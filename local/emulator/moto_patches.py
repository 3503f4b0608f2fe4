"""Patches of moto 5.2.5 (DynamoDB, SNS), applied in the emulator's server process (``local/emulator/server.py``):
``patch_transactions`` (TransactWriteItems without copying whole tables), ``patch_comparisons`` (sorts and
comparisons on native values), ``patch_stream_records`` (GetRecords written without moto's generic serializer),
``patch_sns_signing_key`` (one key signs every subscription's messages) and ``patch_dispatch_lookups`` (a host's
service and a handler's actions found once). Each returns its undo. Query and Scan from sorted indexes:
``local/emulator/index_reads.py``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def patch_transactions() -> Callable[[], None]:
    """Make moto's TransactWriteItems cost what its items cost, not what the whole table costs.

    Why: moto 5.2.5's ``transact_write_items`` deep-copies every table the transaction touches -- items,
    indexes and every stream record accumulated since the table was made -- so that it can roll back if an
    item's condition fails. A few hundred writes into a run, each transaction takes 1-2 s (the matcher's
    concurrency test and the call-center demo run thousands of them).

    What instead: under the global request lock nothing can change between a check and a write, so
    1. every item is checked first: one operation per entry, no item twice in one transaction (moto's
       ``MultipleTransactionsException``), and each ``ConditionExpression`` against the current item; a
       failing condition cancels the transaction with moto's own exception and reasons before anything is
       written;
    2. only a transaction whose conditions all hold is applied -- by moto's own code, with its table copy
       turned off -- after a copy of just the touched items and the length of each touched table's stream;
       should applying fail after all (an invalid update expression, say), those items are put back and
       the stream records written meanwhile dropped, as moto's table-level rollback would, and the error
       raised.
    Returns the undo (the server process never undoes it; in-process users may).
    """
    from moto.dynamodb import models
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import (
        ConditionalCheckFailed,
        MultipleTransactionsException,
        TransactionCanceledException,
    )
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    from local.faults.wsgi_request import set_item

    original = models.DynamoDBBackend.transact_write_items
    real_copy = models.copy

    class _KeepTables:
        """``copy`` as moto's module sees it while a checked transaction is applied: tables are not copied."""

        @staticmethod
        def deepcopy(value: Any, memo: Any = None) -> Any:
            return value if isinstance(value, Table) else real_copy.deepcopy(value, memo)

    def key_of(table: Any, op_type: str, op: dict[str, Any]) -> dict[str, Any]:
        source = op["Item"] if op_type == "Put" else op["Key"]
        key = {table.hash_key_attr: source[table.hash_key_attr]}
        if table.range_key_attr is not None:
            key[table.range_key_attr] = source[table.range_key_attr]
        return key

    def dynamo_key(table: Any, key: dict[str, Any]) -> tuple[Any, Any]:
        hash_value = DynamoType(key[table.hash_key_attr])
        range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr is not None else None
        return hash_value, range_value

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        if len(transact_items) > 100 or any(len(entry) != 1 for entry in transact_items):
            return original(self, transact_items)  # moto's own errors for these
        reasons: list[tuple[Any, Any, Any]] = []
        seen: set[tuple[str, str]] = set()
        touched: list[tuple[Any, dict[str, Any]]] = []
        for entry in transact_items:
            op_type, op = next(iter(entry.items()))
            if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
                return original(self, transact_items)
            table = self.get_table(op["TableName"])
            try:
                key = key_of(table, op_type, op)
            except KeyError:
                return original(self, transact_items)  # a key attribute missing: moto's own reason
            unique = (str(op["TableName"]), str(dict(sorted(key.items()))))
            if unique in seen:
                raise MultipleTransactionsException()
            seen.add(unique)
            touched.append((table, key))
            condition = op.get("ConditionExpression")
            if condition is not None:
                current = self.get_item(op["TableName"], key)
                check = get_filter_expression(condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues"))
                if not check.expr(current):
                    old = None
                    if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current is not None:
                        old = current.to_json()["Attributes"]
                    reasons.append(("ConditionalCheckFailed", ConditionalCheckFailed().message, old))
                    continue
            reasons.append((None, None, None))
        if any(code is not None for code, _, _ in reasons):
            raise TransactionCanceledException(reasons)
        # Rollback data: the touched items as they are, and how long each touched stream is.
        saved = []
        for table, key in touched:
            hash_value, range_value = dynamo_key(table, key)
            saved.append((table, hash_value, range_value, real_copy.deepcopy(table.get_item(hash_value, range_value))))
        streams = {id(t): (t.stream_shard, len(t.stream_shard.items)) for t, _ in touched if t.stream_shard is not None}
        models.copy = _KeepTables  # type: ignore[assignment]
        try:
            return original(self, transact_items)
        except Exception:
            for table, hash_value, range_value, item in saved:
                set_item(table, (hash_value, range_value), item)
            for shard, length in streams.values():
                del shard.items[length:]
            raise
        finally:
            models.copy = real_copy

    models.DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]

    def undo() -> None:
        models.DynamoDBBackend.transact_write_items = original  # type: ignore[method-assign]

    return undo


def patch_comparisons() -> Callable[[], None]:
    """Make moto sort items by native values, and compare strings as strings, instead of casting both sides of
    every ``DynamoType`` comparison.

    Why: every Query of a global secondary index in moto 5.2.5 sorts the whole table (``Table.all_items``),
    compares each item's index key with the query's (``DynamoType.__ne__``) and sorts the matches
    (``Table.sorted_items``), each comparison casting both values: with 2,000 items a ReadyIndex query held the
    server's one lock ~40 ms, and a few workers polling the index saturated it. The same orders, by a key
    computed once per item (numbers as Decimal, strings as str -- the same order as DynamoDB's UTF-8 bytes --
    binaries as bytes), and string equality without the cast, cost a fraction of that. Returns the undo.
    """
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    from local.emulator.table_index import order_key as native

    original_all, original_sorted = Table.all_items, Table.sorted_items
    original_eq, original_ne = DynamoType.__eq__, DynamoType.__ne__

    def eq(self: Any, other: Any) -> bool:
        if self.type == "S" and getattr(other, "type", None) == "S":
            return bool(self.value == other.value)
        return bool(original_eq(self, other))

    def ne(self: Any, other: Any) -> bool:
        if self.type == "S" and getattr(other, "type", None) == "S":
            return bool(self.value != other.value)
        return bool(original_ne(self, other))

    def all_items(self: Any) -> list[Any]:
        items: list[Any] = []
        for hash_set in self.items.values():
            if self.range_key_attr:
                items.extend(hash_set.values())
            else:
                items.append(hash_set)
        return sorted(items, key=lambda item: (native(item.hash_key), native(item.range_key)))

    def sorted_items(self: Any, hash_key_attrs: list[str], range_key_attrs: list[str | None], items: list[Any]) -> list[Any]:
        attrs = self._generate_attr_to_sort_by(hash_key_attrs, range_key_attrs)
        items.sort(key=lambda item: tuple(native(item.attrs.get(name)) for name in attrs))
        return items

    Table.all_items = all_items  # type: ignore[method-assign]
    Table.sorted_items = sorted_items  # type: ignore[method-assign]
    DynamoType.__eq__ = eq  # type: ignore[method-assign,assignment]
    DynamoType.__ne__ = ne  # type: ignore[method-assign,assignment]

    def undo() -> None:
        Table.all_items = original_all  # type: ignore[method-assign]
        Table.sorted_items = original_sorted  # type: ignore[method-assign]
        DynamoType.__eq__ = original_eq  # type: ignore[method-assign]
        DynamoType.__ne__ = original_ne  # type: ignore[method-assign]

    return undo


def patch_stream_records() -> Callable[[], None]:
    """Write DynamoDB Streams' GetRecords answer as JSON directly, byte for byte what moto's serializer writes.

    Why: moto 5.2.5 serializes a response by walking botocore's model of it and looking each member of each
    AttributeValue up under half a dozen aliases; a GetRecords of 1,000 task records took the emulator 2.5-3.6 s
    (py-spy: 99% in ``ResponseSerializer``), more than writing the tasks had. The engine's stream reader reads every
    record once, so while the local stack was filled through BatchWriteItem about two thirds of the emulator's time
    went there. Here the same body, in the model's member order, costs a few microseconds a record; anything the
    direct path does not know (a record with a user identity, an attribute value of no known type, pretty-printed
    responses) is left to moto's serializer. Returns the undo."""
    import datetime as dt
    import json

    from moto.core.responses import ActionResult
    from moto.core.serialize import TimestampSerializer
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

    from local.emulator.item_responses import Unknown, attribute_map, serializer_is_plain, text

    original = DynamoDBStreamsHandler.get_records

    def stream_record(value: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        created = value.get("ApproximateCreationDateTime")
        if created is not None:
            if not isinstance(created, dt.datetime):
                raise Unknown(created)
            out["ApproximateCreationDateTime"] = TimestampSerializer._timestamp_unixtimestamp(created)
        for name in ("Keys", "NewImage", "OldImage"):
            if value.get(name) is not None:
                out[name] = attribute_map(value[name])
        if value.get("SequenceNumber") is not None:
            out["SequenceNumber"] = text(value["SequenceNumber"])
        if value.get("SizeBytes") is not None:
            out["SizeBytes"] = int(value["SizeBytes"])
        if value.get("StreamViewType") is not None:
            out["StreamViewType"] = text(value["StreamViewType"])
        return out

    def record(value: dict[str, Any]) -> dict[str, Any]:
        if value.get("userIdentity") is not None:
            raise Unknown(value)
        out = {name: text(value[name]) for name in ("eventID", "eventName", "eventVersion", "eventSource", "awsRegion")
               if value.get(name) is not None}
        if value.get("dynamodb") is not None:
            out["dynamodb"] = stream_record(value["dynamodb"])
        return out

    def get_records(self: Any) -> Any:
        arn = self._get_param("ShardIterator")
        limit = self._get_param("Limit")
        if limit is None:
            limit = 1000
        result = self.backend.get_records(arn, limit)
        if not serializer_is_plain(self):
            return ActionResult(result)
        try:
            body = {"Records": [record(r) for r in result["Records"]]}
            if result.get("NextShardIterator") is not None:
                body["NextShardIterator"] = text(result["NextShardIterator"])
        except Unknown:
            return ActionResult(result)
        return 200, {"Content-Type": "application/x-amz-json-1.0"}, json.dumps(body)

    DynamoDBStreamsHandler.get_records = get_records  # type: ignore[method-assign]

    def undo() -> None:
        DynamoDBStreamsHandler.get_records = original  # type: ignore[method-assign]

    return undo


def patch_sns_signing_key() -> Callable[[], None]:
    """One RSA key for every SNS subscription of the process, made once.

    Why: moto 5.2.5 signs each SNS message it puts on a subscribed SQS queue with a 2,048-bit key of the
    subscription's own, generated at its first message (50-100 ms of CPU). The engine subscribes a queue per
    function subscription of every stack it starts, so each stack paid it again (py-spy: 2 % of the integration
    tests' time). Nothing checks the signature here. Returns the undo."""
    import functools

    from cryptography.hazmat.primitives.asymmetric import rsa
    from moto.sns.models import Subscription

    original = Subscription.private_key

    @functools.cache
    def shared_key() -> rsa.RSAPrivateKey:
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)

    Subscription.private_key = lambda self: shared_key()  # type: ignore[method-assign]

    def undo() -> None:
        Subscription.private_key = original  # type: ignore[method-assign]

    return undo


def patch_dispatch_lookups() -> Callable[[], None]:
    """Two lookups moto 5.2.5 repeats for every request, remembered: a host's service and a handler's actions.

    Why: the server (``DomainDispatcherApplication.get_backend_for_host``) lists moto's package folder (``os.listdir``
    and an ``isdir`` for each of ~150 entries), then tries its URL patterns one by one until one matches; and every
    request, in process too, lists its handler class's methods (``inspect.getmembers``) to find its action. py-spy put
    5 % and 2 % of the emulator's CPU there in the 8-worker reliability scenario. The answers depend on the host and
    the class alone (neither the folder, the patterns nor the classes change while the process runs). Returns the
    undo."""
    import functools

    from moto.core import responses
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    original = DomainDispatcherApplication.get_backend_for_host
    original_names = responses.method_names_from_class
    known: dict[str | None, Any] = {}

    def get_backend_for_host(self: Any, host: str | None) -> Any:
        if host not in known:  # called under the dispatcher's own lock
            known[host] = original(self, host)
        return known[host]

    DomainDispatcherApplication.get_backend_for_host = get_backend_for_host  # type: ignore[method-assign]
    # Its one caller only asks whether an action is among the names.
    responses.method_names_from_class = functools.cache(original_names)

    def undo() -> None:
        DomainDispatcherApplication.get_backend_for_host = original  # type: ignore[method-assign]
        responses.method_names_from_class = original_names

    return undo
