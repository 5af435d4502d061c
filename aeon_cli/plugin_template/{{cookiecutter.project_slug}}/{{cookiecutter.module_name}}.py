"""{{ cookiecutter.project_slug }}: {{ cookiecutter.description }}

Aeon finds this module through the ``aeon`` entry point in pyproject.toml and calls the hooks it implements.
#% if cookiecutter.kind == "tool"
The example is a tool, registered by ``aeon_register_tools`` under the name TOOL_NAME.

#% elif cookiecutter.kind == "llm"
The example is an LLM adapter, registered by ``aeon_register_llm_adapters`` under the name ADAPTER_NAME.

#% elif cookiecutter.kind == "memory"
The example is a memory backend, registered by ``aeon_register_memory_backends`` under the name BACKEND_NAME.

#% elif cookiecutter.kind == "sink"
The example is a telemetry sink, registered by ``aeon_register_telemetry_sinks`` under the name SINK_NAME.

#% endif
Every other hook is listed at the end as a commented stub with its exact signature: uncomment what you need.
Hooks are documented in aeon-core's docs/hooks.md; the plugin author's guide is its docs/plugins.md. Import
only the public API (``from aeon_kernel import ...``): it is what the hook specification version below
promises to keep.
"""

from __future__ import annotations

#% if cookiecutter.kind == "tool"
from aeon_kernel import Register, hookimpl, tool
from pydantic import BaseModel, Field

#% elif cookiecutter.kind == "llm"
import json
import re
from typing import Any

from aeon_kernel import LLMAdapter, LLMResponse, Register, hookimpl

#% elif cookiecutter.kind == "memory"
import json
import threading
from typing import Any

from aeon_kernel import Memory, MemoryStoreError, Register, hookimpl

#% elif cookiecutter.kind == "sink"
from pathlib import Path
from typing import Any

from aeon_kernel import LogEntry, OrchestrationState, Register, TelemetrySink, hookimpl

#% endif
#: The version of Aeon's hook specifications this plugin is written for (``aeon_kernel.HOOKSPEC_VERSION``).
AEON_HOOKSPEC_VERSION = "{{ cookiecutter._hookspec_version }}"

#% if cookiecutter.kind == "tool"
#: The name the model uses to call the tool. Names are unique across installed plugins, hence the prefix.
TOOL_NAME = "{{ cookiecutter.plugin_name }}_word_count"


class WordCount(BaseModel):
    """What the tool returns: its JSON Schema is the tool's output schema."""

    words: int = Field(ge=0, description="How many words the text has.")
    characters: int = Field(ge=0, description="How many characters the text has.")


# ``@tool`` makes a tool of a typed function: the input schema from its parameters, the description from its
# docstring (the model chooses tools by it: say what the tool does), each parameter's from ``Args:``, the
# output schema from the return annotation (a scalar, ``-> int``, is returned as ``{"result": ...}``). The
# kernel validates the arguments before the call and the result after it; raise ``aeon_kernel.ToolError`` for
# a failure. ``example`` is shown to the model and run by the conformance suite. A tool that needs
# hand-written schemas or state subclasses ``aeon_kernel.Tool`` instead (aeon-core's docs/plugins.md).
@tool(name=TOOL_NAME, example={"text": "to be or not to be"})
def word_count(text: str) -> WordCount:
    """Count the words and the characters in a text.

    Args:
        text: The text to count.
    """
    return WordCount(words=len(text.split()), characters=len(text))


@hookimpl
def aeon_register_tools(register: Register) -> None:
    """Offer the tool: the tool itself, or a factory building it with [tools.<name>]'s options."""
    register(TOOL_NAME, word_count)


#% elif cookiecutter.kind == "llm"
#: The name aeon.toml chooses the model by: ``[llm] use = "{{ cookiecutter.plugin_name }}"``.
ADAPTER_NAME = "{{ cookiecutter.plugin_name }}"

_REQUEST = re.compile(r"^Request: (.*)$", re.MULTILINE)


