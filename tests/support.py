"""Test helpers shared by the unit and integration suites: the template's table, handler loading, fakes."""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

from cfnlint.decode import decode

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template.yaml"


def template(*, billing_as_deployed: bool = True) -> dict[str, Any]:
    """template.yaml as cfn-lint decodes it: a copy of the one parse of this process and version of the file (a
    parse costs 25-100 ms and the suite asks for it hundreds of times), so a caller may change what it gets.
    ``billing_as_deployed``: the tables' capacity settings resolved for the default ``BillingMode``
    (PAY_PER_REQUEST: no ProvisionedThroughput), so helpers can hand a table's properties to CreateTable as they are."""
    stat = TEMPLATE.stat()
    tpl = json.loads(_parsed_template(stat.st_mtime_ns, stat.st_size))
    if billing_as_deployed:
        mode = tpl["Parameters"]["BillingMode"]["Default"]
        for resource in tpl["Resources"].values():
            if resource.get("Type") != "AWS::DynamoDB::Table":
                continue
            props = resource["Properties"]
            props["BillingMode"] = mode
            for entry in [props, *props.get("GlobalSecondaryIndexes", [])]:
                if mode == "PAY_PER_REQUEST":
                    entry.pop("ProvisionedThroughput", None)
    return tpl


@functools.cache
def _parsed_template(_mtime_ns: int, _size: int) -> str:
    """The parse as JSON text: a copy is then a json.loads of plain dicts (0.5 ms), where a deepcopy of cfn-lint's
    nodes took 17 ms, and table-creating fixtures ask for one each test."""
    tpl, errors = decode(str(TEMPLATE))
    assert not errors, errors
    return json.dumps(tpl)


def create_queue_table(client: Any, name: str) -> None:
    """Create the queue table exactly as template.yaml declares it (keys, indexes, stream), plus TTL."""
    props = template()["Resources"]["QueueTable"]["Properties"]
    client.create_table(
        TableName=name,
        AttributeDefinitions=props["AttributeDefinitions"],
        KeySchema=props["KeySchema"],
        GlobalSecondaryIndexes=props["GlobalSecondaryIndexes"],
        BillingMode=props["BillingMode"],
        StreamSpecification={"StreamEnabled": True, **props["StreamSpecification"]},
    )
    client.update_time_to_live(
        TableName=name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": props["TimeToLiveSpecification"]["AttributeName"]},
    )


def load_function(directory: str) -> ModuleType:
    """Import functions/<directory>/app.py under a unique module name (every handler file is app.py), its entry
    points running as the function (``tests.iam_support``: its requests are checked against its role)."""
    name = f"{directory}_app"
    path = ROOT / "functions" / directory / "app.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    from tests.iam_support import checked_module  # its requests are checked against the function's role

    return checked_module(module, directory)


def load_event(name: str) -> dict[str, Any]:
    return json.loads((ROOT / "events" / name).read_text())


class FakeClock:
    """A clock moved by hand: now_ms() and monotonic() advance only through advance() or sleep()."""

    def __init__(self, now_ms: int = 1_795_348_800_000) -> None:
        self._now_ms = now_ms
        self._mono = 1000.0

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic(self) -> float:
        return self._mono

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        self._now_ms += int(seconds * 1000)
        self._mono += seconds


class LambdaContextStub:
    def __init__(self, remaining_ms: int = 180_000, request_id: str = "req-1", function_name: str = "fn") -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}"
        self.memory_limit_in_mb = 256
        self.aws_request_id = request_id
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "stream"
        self._remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self._remaining_ms


class EmittedMetric(NamedTuple):
    """One metric value of an EMF blob: its name, dimensions (name -> value), value (a list of values summed),
    the blob's namespace and dimension sets (each sorted)."""

    name: str
    dims: dict[str, str]
    value: float
    namespace: str
    dimension_sets: tuple[tuple[str, ...], ...]


def emitted(output: str) -> list[EmittedMetric]:
    """Every EMF metric printed in ``output`` (Powertools flushes metrics to stdout as one JSON object a line)."""
    found: list[EmittedMetric] = []
    for line in output.splitlines():
        try:
            blob = json.loads(line)
        except ValueError:
            continue
        if not isinstance(blob, dict) or "_aws" not in blob:
            continue
        for definition in blob["_aws"]["CloudWatchMetrics"]:
            sets = tuple(tuple(sorted(group)) for group in definition["Dimensions"])
            dims = {name: blob[name] for group in sets for name in group}
            for metric in definition["Metrics"]:
                value = blob[metric["Name"]]
                found.append(EmittedMetric(metric["Name"], dims, sum(value) if isinstance(value, list) else value,
                                           definition["Namespace"], sets))
    return found


def metric_totals(output: str) -> dict[str, float]:
    """Metric name -> sum of its values over every EMF blob in ``output``, whatever the dimensions."""
    totals: dict[str, float] = {}
    for metric in emitted(output):
        totals[metric.name] = totals.get(metric.name, 0) + metric.value
    return totals


def metric_total(output: str, name: str, **dims: str) -> float:
    """Sum of metric ``name`` in ``output`` over the blobs whose dimensions include ``dims``."""
    return sum(m.value for m in emitted(output) if m.name == name and all(m.dims.get(k) == v for k, v in dims.items()))


def imports_of(path: Path, package: str) -> list[tuple[str, list[str]]]:
    """Every import statement of a module, at any depth of the file (a lazy import counts too): (the module it names,
    the names it takes from it), with relative imports resolved against ``package`` (the module's own package).
    ``import a.b`` is ("a.b", []); ``from a import b, c`` is ("a", ["b", "c"])."""
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.append((base, [alias.name for alias in node.names]))
    return found
