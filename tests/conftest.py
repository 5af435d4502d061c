"""Shared fixtures: a kernel wired from real built-in components around the scripted model."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from aeon_kernel import LogEntry, Orchestrator, Tool, ToolRegistry
from aeon_kernel.kit import ModelClient
from aeon_kernel.plugins import build_plugin_manager
from aeon_kernel.secrets import new_secrets_forgotten
from aeon_kernel.testing import RecordingSink
from aeon_plugins.calculator import CalculatorTool
from aeon_plugins.echo import EchoTool
from aeon_plugins.in_memory import InMemoryKVStore
from aeon_plugins.plan_finished import PlanFinished
from aeon_plugins.schema_validator import SchemaValidator
from aeon_plugins.scripted import ScriptedLLM
from aeon_plugins.supervisor import DefaultSupervisor


@dataclass
class Harness:
    orchestrator: Orchestrator
    llm: ScriptedLLM
    memory: InMemoryKVStore
    sink: RecordingSink
    sleeps: list[float] = field(default_factory=list)

    def run(self, request: str = "calculate the sum of 5 and 10", **kwargs: Any) -> dict[str, Any]:
        return self.orchestrator.execute(request, **kwargs)

    @property
    def entries(self) -> list[LogEntry]:
        return self.sink.of("aeon_cycle_end")


MakeHarness = Callable[..., Harness]


@pytest.fixture(autouse=True, scope="module")
def secrets_of_this_module() -> Iterator[None]:
    """The secrets a test module registers are forgotten after it: the registry is process-wide, and another
    module's canary would otherwise scrub pieces of this one's output (a port, a digit run)."""
    with new_secrets_forgotten():
        yield


@pytest.fixture(autouse=True)
def data_directory(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Any:
    """What the CLI records by default (FR-037) goes to a scratch directory, never the user's own."""
    directory = tmp_path_factory.mktemp("aeon-data")
    monkeypatch.setenv("AEON_DATA_DIR", str(directory))
    return directory


@pytest.fixture
def make_harness() -> MakeHarness:
    """Build an orchestrator from real built-in components; the model replays ``responses``."""

    def make(
        responses: list[Any],
        *,
        tools: list[Tool] | None = None,
        ttl: int = 20,
        plugins: tuple[Any, ...] = (),
    ) -> Harness:
        scripted = ScriptedLLM(responses)
        sleeps: list[float] = []
        llm = ModelClient(scripted, sleep=sleeps.append)
        validator = SchemaValidator()
        registry = ToolRegistry(tools if tools is not None else [EchoTool(), CalculatorTool()])
        supervisor = DefaultSupervisor(llm, validator, registry)
        sink = RecordingSink()
        pm = build_plugin_manager((*plugins, sink), autoload=False)
        memory = InMemoryKVStore(keep_runs=True)  # the tests read what the steps stored after the run
        orchestrator = Orchestrator(
            llm,
            memory,
            registry,
            supervisor,
            validator,
            ttl=ttl,
            convergence=PlanFinished(),
            plugin_manager=pm,
        )
        return Harness(orchestrator, scripted, memory, sink, sleeps)

    return make
