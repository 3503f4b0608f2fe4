"""The runner as Lambda would load it, from what `make build` (sam build) produces: ProcessTasks' code at the root
of the import path, then each layer's python/ folder (QueueLayer, RunnerLayer), then what the python3.13 runtime
provides (boto3 and its dependencies), and nothing else. Run by the python3.13 that sam build used.

It imports the handler (which loads TASK_RUNNER=example_runner.http_call:run at init) and runs the example runner
against a local HTTP service: its code and its own dependency (httpx, from runner/requirements.txt) must come from
the RunnerLayer's python/ folder. The same artifact with the runner moved to the layer's root fails, as it would on
Lambda, which imports only a layer's python/.

`make build` runs once per session, into a temporary folder (BUILD_DIR), so the developer's .aws-sam is untouched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.http_service import http_service
from tests.support import ROOT

pytestmark = pytest.mark.build

# What the Lambda Python runtime provides besides the standard library (tests/unit/test_layer_build.py).
RUNTIME_PACKAGES = ("boto3", "botocore", "jmespath", "dateutil", "s3transfer", "six.py", "urllib3")

PROBE = r'''
import json, os, sys
sys.path[:0] = json.loads(os.environ["PROBE_PATH"])
import app  # ProcessTasks' handler: loads the runner at init
runner = app.runner()  # raises what init met, if the runner could not be loaded
from example_runner import http_call
import httpx
from taskqueue.core.model import Task
from taskqueue.core.states import TaskStatus
outcomes = {}
for path in ("/ok", "/missing", "/broken", "/slow"):
    os.environ["EXAMPLE_API_URL"] = os.environ["SERVICE"] + path
    task = Task(task_id="t", queue="work", status=TaskStatus.TAKEN, priority=0, created_ms=0, updated_ms=0,
                enqueued_ms=0, ttl=10**10, payload={"items": [1, 2]})
    try:
        outcomes[path] = ["returned", runner(task)]
    except Exception as exc:
        outcomes[path] = [type(exc).__name__, str(exc)[:200]]
print(json.dumps({"runner": f"{runner.__module__}.{runner.__name__}", "runner_file": http_call.__file__,
                  "httpx_file": httpx.__file__, "python": sys.version_info[:2], "outcomes": outcomes}))
'''


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    build_dir = tmp_path_factory.mktemp("sam-build") / "build"
    done = subprocess.run(["make", "-s", "build", f"BUILD_DIR={build_dir}"], cwd=ROOT, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=900)
    assert done.returncode == 0, f"make build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return build_dir


@pytest.fixture(scope="session")
def python313() -> str:
    found = subprocess.run(["make", "-s", "python313"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert found and Path(found).is_file(), "python3.13 (the runtime's Python, which sam build needs) was not found"
    return found


def runtime_folder(tmp_path: Path) -> Path:
    """What the runtime provides: links to this environment's boto3 and its dependencies, nothing else."""
    folder = tmp_path / "runtime"
    folder.mkdir()
    site = Path(__import__("boto3").__file__).parent.parent
    for name in RUNTIME_PACKAGES:
        (folder / name).symlink_to(site / name)
    return folder


def load_like_lambda(python: str, build: Path, tmp_path: Path, service: str, runner_layer: Path) -> dict:
    path = [str(build / "ProcessTasksFunction"), str(build / "QueueLayer" / "python"), str(runner_layer / "python"),
            str(runtime_folder(tmp_path))]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PROBE_PATH": json.dumps(path), "SERVICE": service,
           "QUEUE_TABLE_NAME": "built-test", "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x",
           "AWS_SECRET_ACCESS_KEY": "x", "POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_LOG_LEVEL": "CRITICAL",
           "TASK_RUNNER": "example_runner.http_call:run", "RUNNER_ENVIRONMENT": json.dumps({"EXAMPLE_API_TIMEOUT_SECONDS": "0.5"})}
    # -I -S: no site-packages, no user folder, no PYTHON* variables: only the folders above and the standard library.
    done = subprocess.run([python, "-I", "-S", "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"the built runner did not load as Lambda loads it:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_built_runner_and_its_dependency_load_from_the_runner_layers_python_folder(built, python313, tmp_path):
    layer = built / "RunnerLayer"
    with http_service(slow_seconds=2.0) as (url, received):
        probe = load_like_lambda(python313, built, tmp_path, url, layer)
    assert probe["python"] == [3, 13]
    assert probe["runner"] == "example_runner.http_call.run"
    assert Path(probe["runner_file"]).is_relative_to(layer / "python" / "example_runner")
    assert Path(probe["httpx_file"]).is_relative_to(layer / "python" / "httpx")  # from runner/requirements.txt
    outcomes = probe["outcomes"]
    assert outcomes["/ok"][0] == "returned" and outcomes["/ok"][1]["calls"] == 2
    assert outcomes["/missing"][0] == "PermanentTaskError"
    assert outcomes["/broken"][0] == "ServiceUnavailable" and outcomes["/slow"][0] == "ServiceUnavailable"
    assert len([r for r in received if r["path"] == "/ok"]) == 2


def test_the_same_artifact_with_the_runner_at_the_layers_root_fails_to_load(built, python313, tmp_path):
    """The check above is not vacuous: Lambda imports only a layer's python/, so code at its root is not found."""
    moved = tmp_path / "RunnerLayerAtRoot"
    shutil.copytree(built / "RunnerLayer" / "python", moved)
    (moved / "python").mkdir()
    for dependency in moved.iterdir():  # the dependencies stay where sam build put them; only the runner moves
        if dependency.name not in ("example_runner", "python"):
            dependency.rename(moved / "python" / dependency.name)
    with pytest.raises(AssertionError, match=r"(?s)there is no module 'example_runner.http_call'.*put it in runner/"):
        load_like_lambda(python313, built, tmp_path, "http://127.0.0.1:9", moved)


def test_the_probe_runs_without_this_environments_packages():
    """The probe's interpreter sees no site-packages: what it imports comes from the folders it is given."""
    done = subprocess.run([sys.executable, "-I", "-S", "-c", "import httpx"], capture_output=True, text=True)
    assert done.returncode != 0 and "No module named 'httpx'" in done.stderr
