"""DynamoDB's 400 KB item-size limit enforced on the local engine: a runner returning an oversized result ends
FAILURE naming the limit, the largest payload with the largest result still fits, and a write past the limit is
refused and not applied (so the limit really is in force on this engine).

A test-only layer adds a runner that returns a result of the size its task asks for.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from local.engine.engine import REPO, Engine
from local.faults.faults import Faults
from local.faults.item_size import LIMIT_BYTES, item_size
from taskqueue.core.model import MAX_PAYLOAD_BYTES, MAX_RESULT_BYTES
from tests.reliability.support import record_figures

pytestmark = pytest.mark.reliability

SIZE_RUNNER = '''
def run(task):
    return {"blob": "r" * task.payload["result_bytes"]}
'''


def template_with_size_runner(tmp_path: Path) -> Path:
    for name in ("functions", "layers", "runner"):
        (tmp_path / name).symlink_to(REPO / name, target_is_directory=True)
    layer = tmp_path / "sizelayer"
    # Under python/, where Lambda looks in a layer built without a BuildMethod (the engine refuses a layer's root).
    (layer / "python").mkdir(parents=True)
    (layer / "python" / "size_runner.py").write_text(SIZE_RUNNER)
    text = (REPO / "template.yaml").read_text()
    edited = text.replace(
        "  QueueTable:\n",
        "  SizeLayer:\n    Type: AWS::Serverless::LayerVersion\n    Properties:\n      ContentUri: sizelayer/\n\n  QueueTable:\n", 1)
    edited = edited.replace("      Layers:\n        - !Ref RunnerLayer\n",
                            "      Layers:\n        - !Ref RunnerLayer\n        - !Ref SizeLayer\n", 1)
    assert edited.count("SizeLayer") == 2
    path = tmp_path / "template.yaml"
    path.write_text(edited)
    return path


def test_an_oversized_result_ends_failure_naming_the_limit_on_the_engine_with_the_limit_enforced(tmp_path):
    faults = Faults(seed=3, item_size_limit=True)
    engine = Engine(template_with_size_runner(tmp_path), {
        "TaskRunner": "size_runner:run", "TimeBudgetSeconds": 3,
        "CreateTasksScheduleState": "DISABLED"}, time_scale=0.3, schedules=False, faults=faults,
        ttl_lateness=1.0, ttl_interval=0.5)
    try:
        engine.start()
        table = engine.template.resolver.refs["QueueTable"]
        # Payload and result each just under their bounds: the item must still fit in 400 KB.
        payload_filler = MAX_PAYLOAD_BYTES - 100
        largest = {"queue": "work", "payload": {"result_bytes": MAX_RESULT_BYTES - 100, "pad": "p" * payload_filler}}
        oversized = {"queue": "work", "payload": {"result_bytes": MAX_RESULT_BYTES + 50_000}}
        fits = engine.invoke("CreateTasksFunction", largest)
        too_big = engine.invoke("CreateTasksFunction", oversized)
        assert fits.ok and too_big.ok, (fits.error, too_big.error)
        (fits_id,), (too_big_id,) = fits.result["taskIds"], too_big.result["taskIds"]
        finished = ("SUCCESS", "FAILURE")
        assert engine.wait_for(lambda: engine.observer.outcome_of(fits_id) in finished
                               and engine.observer.outcome_of(too_big_id) in finished, timeout=60), (
            engine.observer.outcome_of(fits_id), engine.observer.outcome_of(too_big_id))
        def get(task_id: str) -> dict:
            return engine.ddb.get_item(TableName=table, Key={"taskId": {"S": task_id}}, ConsistentRead=True)["Item"]

        failed, succeeded = get(too_big_id), get(fits_id)
        assert failed["taskStatus"]["S"] == "FAILURE" and "result" not in failed
        last_error = failed["lastError"]["S"]
        assert f"over the limit of {MAX_RESULT_BYTES} bytes (MAX_RESULT_BYTES" in last_error and "400 KB" in last_error
        assert succeeded["taskStatus"]["S"] == "SUCCESS" and len(json.loads(succeeded["result"]["S"])["blob"]) == MAX_RESULT_BYTES - 100
        largest_item = item_size(succeeded)
        assert largest_item <= LIMIT_BYTES

        # The limit is in force on this engine: a write that would take that item past it is refused, not applied.
        client = engine.emulator.client()  # an application's client (faults apply)
        with pytest.raises(ClientError) as refused:
            client.update_item(TableName=table, Key={"taskId": {"S": fits_id}}, UpdateExpression="SET #x = :x",
                               ExpressionAttributeNames={"#x": "extra"},
                               ExpressionAttributeValues={":x": {"S": "e" * (LIMIT_BYTES - largest_item + 1)}})
        assert refused.value.response["Error"]["Code"] == "ValidationException"
        assert "maximum allowed size" in refused.value.response["Error"]["Message"]
        assert "extra" not in get(fits_id)
        size_report = engine.fault_report()["emulator"]["item_size"]
    finally:
        engine.stop()
        shutil.rmtree(tmp_path, ignore_errors=True)
    record_figures("item_size_limit", {
        "limit_bytes": LIMIT_BYTES, "max_payload_bytes": MAX_PAYLOAD_BYTES, "max_result_bytes": MAX_RESULT_BYTES,
        "largest_item_bytes": largest_item, "headroom_bytes": LIMIT_BYTES - largest_item,
        "oversized_result_bytes": MAX_RESULT_BYTES + 50_000, "oversized_outcome": "FAILURE",
        "last_error": last_error, "writes_refused_by_the_limit": size_report,
        "rerun": ".venv/bin/python -m pytest -q tests/reliability/test_item_size.py",
    })