class EchoModel(LLMAdapter):
    """A deterministic, rule-based model: it plans one thinking step, then answers by echoing the request.

    Replace ``generate`` with a call to your model and keep its contract: return ``{"text": ..., "model": ...,
    "usage": {...}}``; raise ``aeon_kernel.LLMTransientError`` for failures worth retrying (timeouts, 429,
    5xx) and ``aeon_kernel.LLMError`` for the rest. The kernel owns the retry policy, so do not retry here.
    Set ``supports_json_schema = True`` when ``generate`` can constrain decoding to ``json_schema``.
    """

    model_id = "{{ cookiecutter.plugin_name }}-echo"
    supports_json_schema = False

    def __init__(self, prefix: str = "You said: ") -> None:
        # Keys of aeon.toml's [llm] table other than ``use`` arrive here as keyword arguments.
        self.prefix = prefix

    def generate(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> LLMResponse:
        requests = _REQUEST.findall(prompt)
        request = (requests[-1] if requests else prompt).strip()[:150] or "(nothing)"
        reply: dict[str, Any]
        if prompt.rstrip().endswith("Plan:"):  # the kernel asks for a plan first...
            reply = {
                "goal": f"Answer: {request}",
                "steps": [{"step_id": "1", "description": "Repeat the request", "agent": "llm"}],
            }
        else:  # ...then for the answer of each thinking step
            reply = {"answer": f"{self.prefix}{request}"}
        text = json.dumps(reply)
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split())}
        return {"text": text, "model": self.model_id, "usage": usage}

    def close(self) -> None:
        """Release connections or model weights; called when the engine closes."""


@hookimpl
def aeon_register_llm_adapters(register: Register) -> None:
    """Offer the model; aeon.toml chooses it by ADAPTER_NAME. Options from [llm] go to the factory."""
    register(ADAPTER_NAME, EchoModel)


#% elif cookiecutter.kind == "memory"
#: The name aeon.toml chooses the backend by: ``[memory] use = "{{ cookiecutter.plugin_name }}"``.
BACKEND_NAME = "{{ cookiecutter.plugin_name }}"


class DictMemory(Memory):
    """Key/value memory in a dict. Values are kept as JSON text, so only JSON values are accepted, a write is
    all or nothing, and a caller cannot change a stored value by mutating what it wrote or read.

    A real backend (SQLite, Redis, a vector store) keeps the same contract, which the conformance suite
    checks: non-empty string keys, ``read`` gives None for a missing key, ``search`` is an exact,
    case-sensitive prefix match in key order, and failures raise ``MemoryStoreError``.
    """

    def __init__(self) -> None:
        # Keys of aeon.toml's [memory] table other than ``use`` arrive here as keyword arguments.
        self._data: dict[str, str] = {}
        self._lock = threading.Lock()

    def write(self, key: str, value: Any) -> None:
        if not isinstance(key, str) or not key:
            raise MemoryStoreError(f"memory keys must be non-empty strings, got {key!r}")
        try:
            text = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise MemoryStoreError(f"value for {key!r} is not JSON: {exc}") from None
        with self._lock:
            self._data[key] = text

    def read(self, key: str) -> Any | None:
        text = self._data.get(key)
        return None if text is None else json.loads(text)

    def search(self, prefix: str) -> list[tuple[str, Any]]:
        with self._lock:
            found = sorted((key, text) for key, text in self._data.items() if key.startswith(prefix))
        return [(key, json.loads(text)) for key, text in found]

    def close(self) -> None:
        """Release connections or files; called when the engine closes."""


@hookimpl
def aeon_register_memory_backends(register: Register) -> None:
    """Offer the backend; aeon.toml chooses it by BACKEND_NAME. Options from [memory] go to the factory."""
    register(BACKEND_NAME, DictMemory)


#% elif cookiecutter.kind == "sink"
#: The name aeon.toml chooses the sink by: ``[telemetry] use = ["{{ cookiecutter.plugin_name }}"]``.
SINK_NAME = "{{ cookiecutter.plugin_name }}"


class CycleLogSink(TelemetrySink):
    """Writes one line per orchestration cycle, and one when a run ends, to a text file.

    A sink is registered on the engine's plugin manager, so its ``@hookimpl`` methods receive Aeon's event
    hooks. ``path`` comes from the sink's table in aeon.toml:
    ``[telemetry.{{ cookiecutter.plugin_name }}] path = "cycles.log"``.
    Without one, the lines are only kept in ``lines``. A failing sink never stops a run: its errors are
    reported in the orchestrator's ``telemetry_errors``.
    """

    def __init__(self, path: str | None = None) -> None:
        self.path = Path(path) if path else None
        self.lines: list[str] = []

    @hookimpl
    def aeon_cycle_end(self, entry: LogEntry, state: OrchestrationState) -> None:
        """Called after every cycle (the plan, then each step), also when the cycle failed."""
        self._write(
            f"cycle {entry.step_number} {entry.phase} step={entry.step_id or '-'} "
            f"status={entry.step_status or '-'} errors={len(entry.errors)} ttl={entry.ttl_remaining}"
        )

    @hookimpl
    def aeon_run_end(self, run_id: str, result: dict[str, Any]) -> None:
        self._write(f"run {run_id} {result['status']}")

    # Other event hooks a sink may implement, with their exact signatures:
    #
    # @hookimpl
    # def aeon_run_start(
    #     self, run_id: str, request: str, state: OrchestrationState, manifest: dict[str, Any]
    # ) -> None: ...
    #
    # @hookimpl
    # def aeon_run_resumed(
    #     self, run_id: str, state: OrchestrationState, entries: tuple[LogEntry, ...]
    # ) -> None: ...
    #
    # @hookimpl
    # def aeon_step_status_changed(self, run_id: str, step: PlanStep, previous: StepStatus) -> None: ...
    #
    # @hookimpl
    # def aeon_tool_started(
    #     self, run_id: str, step_id: str, tool_name: str, arguments: dict[str, Any]
    # ) -> None: ...
    #
    # @hookimpl
    # def aeon_tool_called(self, run_id: str, call: ToolCall) -> None: ...
    #
    # @hookimpl
    # def aeon_model_called(self, run_id: str, cycle: int, call: dict[str, Any]) -> None: ...
    #
    # @hookimpl
    # def aeon_supervisor_action(self, run_id: str, action: SupervisorAction) -> None: ...
    #
    # @hookimpl
    # def aeon_pass_event(
    #     self, run_id: str, pass_number: int, event: str, record: dict[str, Any]
    # ) -> None: ...

    def _write(self, line: str) -> None:
        self.lines.append(line)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as file:
                file.write(line + "\n")

    def close(self) -> None:
        """Flush and release resources; called when the engine closes (possibly more than once)."""


