"""The local engine's sandbox (local/delivery/sandbox.py): as on Lambda, a cold start's init (the handler module's
import) does not count against the function's timeout, and the invocation's duration leaves it out."""

from __future__ import annotations

from pathlib import Path

import pytest

from local.delivery.sandbox import Sandbox, sandbox_environment
from local.template.template import FunctionSpec

SLOW_IMPORT = """
import time
time.sleep(7)  # a handler whose import takes longer than its timeout (a laptop under load)


def handler(event, context):
    return {"seen": event}
"""


@pytest.mark.slow
def test_a_cold_start_whose_init_outlasts_the_timeout_still_runs_its_first_invocation(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SLOW_IMPORT)
    spec = FunctionSpec("SlowFunction", "slow", tmp_path, "slow.handler", timeout=1.0, memory=128,
                        reserved_concurrency=None, environment={}, layer_dirs=[], events={})
    sandbox = Sandbox(spec, sandbox_environment(spec, "http://127.0.0.1:9"), None)
    try:
        first = sandbox.invoke({"n": 1})
        assert first.cold_start and first.ok and not first.timed_out, first.error
        assert first.result == {"seen": {"n": 1}}
        assert first.duration < 1.0  # the init's 7 s are not the invocation's
        second = sandbox.invoke({"n": 2})
        assert second.ok and not second.cold_start and second.result == {"seen": {"n": 2}}
    finally:
        sandbox.close()
