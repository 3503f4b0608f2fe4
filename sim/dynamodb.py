"""An in-memory DynamoDB with DynamoDB's semantics: a fake of boto3's low-level client for the operations and
parameters the product uses (docs/simulation.md lists them), on the kernel's virtual time.

``FakeDynamoDB(kernel)`` is handed to the product wherever a ``boto3.client("dynamodb")`` goes. Every request is a
kernel yield point before it applies, applies atomically, and answers after its latency (``sim.faults``: the
harness's ``faults`` hook may throttle it, lose its answer, slow it, lag an index, leave batch entries
unprocessed). Without a kernel it answers at once (unit and differential tests).

For the harness: ``create_table`` (or ``from_template``), ``streams[table]`` (``sim.ddb_streams.StreamLog``),
``sweep(now_s)`` (TTL deletions, when the harness decides), ``capacity.totals`` (``bench.cost_meter.Totals``),
``keep_index_history(seconds)`` (what an index lag may reach back to), ``items(table)``.

Module map: ``ddb_values`` (attribute values) < ``ddb_expressions`` (parser) < ``ddb_eval`` (evaluation) <
``ddb_tables`` (storage, indexes) < ``ddb_state`` (checks, the database) < ``ddb_writes`` / ``ddb_reads`` (the
operations) < this module (the client surface, errors as botocore raises them).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sim import ddb_reads, ddb_writes
from sim.ddb_state import Cancelled, ConditionFailed, Database, Invalid, NotFound
from sim.ddb_streams import StreamLog
from sim.ddb_tables import Table, TableSchema
from sim.ddb_values import Item, copy_item, scalar_key
from sim.faults import FakeService, Fault, FaultHook, aws_error, unknown_parameters
from sim.kernel import Kernel

_EXPRESSION = ("ExpressionAttributeNames", "ExpressionAttributeValues")
_CAPACITY = ("ReturnConsumedCapacity",)
_ITEM_WRITE = ("TableName", "ConditionExpression", "ReturnValuesOnConditionCheckFailure", "ReturnItemCollectionMetrics",
               *_EXPRESSION, *_CAPACITY)
PARAMETERS: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "GetItem": (frozenset({"TableName", "Key", "ConsistentRead", "ProjectionExpression", "ExpressionAttributeNames",
                           *_CAPACITY}), ("TableName", "Key")),
    "PutItem": (frozenset({*_ITEM_WRITE, "Item", "ReturnValues"}), ("TableName", "Item")),
    "UpdateItem": (frozenset({*_ITEM_WRITE, "Key", "UpdateExpression", "ReturnValues"}), ("TableName", "Key")),
    "DeleteItem": (frozenset({*_ITEM_WRITE, "Key", "ReturnValues"}), ("TableName", "Key")),
    "Query": (frozenset({"TableName", "IndexName", "KeyConditionExpression", "FilterExpression", "ProjectionExpression",
                         "Select", "Limit", "ExclusiveStartKey", "ScanIndexForward", "ConsistentRead", *_EXPRESSION,
                         *_CAPACITY}), ("TableName",)),
    "Scan": (frozenset({"TableName", "IndexName", "FilterExpression", "ProjectionExpression", "Select", "Limit",
                        "ExclusiveStartKey", "ConsistentRead", "Segment", "TotalSegments", *_EXPRESSION, *_CAPACITY}),
             ("TableName",)),
    "BatchGetItem": (frozenset({"RequestItems", *_CAPACITY}), ("RequestItems",)),
    "BatchWriteItem": (frozenset({"RequestItems", "ReturnItemCollectionMetrics", *_CAPACITY}), ("RequestItems",)),
    "TransactWriteItems": (frozenset({"TransactItems", "ClientRequestToken", "ReturnItemCollectionMetrics",
                                      *_CAPACITY}), ("TransactItems",)),
    "TransactGetItems": (frozenset({"TransactItems", *_CAPACITY}), ("TransactItems",)),
}


class _Meta:
    region_name = "us-east-1"

    class events:  # noqa: N801 - botocore's attribute name
        @staticmethod
        def register(*_: Any, **__: Any) -> None:
            """botocore event hooks: nothing to hook in the fake."""


class FakeDynamoDB(FakeService):
    service = "dynamodb"
    meta = _Meta()

    def __init__(self, kernel: Kernel | None = None, *, faults: FaultHook | None = None, rng: Any = None,
                 start_ms: int | None = None) -> None:
        super().__init__(kernel, faults=faults, rng=rng)
        self._start_ms = start_ms if start_ms is not None else (kernel.start_ms if kernel else 1_795_348_800_000)
        self.db = Database(self._now_us, self._epoch_ms)
        self.manual_now_us = 0  # virtual time without a kernel (advance it by hand)

    def _now_us(self) -> int:
        return self.kernel.now_us if self.kernel is not None else self.manual_now_us

    def _epoch_ms(self) -> int:
        return self._start_ms + self._now_us() // 1000

    # ---- the harness's side ------------------------------------------------------------------------------

    @property
    def streams(self) -> dict[str, StreamLog]:
        return self.db.streams

    @property
    def capacity(self) -> Any:
        return self.db.capacity

    def add_table(self, schema: TableSchema) -> Table:
        table = self.db.tables[schema.name] = Table(schema)
        if schema.stream_view:
            self.db.streams[schema.name] = StreamLog(schema.name, schema.stream_view, schema.key_names)
        return table

    @classmethod
    def from_template(cls, names: Mapping[str, str], kernel: Kernel | None = None,
                      template: str | Path | None = None, **options: Any) -> FakeDynamoDB:
        """A fake with the tables ``template.yaml`` declares: ``names`` maps a logical id (``QueueTable``) to the
        table's name."""
        path = Path(template) if template else Path(__file__).resolve().parent.parent / "template.yaml"
        tables = _template_tables(str(path), path.stat().st_mtime_ns)
        fake = cls(kernel, **options)
        for logical_id, name in names.items():
            fake.add_table(TableSchema.from_create_table({**tables[logical_id], "TableName": name}))
        return fake

    def keep_index_history(self, seconds: float) -> None:
        """Keep every index's changes for ``seconds`` of virtual time: how far back a lagging read may see."""
        for table in self.db.tables.values():
            for index in table.indexes.values():
                index.history_us = int(seconds * 1_000_000)

    def items(self, table: str) -> list[Item]:
        """Every item of ``table`` (copies), in key order."""
        return [copy_item(item) for _, item in self.db.table(table).scan_order()]

    def sweep(self, now_s: float | None = None, *, table: str | None = None, limit: int | None = None,
              chosen: Callable[[Item], bool] | None = None) -> int:
        """DynamoDB's TTL deletions, when the harness decides (DynamoDB deletes late: minutes to days): items whose
        TTL attribute (epoch seconds, a number) is before ``now_s`` (default: the virtual now), at most ``limit``,
        those ``chosen`` picks. Each leaves a REMOVE stream record with the TTL service's identity; none is billed."""
        now = now_s if now_s is not None else self._epoch_ms() / 1000
        deleted = 0
        for schema_table in [self.db.table(table)] if table else list(self.db.tables.values()):
            attribute = schema_table.schema.ttl_attribute
            if attribute is None:
                continue
            for key, item in list(schema_table.scan_order()):
                expiry = item.get(attribute, {}).get("N")
                if expiry is None or not float(expiry) < now or now - float(expiry) > 5 * 365 * 86400:
                    continue
                if chosen is not None and not chosen(item):
                    continue
                if limit is not None and deleted >= limit:
                    return deleted
                self.db.store(schema_table, key, item, None, ttl=True)
                deleted += 1
        return deleted

    # ---- control plane (what the tests' table helpers call) ----------------------------------------------------

    def create_table(self, **params: Any) -> dict[str, Any]:
        if params.get("TableName") in self.db.tables:
            raise aws_error("ResourceInUseException", f"Table already exists: {params['TableName']}", "CreateTable")
        self.add_table(TableSchema.from_create_table(params))
        return {"TableDescription": self._description(params["TableName"])}

    def update_time_to_live(self, *, TableName: str, TimeToLiveSpecification: Mapping[str, Any]) -> dict[str, Any]:  # noqa: N803
        table = self._table_or_error(TableName, "UpdateTimeToLive")
        attribute = TimeToLiveSpecification["AttributeName"] if TimeToLiveSpecification.get("Enabled") else None
        object.__setattr__(table.schema, "ttl_attribute", attribute)
        return {"TimeToLiveSpecification": dict(TimeToLiveSpecification)}

    def describe_table(self, *, TableName: str) -> dict[str, Any]:  # noqa: N803
        self._table_or_error(TableName, "DescribeTable")
        return {"Table": self._description(TableName)}

    def delete_table(self, *, TableName: str) -> dict[str, Any]:  # noqa: N803
        description = self._description(self._table_or_error(TableName, "DeleteTable").schema.name)
        del self.db.tables[TableName]
        self.db.streams.pop(TableName, None)
        return {"TableDescription": description}

    def _table_or_error(self, name: str, operation: str) -> Table:
        try:
            return self.db.table(name)
        except NotFound as exc:
            raise aws_error("ResourceNotFoundException", str(exc), operation) from None

    def _description(self, name: str) -> dict[str, Any]:
        schema = self.db.table(name).schema

        def keys(hash_key: str, range_key: str | None) -> list[dict[str, str]]:
            return [{"AttributeName": hash_key, "KeyType": "HASH"}] + (
                [{"AttributeName": range_key, "KeyType": "RANGE"}] if range_key else [])

        description: dict[str, Any] = {
            "TableName": name, "TableStatus": "ACTIVE", "KeySchema": keys(schema.hash_key, schema.range_key),
            "AttributeDefinitions": [{"AttributeName": n, "AttributeType": t} for n, t in schema.types.items()],
            "ItemCount": len(self.db.table(name).items),
        }
        if schema.indexes:
            description["GlobalSecondaryIndexes"] = [
                {"IndexName": i.name, "KeySchema": keys(i.hash_key, i.range_key), "IndexStatus": "ACTIVE",
                 "Projection": {"ProjectionType": i.projection, **({"NonKeyAttributes": list(i.non_key)}
                                                                   if i.non_key else {})}}
                for i in schema.indexes]
        if schema.stream_view:
            description["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": schema.stream_view}
            description["LatestStreamArn"] = self.db.streams[name].arn
        return description

    # ---- the data plane --------------------------------------------------------------------------------------

    def get_item(self, **params: Any) -> dict[str, Any]:
        return self._serve("GetItem", params, ddb_writes.get_item)

    def put_item(self, **params: Any) -> dict[str, Any]:
        return self._serve("PutItem", params, ddb_writes.put_item)

    def update_item(self, **params: Any) -> dict[str, Any]:
        return self._serve("UpdateItem", params, ddb_writes.update_item)

    def delete_item(self, **params: Any) -> dict[str, Any]:
        return self._serve("DeleteItem", params, ddb_writes.delete_item)

    def query(self, **params: Any) -> dict[str, Any]:
        return self._serve("Query", params, ddb_reads.query)

    def scan(self, **params: Any) -> dict[str, Any]:
        return self._serve("Scan", params, ddb_reads.scan)

    def batch_get_item(self, **params: Any) -> dict[str, Any]:
        return self._serve("BatchGetItem", params, lambda db, p, f: ddb_reads.batch_get_item(db, p, f, self.rng))

    def batch_write_item(self, **params: Any) -> dict[str, Any]:
        return self._serve("BatchWriteItem", params, lambda db, p, f: ddb_writes.batch_write_item(db, p, f, self.rng))

    def transact_write_items(self, **params: Any) -> dict[str, Any]:
        return self._serve("TransactWriteItems", params, ddb_writes.transact_write_items)

    def transact_get_items(self, **params: Any) -> dict[str, Any]:
        return self._serve("TransactGetItems", params, ddb_reads.transact_get_items)

    def _serve(self, operation: str, params: dict[str, Any],
               run: Callable[[Database, Mapping[str, Any], Fault | None], dict[str, Any]]) -> dict[str, Any]:
        allowed, required = PARAMETERS[operation]
        unknown_parameters(operation, params, allowed, required)

        def answer(fault: Fault | None) -> dict[str, Any]:
            try:
                response = run(self.db, params, fault)
            except ConditionFailed as exc:
                members = {"Item": exc.item} if exc.item is not None else {}
                raise aws_error("ConditionalCheckFailedException", str(exc), operation, **members) from None
            except Cancelled as exc:
                raise aws_error("TransactionCanceledException", str(exc), operation, Message=str(exc),
                                CancellationReasons=exc.reasons) from None
            except Invalid as exc:
                raise aws_error("ValidationException", str(exc), operation) from None
            except NotFound as exc:
                raise aws_error("ResourceNotFoundException", str(exc), operation) from None
            response["ResponseMetadata"] = {"RequestId": f"SIM{self.requests:08d}", "HTTPStatusCode": 200,
                                            "RetryAttempts": 0}
            return response

        return self.serve(operation, params, answer)

    def error_for(self, code: str, operation: str, params: Mapping[str, Any]) -> Exception:
        """A TransactionConflictException on TransactWriteItems is a cancellation naming one item, as DynamoDB
        answers a transaction that met another one."""
        if operation == "TransactWriteItems" and code == "TransactionConflictException":
            count = len(params.get("TransactItems") or [None])
            culprit = self.rng.randrange(count)
            reasons = [{"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
                       if i == culprit else {"Code": "None"} for i in range(count)]
            cancelled = Cancelled(reasons)
            return aws_error("TransactionCanceledException", str(cancelled), operation, Message=str(cancelled),
                             CancellationReasons=reasons)
        return aws_error(code, None, operation)


@functools.lru_cache(maxsize=8)
def _template_tables(path: str, _mtime_ns: int) -> dict[str, dict[str, Any]]:
    """The DynamoDB tables' properties a template declares, parsed once per file version (a parse takes ~0.1 s)."""
    from cfnlint.decode import decode

    parsed, errors = decode(path)
    if errors:
        raise ValueError(f"{path} does not parse: {errors}")
    return {logical_id: json.loads(json.dumps(resource["Properties"], default=str))
            for logical_id, resource in parsed["Resources"].items()
            if resource.get("Type") == "AWS::DynamoDB::Table"}


def key_text(item: Mapping[str, Any], key_names: tuple[str, ...]) -> str:
    """A key as text (for messages and sorting in tests)."""
    return "/".join(str(scalar_key(item[n])) for n in key_names)
