"""The reliability suite (docs/reliability.md): the queue under the faults the local engine injects."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "reliability: the queue under injected faults (tests/reliability, docs/reliability.md); part of the default run",
    )
