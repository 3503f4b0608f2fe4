"""Test helpers shared by the unit and integration suites: the template's table, handler loading, fakes."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from cfnlint.decode import decode

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template.yaml"


def template() -> dict[str, Any]:
    tpl, errors = decode(str(TEMPLATE))
    assert not errors, errors
    return tpl


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
    """Import functions/<directory>/app.py under a unique module name (every handler file is app.py)."""
    name = f"{directory}_app"
    path = ROOT / "functions" / directory / "app.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


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
