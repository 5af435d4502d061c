"""Aeon's pytest fixtures, registered through the ``pytest11`` entry point of aeon-core.

* ``aeon_plugin_manager`` — a fresh plugin manager with only the kernel's essentials (no entry points).
* ``aeon_scripted_llm`` — ``aeon_scripted_llm(responses)`` builds the scripted adapter.
* ``aeon_recording_sink`` — a :class:`RecordingSink` attached to every orchestrator the factory builds.
* ``aeon_orchestrator_factory`` — ``factory(responses, *, plugins=(), ttl=20, config=None)`` returns an
  Orchestrator on Aeon's built-in components plus ``plugins`` (the plugin under test), with the scripted model
  replaying ``responses``. Other installed plugins are not loaded, so tests see only what they ask for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from aeon_kernel.config import AeonConfig
from aeon_kernel.plugins import AeonPluginManager, build_plugin_manager
from aeon_kernel.testing.recording import RecordingSink

BUILTIN_PLUGINS = (
    "aeon_plugins.echo",
    "aeon_plugins.calculator",
    "aeon_plugins.in_memory",
    "aeon_plugins.jsonl",
    "aeon_plugins.schema_validator",
    "aeon_plugins.supervisor",
    "aeon_plugins.plan_finished",
    "aeon_plugins.scripted",
    "aeon_plugins.adaptive_depth",
    "aeon_plugins.semantic_validator",
    "aeon_plugins.model_convergence",
    "aeon_plugins.recursive_planner",
)


@pytest.fixture
def aeon_plugin_manager() -> AeonPluginManager:
    return build_plugin_manager(autoload=False)


@pytest.fixture
def aeon_scripted_llm() -> Callable[[list[Any]], Any]:
    from aeon_kernel.testing.scripted import ScriptedLLM

    return ScriptedLLM


@pytest.fixture
def aeon_recording_sink() -> RecordingSink:
    return RecordingSink()


@pytest.fixture
def aeon_orchestrator_factory(aeon_recording_sink: RecordingSink) -> Iterator[Callable[..., Any]]:
    from aeon_kernel.engine import Engine

    engines: list[Engine] = []

    def make(
        responses: list[Any],
        *,
        plugins: tuple[Any, ...] = (),
        ttl: int = 20,
        config: AeonConfig | None = None,
    ) -> Any:
        chosen = (config or AeonConfig()).with_choice("llm", "scripted", responses=responses)
        builtins = [importlib.import_module(name) for name in BUILTIN_PLUGINS]
        engine = Engine(chosen, plugins=[*builtins, *plugins], autoload=False)
        engine.pm.register(aeon_recording_sink, name=f"sink:recording:{len(engines)}")
        engines.append(engine)
        return engine.orchestrator(ttl)

    yield make
    for engine in engines:
        engine.close()
