"""Every built-in backend passes the conformance suite of its kind (as a third-party one would)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aeon_kernel.testing import (
    RecordingSink,
    memory_conformance,
    telemetry_sink_conformance,
    tool_conformance,
)
from aeon_kernel.testing.conformance import MemoryConformance
from aeon_plugins.calculator import CalculatorTool
from aeon_plugins.echo import EchoTool
from aeon_plugins.in_memory import InMemoryKVStore
from aeon_plugins.jsonl import JsonlSink

TestInMemoryKVStore = memory_conformance(InMemoryKVStore)
TestEchoTool = tool_conformance(EchoTool)
TestCalculatorTool = tool_conformance(CalculatorTool)
TestRecordingSink = telemetry_sink_conformance(RecordingSink)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


TestJsonlSink = telemetry_sink_conformance(lambda: JsonlSink("conformance.jsonl"))


class ForgetfulMemory(InMemoryKVStore):
    """A broken backend: search ignores its prefix. The suite must catch it."""

    def search(self, prefix: str) -> list[tuple[str, object]]:
        return super().search("")


def test_the_memory_suite_catches_a_broken_backend() -> None:
    suite = memory_conformance(ForgetfulMemory)()
    memory = ForgetfulMemory()
    with pytest.raises(AssertionError):
        suite.test_prefix_search_is_exact_and_ordered(memory)
    with pytest.raises(AssertionError):
        MemoryConformance.test_behaves_like_a_dict(suite)
