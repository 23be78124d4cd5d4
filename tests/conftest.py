"""The `emulator` marker: tests that drive the emulator's real-time testbed (network namespaces,
aqmlab-router, real Linux TCP). `make py-test` runs the rest on both cores first, then these
alone and one at a time: a real-time run beside CPU-heavy tests would measure the load, not
the emulator."""

from __future__ import annotations

import pytest

#: Files whose tests use the testbed (or sit beside those that do). test_search's replay on
#: the emulator takes the lock itself and asserts only a bound that load cannot break.
EMULATOR_FILES = {"test_emulate.py", "test_emulate_bpf.py", "test_emulate_offload.py", "test_fidelity.py"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in EMULATOR_FILES:
            item.add_marker(pytest.mark.emulator)
