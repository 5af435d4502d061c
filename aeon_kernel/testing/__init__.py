"""Test support for Aeon and its plugins: pytest fixtures (a ``pytest11`` plugin) and conformance suites.

Plugin authors get the fixtures automatically once aeon-core is installed, and check a backend against its
contract in one line::

    from aeon_kernel.testing import memory_conformance
    TestMyMemory = memory_conformance(MyMemory)

Nothing here is imported by ``import aeon_kernel``; the conformance suites are imported on first use, so the
pytest plugin stays light.
"""

from __future__ import annotations

from typing import Any

from aeon_kernel.testing.recording import RecordingSink

_CONFORMANCE = {
    "LLMAdapterConformance",
    "MemoryConformance",
    "StateStoreConformance",
    "TelemetrySinkConformance",
    "ToolConformance",
    "llm_adapter_conformance",
    "memory_conformance",
    "state_store_conformance",
    "telemetry_sink_conformance",
    "tool_conformance",
}

__all__ = ["RecordingSink", *sorted(_CONFORMANCE)]


def __getattr__(name: str) -> Any:
    if name in _CONFORMANCE:
        from aeon_kernel.testing import conformance

        return getattr(conformance, name)
    raise AttributeError(f"module 'aeon_kernel.testing' has no attribute {name!r}")