@hookimpl
def aeon_register_telemetry_sinks(register: Register) -> None:
    """Offer the sink. Options in aeon.toml's ``[telemetry.<name>]`` table are passed to the factory."""
    register(SINK_NAME, CycleLogSink)


#% endif
# --- Other hooks --------------------------------------------------------------------------------------------
#
# Uncomment what you need and import the names it uses from aeon_kernel. An implementation may take any
# subset of a hook's arguments, by name. Discovery hooks call ``register(name, factory)`` once per component;
# aeon.toml chooses components by name, and a factory is only called for the components chosen.
#% if cookiecutter.kind != "llm"
#
# @hookimpl
# def aeon_register_llm_adapters(register: Register) -> None:
#     """LLM adapters: ``factory(**options)`` returns an ``LLMAdapter``; options are [llm] without ``use``."""
#     register("my_model", MyModel)
#% endif
#% if cookiecutter.kind != "memory"
#
# @hookimpl
# def aeon_register_memory_backends(register: Register) -> None:
#     """Memory backends: ``factory(**options)`` returns a ``Memory`` (write, read, search by prefix)."""
#     register("my_memory", MyMemory)
#% endif
#% if cookiecutter.kind != "tool"
#
# @hookimpl
# def aeon_register_tools(register: Register) -> None:
#     """Tools: a ``Tool`` (an ``@tool`` function), or ``factory(**options)`` that returns one named as
#     registered, with the options of [tools.<name>]."""
#     register("my_tool", my_tool)
#% endif
#
# @hookimpl
# def aeon_register_validators(register: Register) -> None:
#     """Validators: ``factory(**options)`` returns a ``Validator``, with options from [validator]."""
#     register("my_validator", MyValidator)
#
# @hookimpl
# def aeon_register_supervisors(register: Register) -> None:
#     """Supervisors: ``factory(llm, validator, tools, **options)`` returns a ``Supervisor``."""
#     register("my_supervisor", MySupervisor)
#
# @hookimpl
# def aeon_register_convergence_engines(register: Register) -> None:
#     """Convergence engines: ``factory(**options)`` returns a ``ConvergenceEngine`` ([convergence])."""
#     register("my_convergence", MyConvergenceEngine)
#% if cookiecutter.kind != "sink"
#
# @hookimpl
# def aeon_register_telemetry_sinks(register: Register) -> None:
#     """Telemetry sinks: ``factory(**options)`` returns a ``TelemetrySink`` that implements event hooks."""
#     register("my_sink", MySink)
#% endif
#
# @hookimpl
# def aeon_register_state_stores(register: Register) -> None:
#     """State stores (durable runs): ``factory(**options)`` returns a ``StateStore`` ([state])."""
#     register("my_store", MyStateStore)
#
# @hookimpl
# def aeon_register_planners(register: Register) -> None:
#     """Planners: ``factory(llm, validator, supervisor, max_tokens, temperature, **options)`` returns a
#     ``Planner`` ([planner])."""
#     register("my_planner", MyPlanner)
#
# @hookimpl
# def aeon_register_schedulers(register: Register) -> None:
#     """Schedulers: ``factory(**options)`` returns a ``Scheduler``, one per run ([scheduler])."""
#     register("my_scheduler", MyScheduler)
#
# @hookimpl
# def aeon_register_depth_heuristics(register: Register) -> None:
#     """Adaptive depth (multi-pass runs): ``factory(**options)`` returns an ``AdaptiveDepth`` ([depth])."""
#     register("my_depth", MyDepth)
#
# @hookimpl
# def aeon_register_semantic_validators(register: Register) -> None:
#     """Semantic validators (multi-pass runs): ``factory(**options)`` returns a ``SemanticValidator``."""
#     register("my_semantic_validator", MySemanticValidator)
#
#
# @hookimpl
# def aeon_register_nodes(register: Register) -> None:
#     """Flow node code (``impl: my.node``): ``factory(**options)`` returns ``fn(value, context)``."""
#     register("my.node", lambda: lambda value, context: value)
#
#
# @hookimpl
# def aeon_register_retrieval_policies(register: Register) -> None:
#     """Context retrieval policies (flows): ``factory()`` returns ``policy(items, profile)``."""
#     register("my_policy", lambda: lambda items, profile: items[: profile.limit])
#
#
# @hookimpl
# def aeon_register_flow_engines(register: Register) -> None:
#     """Flow engines: ``factory(engine, directory)`` returns a flow ready to run (Engine.from_config_dir)."""
#     register("my_flows", MyFlowEngine)  # Engine.from_config_dir(path, flow_engine="my_flows")
#
#
# @hookimpl
# def aeon_register_executors(register: Register) -> None:
#     """Executors: ``factory(source, **options)`` returns an ``Executor`` running many tasks at once."""
#     register("my_executor", MyExecutor)  # aeon.toml: [executor] use = "my_executor"
#
#
# @hookimpl
# def aeon_register_policies(register: Register) -> None:
#     """Policies: ``factory(**options)`` returns a ``Policy`` judging every tool call and flow stage."""
#     register("my_policy", MyPolicy)  # aeon.toml: [policy] use = ["rules", "my_policy"]
#
#
# @hookimpl
# def aeon_register_secret_providers(register: Register) -> None:
#     """Secret providers: ``factory()`` returns a ``SecretProvider``, asked for { "$my_vault" = "ref" }."""
#     register("my_vault", MyVault)
#
#
# @hookimpl
# def aeon_register_artifact_stores(register: Register) -> None:
#     """Artifact stores: ``factory(**options)`` returns an ``ArtifactStore``; [artifacts] use = NAME."""
#     register("my_store", MyArtifactStore)
#
# Decision hooks: the first non-None result wins, and the kernel's own implementation runs last. Return None
# to leave the call to it; ``tryfirst=True`` runs before other plugins, ``wrapper=True`` wraps the whole call.
#
# @hookimpl(tryfirst=True)
# def aeon_execute_step(step: PlanStep, context: StepContext) -> StepExecutionResult | None:
#     if step.tool == "calculator" and "**" in str(step.arguments):
#         return StepExecutionResult(success=False, error="policy: no exponents", execution_mode="tool")
#     return None
#
# @hookimpl(tryfirst=True)
# def aeon_invoke_tool(tool: Tool, arguments: dict[str, Any], context: ToolContext) -> ToolCall | None:
#     if tool.name == "shell":
#         return ToolCall(tool_name=tool.name, arguments=arguments, step_id=context.step_id,
#                         error={"type": "PolicyDenied", "message": "policy: no shell"})
#     return None
#% if cookiecutter.kind != "sink"
#
# Event hooks are called on every implementation; a failing one is reported, never stops a run. A module can
# implement them directly, or register a TelemetrySink object that does (see aeon_register_telemetry_sinks).
#
# @hookimpl
# def aeon_run_start(
#     run_id: str, request: str, state: OrchestrationState, manifest: dict[str, Any]
# ) -> None: ...
#
# @hookimpl
# def aeon_run_resumed(run_id: str, state: OrchestrationState, entries: tuple[LogEntry, ...]) -> None: ...
#
# @hookimpl
# def aeon_cycle_end(entry: LogEntry, state: OrchestrationState) -> None: ...
#
# @hookimpl
# def aeon_step_status_changed(run_id: str, step: PlanStep, previous: StepStatus) -> None: ...
#
# @hookimpl
# def aeon_tool_started(
#     run_id: str, step_id: str, tool_name: str, arguments: dict[str, Any]
# ) -> None: ...
#
# @hookimpl
# def aeon_tool_called(run_id: str, call: ToolCall) -> None: ...
#
# @hookimpl
# def aeon_model_called(run_id: str, cycle: int, call: dict[str, Any]) -> None: ...
#
# @hookimpl
# def aeon_supervisor_action(run_id: str, action: SupervisorAction) -> None: ...
#
# @hookimpl
# def aeon_pass_event(run_id: str, pass_number: int, event: str, record: dict[str, Any]) -> None: ...
#
# @hookimpl
# def aeon_run_end(run_id: str, result: dict[str, Any]) -> None: ...
#% endif
