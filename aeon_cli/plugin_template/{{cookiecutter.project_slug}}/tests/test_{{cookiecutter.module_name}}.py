"""Tests for {{ cookiecutter.project_slug }}: its component's contract, and whole runs of Aeon.

Aeon's pytest fixtures (``aeon_orchestrator_factory``, ``aeon_recording_sink``, ``aeon_plugin_manager``,
``aeon_scripted_llm``) come with aeon-core through its pytest plugin: there is nothing to import for them.
The conformance suite checks the component against the contract every Aeon backend must keep.
Run with ``python -m pytest``.
"""

from __future__ import annotations

#% if cookiecutter.kind == "tool"
from typing import Any

from aeon_kernel import HOOKSPEC_VERSION
from aeon_kernel.testing import RecordingSink, tool_conformance

{{ "import %s" % cookiecutter.module_name }}
{{ "from %s import TOOL_NAME, word_count" % cookiecutter.module_name }}

# The Tool contract (valid schemas, validated input and output, deterministic results) in one line.
TestWordCountConformance = tool_conformance(lambda: word_count)

PLAN = {
    "goal": "Count the words of a line of Hamlet",
    "steps": [
        {
            "step_id": "1",
            "description": "Count the words",
            "tool": TOOL_NAME,
            "arguments": {"text": "to be or not to be"},
        }
    ],
}


def test_counts_words_and_characters() -> None:
    assert word_count.invoke(text="to be or not to be") == {"words": 6, "characters": 18}
    assert word_count.invoke(text="") == {"words": 0, "characters": 0}
    assert word_count.input_schema["properties"]["text"]["description"] == "The text to count."


def test_registers_the_tool(aeon_plugin_manager: Any) -> None:
    registered: dict[str, Any] = {}
    aeon_plugin_manager.register({{ cookiecutter.module_name }})
    aeon_plugin_manager.hook.aeon_register_tools(register=registered.__setitem__)
    assert registered == {TOOL_NAME: word_count}


def test_a_scripted_run_calls_the_tool(
    aeon_orchestrator_factory: Any, aeon_recording_sink: RecordingSink
) -> None:
    """The scripted model replays PLAN; the kernel checks the arguments, calls the tool, checks its result."""
    orchestrator = aeon_orchestrator_factory(
        [PLAN],
        plugins=({{ cookiecutter.module_name }},),
    )
    result = orchestrator.execute("how many words are in 'to be or not to be'?")
    assert result["status"] == "completed", result["message"]
    assert result["answer"] == {"words": 6, "characters": 18}
    (call,) = aeon_recording_sink.of("aeon_tool_called")
    assert call.tool_name == TOOL_NAME and call.error is None


#% elif cookiecutter.kind == "llm"
import json
from typing import Any

from aeon_kernel import HOOKSPEC_VERSION, Engine
from aeon_kernel.config import AeonConfig
from aeon_kernel.testing import RecordingSink, llm_adapter_conformance

{{ "import %s" % cookiecutter.module_name }}
{{ "from %s import ADAPTER_NAME, EchoModel" % cookiecutter.module_name }}

# The LLMAdapter contract (response format, declared capabilities) in one line. For an adapter that talks to a
# server, also pass failing=lambda: MyAdapter(base_url="http://127.0.0.1:9") to check that failures surface
# as LLMError after the kernel's retries.
TestEchoModelConformance = llm_adapter_conformance(EchoModel)


def test_plans_then_answers() -> None:
    model = EchoModel()
    plan = json.loads(model.generate("Tools: ...\nRequest: hello there\nPlan:")["text"])
    assert plan["steps"] == [{"step_id": "1", "description": "Repeat the request", "agent": "llm"}]
    answer = json.loads(model.generate("Request: hello there\nStep 1: Repeat the request\nAnswer:")["text"])
    assert answer == {"answer": "You said: hello there"}


def test_registers_the_adapter(aeon_plugin_manager: Any) -> None:
    registered: dict[str, Any] = {}
    aeon_plugin_manager.register({{ cookiecutter.module_name }})
    aeon_plugin_manager.hook.aeon_register_llm_adapters(register=registered.__setitem__)
    assert registered == {ADAPTER_NAME: EchoModel}


def test_a_whole_run_on_the_model(aeon_recording_sink: RecordingSink) -> None:
    """The model chosen as aeon.toml would choose it: ``[llm] use = ADAPTER_NAME``, ``prefix = "Echo: "``.

    ``aeon_orchestrator_factory`` always runs the scripted model, so this test builds its Engine itself, from
    aeon-core's built-in plugins (``allow = ["aeon-core"]``) and this module.
    """
    config = AeonConfig(allow=("aeon-core",)).with_choice("llm", ADAPTER_NAME, prefix="Echo: ")
    plugins = [{{ cookiecutter.module_name }}]
    with Engine(config, plugins=plugins, autoload=True) as engine:
        engine.pm.register(aeon_recording_sink, name="sink:recording")
        result = engine.run("hello there", ttl=5)
    assert result["status"] == "completed", result["message"]
    assert result["answer"] == "Echo: hello there"
    assert [entry.phase for entry in aeon_recording_sink.entries] == ["plan", "step"]


#% elif cookiecutter.kind == "memory"
from typing import Any

from aeon_kernel import HOOKSPEC_VERSION
from aeon_kernel.config import AeonConfig
from aeon_kernel.testing import memory_conformance

{{ "import %s" % cookiecutter.module_name }}
{{ "from %s import BACKEND_NAME, DictMemory" % cookiecutter.module_name }}

# The Memory contract (JSON values, exact prefix search, a state machine checked against a dict) in one line.
TestDictMemoryConformance = memory_conformance(DictMemory)

PLAN = {
    "goal": "Say hello",
    "steps": [
        {"step_id": "1", "description": "Say hello", "tool": "echo", "arguments": {"message": "hello"}}
    ],
}


def test_values_are_copies() -> None:
    memory = DictMemory()
    value = {"items": [1, 2]}
    memory.write("k", value)
    value["items"].append(3)
    assert memory.read("k") == {"items": [1, 2]}


def test_registers_the_backend(aeon_plugin_manager: Any) -> None:
    registered: dict[str, Any] = {}
    aeon_plugin_manager.register({{ cookiecutter.module_name }})
    aeon_plugin_manager.hook.aeon_register_memory_backends(register=registered.__setitem__)
    assert registered == {BACKEND_NAME: DictMemory}


def test_a_scripted_run_keeps_its_results_here(aeon_orchestrator_factory: Any) -> None:
    """As aeon.toml's ``[memory] use = "{{ cookiecutter.plugin_name }}"`` would.

    The kernel writes each step's result to the backend, and reads it back for the next prompt.
    """
    config = AeonConfig().with_choice("memory", BACKEND_NAME)
    orchestrator = aeon_orchestrator_factory(
        [PLAN],
        plugins=({{ cookiecutter.module_name }},),
        config=config,
    )
    result = orchestrator.execute("say hello")
    assert result["status"] == "completed", result["message"]
    assert isinstance(orchestrator.memory, DictMemory)
    assert [value for _, value in orchestrator.memory.search("run/")] == [{"message": "hello"}]


#% elif cookiecutter.kind == "sink"
from pathlib import Path
from typing import Any

from aeon_kernel import HOOKSPEC_VERSION
from aeon_kernel.config import AeonConfig, Choice
from aeon_kernel.testing import telemetry_sink_conformance

{{ "import %s" % cookiecutter.module_name }}
{{ "from %s import SINK_NAME, CycleLogSink" % cookiecutter.module_name }}

# The sink contract (registers cleanly, survives a whole run, closes twice) in one line.
TestCycleLogSinkConformance = telemetry_sink_conformance(CycleLogSink)

PLAN = {
    "goal": "Say hello",
    "steps": [
        {"step_id": "1", "description": "Say hello", "tool": "echo", "arguments": {"message": "hello"}}
    ],
}


def test_registers_the_sink(aeon_plugin_manager: Any) -> None:
    registered: dict[str, Any] = {}
    aeon_plugin_manager.register({{ cookiecutter.module_name }})
    aeon_plugin_manager.hook.aeon_register_telemetry_sinks(register=registered.__setitem__)
    assert registered == {SINK_NAME: CycleLogSink}


def test_a_scripted_run_writes_one_line_per_cycle(aeon_orchestrator_factory: Any, tmp_path: Path) -> None:
    """As aeon.toml would configure it: ``[telemetry] use = [SINK_NAME]``, with a ``path``."""
    log = tmp_path / "cycles.log"
    config = AeonConfig(telemetry=(Choice(SINK_NAME, {"path": str(log)}),))
    orchestrator = aeon_orchestrator_factory(
        [PLAN],
        plugins=({{ cookiecutter.module_name }},),
        config=config,
    )
    result = orchestrator.execute("say hello")
    assert result["status"] == "completed", result["message"]
    assert orchestrator.telemetry_errors == []
    lines = log.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("cycle 1 plan step=- status=- errors=0")
    assert lines[1].startswith("cycle 2 step step=1 status=complete errors=0")
    assert lines[2] == f"run {result['run_id']} completed"


#% endif
def test_targets_this_hook_specification() -> None:
    """A new major hook specification version may change hooks: check the plugin against it, then update."""
    targeted = {{ cookiecutter.module_name }}.AEON_HOOKSPEC_VERSION
    assert targeted.split(".")[0] == HOOKSPEC_VERSION.split(".")[0], (targeted, HOOKSPEC_VERSION)
