"""Aeon's hook specifications (pluggy project ``"aeon"``).

Three families, following DESIGN rules 1 and 2:

* ``aeon_register_*`` — discovery, one hook per kind of component (:mod:`aeon_kernel.kinds`). A plugin calls
  ``register(name, factory)`` once per component it provides; ``aeon.toml`` then chooses components by name.
  Factories are called only for the components chosen.
* ``aeon_execute_step`` and ``aeon_invoke_tool`` — decision hooks (``firstresult``). The kernel's own
  implementations are ``trylast``, so a plugin can take over a step or a tool call, deny it (``tryfirst``), or
  wrap it (``wrapper=True``) to time, limit or sandbox it.
* ``aeon_run_start`` … ``aeon_run_end`` — events, called on every implementation. Telemetry sinks implement them.

Every hook is documented with its exact signature in ``docs/hooks.md``; a test keeps the two in step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from aeon_kernel.markers import hookimpl, hookspec

if TYPE_CHECKING:
    from aeon_kernel.invocation import ToolContext
    from aeon_kernel.models import (
        LogEntry,
        OrchestrationState,
        PlanStep,
        StepExecutionResult,
        StepStatus,
        SupervisorAction,
        ToolCall,
    )
    from aeon_kernel.registry import Register
    from aeon_kernel.steps import StepContext
    from aeon_kernel.tools import Tool

__all__ = ["HOOKSPEC_VERSION", "hookimpl", "hookspec"]

#: Bumped when a hook's signature or meaning changes; plugins may declare the version they target.
#: 1.2 added ``aeon_register_planners``, ``aeon_register_schedulers`` and ``aeon_invoke_tool``; 1.3 the spec 003
#: kinds (``aeon_register_depth_heuristics``, ``aeon_register_semantic_validators``) and ``aeon_pass_event``; 1.4
#: the spec 004 kinds (``aeon_register_nodes``, ``aeon_register_retrieval_policies``); 1.5
#: ``aeon_register_policies``, ``aeon_register_secret_providers``, ``aeon_register_artifact_stores`` and
#: ``ToolContext.node``; 1.6 ``aeon_model_called``; 1.7 ``aeon_register_flow_engines`` and
#: ``aeon_register_executors`` (the kernel split, decision 0015).
HOOKSPEC_VERSION: Final = "1.8"


# --- discovery -------------------------------------------------------------------------------------------------


@hookspec
def aeon_register_llm_adapters(register: Register) -> None:
    """Register LLM adapters.

    :param register: ``register(name, factory)``; ``factory(**options)`` returns an
        :class:`~aeon_kernel.contracts.LLMAdapter`. ``options`` are the keys of the ``[llm]`` table of
        ``aeon.toml`` other than ``use``, with secret references already resolved.

    Called once when an engine builds its registries.
    """


@hookspec
def aeon_register_memory_backends(register: Register) -> None:
    """Register memory backends.

    :param register: ``register(name, factory)``; ``factory(**options)`` returns a
        :class:`~aeon_kernel.contracts.Memory`, with ``options`` from the ``[memory]`` table.

    Called once when an engine builds its registries.
    """


@hookspec
def aeon_register_tools(register: Register) -> None:
    """Register tools.

    :param register: ``register(name, factory)``; ``factory(**options)`` returns a
        :class:`~aeon_kernel.tools.Tool` whose ``name`` equals the registered name. ``options`` come from the
        ``[tools.<name>]`` table.

    Called once when an engine builds its registries. Every registered tool is enabled unless ``[tools] enabled``
    lists a subset.
    """


@hookspec
def aeon_register_validators(register: Register) -> None:
    """Register validators.

    :param register: ``register(name, factory)``; ``factory(**options)`` returns a
        :class:`~aeon_kernel.contracts.Validator`, with ``options`` from the ``[validator]`` table.

    Called once when an engine builds its registries.
    """


@hookspec
def aeon_register_supervisors(register: Register) -> None:
    """Register supervisors.

    :param register: ``register(name, factory)``; ``factory(llm, validator, tools, **options)`` returns a
        :class:`~aeon_kernel.contracts.Supervisor`. ``llm`` is the run's model (FR-028: the supervisor uses the same
        model), already wrapped with the kernel's retry policy; ``validator`` the chosen validator; ``tools`` the
        :class:`~aeon_kernel.tools.ToolRegistry`.

    Called once when an engine builds its registries.
    """


@hookspec
def aeon_register_convergence_engines(register: Register) -> None:
    """Register convergence engines.

    :param register: ``register(name, factory)``; ``factory(**options)`` returns a
        :class:`~aeon_kernel.contracts.ConvergenceEngine`, with ``options`` from the ``[convergence]`` table. A
        factory that names ``llm``, ``validator``, ``supervisor``, ``max_tokens`` or ``temperature`` gets the run's
        model (retrying), validator and supervisor, and ``[run]``'s settings, too.

    Called once when an engine builds its registries.
    """


@hookspec
def aeon_register_telemetry_sinks(register: Register) -> None:
    """Register telemetry sinks.

    :param register: ``register(name, factory)``; ``factory(**options)`` returns a
        :class:`~aeon_kernel.contracts.TelemetrySink`, with ``options`` from the ``[telemetry.<name>]`` table.
        The engine registers each chosen sink on its plugin manager, so it receives the event hooks below.

    Called once when an engine builds its registries.
    """


@hookspec
def aeon_register_state_stores(register: Register) -> None:
    """Register state stores (durable runs).

    :param register: ``register(name, factory)``; ``factory(**options)`` returns a
        :class:`~aeon_kernel.runtime.store.StateStore`, with ``options`` from the ``[state]`` table.

    Called once when an engine builds its registries. Runs are persisted only when ``[state] use`` names a store.
    """


@hookspec
def aeon_register_artifact_stores(register: Register) -> None:
    """Register artifact stores (spec 004 §10.1): where every run's outputs are kept, indexed for lookup.

    :param register: ``register(name, factory)``; ``factory(**options)`` returns an
        :class:`~aeon_kernel.runtime.artifacts.ArtifactStore`. ``[artifacts] use = NAME`` chooses one (off without
        ``[artifacts]`` in code; the CLI keeps one in the user data directory); ``aeon-core`` registers ``sqlite``.

    Called once when an engine builds its registries.
    """


@hookspec
def aeon_register_planners(register: Register) -> None:
    """Register planners: what writes a run's plan.

    :param register: ``register(name, factory)``; ``factory(**options)`` returns a
        :class:`~aeon_kernel.contracts.Planner`, with ``options`` from the ``[planner]`` table. A factory that
        names ``llm``, ``validator``, ``supervisor``, ``max_tokens`` or ``temperature`` gets the run's model
        (retrying), the chosen validator and supervisor, and ``[run]``'s settings (the kernel's ``model`` planner
        takes all five).

    Called once when an engine builds its registries. The kernel registers ``model`` (the default).
    """


@hookspec
def aeon_register_schedulers(register: Register) -> None:
    """Register schedulers: what decides each cycle's work in a run.

    :param register: ``register(name, factory)``; ``factory(**options)`` returns a
        :class:`~aeon_kernel.runtime.scheduler.Scheduler`, with ``options`` from the ``[scheduler]`` table. The
        factory is called once per run: a scheduler belongs to one run.

    Called once when an engine builds its registries. The kernel registers ``linear`` (the default).
    """


@hookspec
def aeon_register_depth_heuristics(register: Register) -> None:
    """Register adaptive-depth heuristics (spec 003): what profiles a task and allocates its TTL.

    :param register: ``register(name, factory)``; ``factory(**options)`` returns an
        :class:`~aeon_kernel.reasoning.contracts.AdaptiveDepth`, with ``options`` from the ``[depth]`` table; a
        factory that names ``llm``, ``validator``, ``supervisor``, ``max_tokens`` or ``temperature`` gets them too,
        as for convergence engines.

    Called once when an engine builds its registries. Used by multi-pass runs only.
    """


@hookspec
def aeon_register_semantic_validators(register: Register) -> None:
    """Register semantic validators (spec 003): what judges a plan's or the results' quality.

    :param register: ``register(name, factory)``; ``factory(**options)`` returns a
        :class:`~aeon_kernel.reasoning.contracts.SemanticValidator`, with ``options`` from the
        ``[semantic_validator]`` table; a factory that names ``llm``, ``validator``, ``supervisor``, ``max_tokens``
        or ``temperature`` gets them too, as for convergence engines.

    Called once when an engine builds its registries. Used by multi-pass runs only.
    """


@hookspec
def aeon_register_nodes(register: Register) -> None:
    """Register the code of deterministic flow nodes (spec 004), which ``flow.yaml`` names with ``impl: NAME``.

    :param register: ``register(name, factory)``; ``factory(**options)`` returns ``fn(value, context)``, called
        with the node's input and a :class:`~aeon_plugins.flow.nodes.NodeContext` and returning its output (JSON).
        ``options`` are the node's ``options`` in ``flow.yaml``. Use dotted names (``tickets.normalize``) to
        keep clear of other plugins.

    Called once when an engine builds its registries. A flow names code only through this registry, never by
    an import path.
    """


@hookspec
def aeon_register_retrieval_policies(register: Register) -> None:
    """Register context retrieval policies (spec 004 §4), which a profile of ``context.yaml`` names in ``policy``.

    :param register: ``register(name, factory)``; ``factory()`` returns ``policy(items, profile)``, which
        orders and filters one memory layer's items (``{"layer", "key", "value", "seq"}``) for a
        :class:`~aeon_plugins.flow.manifest.ProfileSpec`. The kernel registers ``recency`` and ``prefix``.

    Called once when an engine builds its registries.
    """


@hookspec
def aeon_register_flow_engines(register: Register) -> None:
    """Register flow engines: what ``Engine.from_config_dir(path)`` builds a flow directory with (spec 004 §8).

    :param register: ``register(name, factory)``; ``factory(engine, path)`` gets the
        :class:`~aeon_kernel.engine.Engine` (its plugins discovered, nothing built yet) and the directory, and
        returns the flow ready to run (``run``, ``start``, ``resume``, ``close``). Aeon registers ``flow``
        (:mod:`aeon_plugins.flow`), the engine ``from_config_dir`` uses unless told otherwise.

    Called once when an engine builds its registries.
    """


@hookspec
def aeon_register_executors(register: Register) -> None:
    """Register executors: what runs many tasks at once (``engine.submit``, ``engine.map``, ``aeon batch``).

    :param register: ``register(name, factory)``; ``factory(source, **options)`` returns an
        :class:`~aeon_kernel.runtime.executor.Executor` running tasks on ``source`` (an Engine: tasks are
        requests; a flow built on one: tasks are its inputs), with ``options`` from the ``[executor]`` table
        (``concurrency``, ``max_queued``, ``on_full`` and the executor's own). The kernel registers ``local``
        (threads in this process); Aeon's ``ray`` plugin registers ``ray``.

    Called once when an engine builds its registries.
    """


@hookspec
def aeon_register_policies(register: Register) -> None:
    """Register policies (spec 004 §10.5): what judges every tool call and flow stage before it runs.

    :param register: ``register(name, factory)``; ``factory(**options)`` returns an
        :class:`~aeon_kernel.policy.Policy`. ``[policy] use = [NAMES]`` chooses them and ``[policy.<name>]``
        holds each one's options. Aeon registers ``rules`` (declarative allow and deny rules).

    Called once when an engine builds its registries. Every chosen policy is asked about every action; one
    denial refuses it.
    """


@hookspec
def aeon_register_secret_providers(register: Register) -> None:
    """Register secret providers (spec 004 §10.11): where the secrets of ``aeon.toml`` come from.

    :param register: ``register(name, factory)``; ``factory()`` returns a
        :class:`~aeon_kernel.contracts.SecretProvider`. An option written ``{ "$<name>" = "reference" }``
        receives ``provider.get("reference")`` as a ``pydantic.SecretStr``, registered with the scrubbers.
        ``env`` and ``file`` are the kernel's own and cannot be replaced.

    Called once when an engine builds its registries; a provider is built when an option first names it.
    """


# --- decisions -------------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def aeon_execute_step(step: PlanStep, context: StepContext) -> StepExecutionResult | None:
    """Execute one plan step.

    :param step: the step, already marked ``running``.
    :param context: the run's components and state (tools, memory, model, supervisor, validator, state).
    :return: a :class:`~aeon_kernel.models.StepExecutionResult`, or None to leave the step to the next
        implementation. The kernel's implementation runs last and always returns a result.

    Called once per step, in plan order (FR-052). Stops at the first non-None result. An exception raised here
    fails the step and the run continues (FR-054).
    """


@hookspec(firstresult=True)
def aeon_invoke_tool(tool: Tool, arguments: dict[str, Any], context: ToolContext) -> ToolCall | None:
    """Invoke one tool.

    :param tool: the registered tool to call.
    :param arguments: its arguments. The kernel's step executor validates them against ``tool.input_schema``
        (repairing them through the supervisor) before it calls the tool.
    :param context: who calls: ``run_id``, ``step_id`` and the call's ``idempotency_key``.
    :return: the :class:`~aeon_kernel.models.ToolCall` record — with ``result``, or with ``error`` to refuse or
        fail the call — or None to leave the call to the next implementation. The kernel's implementation runs
        last, calls ``tool.invoke`` inside the idempotency scope and always returns a record.

    Called for every tool call a step executor makes through ``StepContext.call_tool``, which then holds the
    answer, whoever gave it, to ``tool.output_schema`` (a result that breaks it becomes an error record). Stops
    at the first non-None result. A ``wrapper=True`` implementation sees every call and its record, before that
    check; an exception raised here fails the step (FR-054).
    """


# --- events ----------------------------------------------------------------------------------------------------


@hookspec
def aeon_run_start(run_id: str, request: str, state: OrchestrationState, manifest: dict[str, Any]) -> None:
    """A run begins.

    :param run_id: the run's identifier (also in every log line).
    :param request: the user's request.
    :param state: the initial state (``plan`` is set when an initial plan was given).
    :param manifest: what produced this run: ``aeon_version``, ``hookspec_version``, ``plugins`` (name,
        distribution, version, targeted hookspec), ``config_fingerprint`` (secrets excluded) and ``model``. The
        JSONL sink writes it as the first line of the run.
    """


@hookspec
def aeon_run_resumed(run_id: str, state: OrchestrationState, entries: tuple[LogEntry, ...]) -> None:
    """An interrupted run is about to continue (``aeon resume``).

    :param run_id: the run's identifier.
    :param state: the state as the store committed it; a step that was running is executed again.
    :param entries: every committed cycle record, oldest first, so a sink can repair its log (the JSONL sink drops
        a torn last line and appends the records it is missing).

    Called before ``aeon_run_start`` of the resumed run.
    """


@hookspec
def aeon_cycle_end(entry: LogEntry, state: OrchestrationState) -> None:
    """An orchestration cycle ended, successfully or not (FR-037…039).

    :param entry: the cycle's log record, with every field of FR-038.
    :param state: the state after the cycle.

    Called from a ``finally`` block, so failing cycles are reported too. The JSONL sink writes ``entry`` as one line.
    """


@hookspec
def aeon_step_status_changed(run_id: str, step: PlanStep, previous: StepStatus) -> None:
    """A step changed status (pending → running → complete | failed).

    :param run_id: the run's identifier.
    :param step: the step after the change.
    :param previous: its status before the change.
    """


@hookspec
def aeon_tool_started(run_id: str, step_id: str, tool_name: str, arguments: dict[str, Any]) -> None:
    """A plan step is about to call a tool (the policies judge the call next; ``aeon_tool_called`` says how it went).

    :param run_id: the run's identifier.
    :param step_id: the step calling it.
    :param tool_name: the tool.
    :param arguments: the validated arguments, the tool's sensitive ones redacted.

    Only called while some plugin implements it (a streamed run does: ``ToolStarted``). Since hookspec 1.8.
    """


@hookspec
def aeon_tool_called(run_id: str, call: ToolCall) -> None:
    """A tool was invoked (or its arguments were rejected before invocation).

    :param run_id: the run's identifier.
    :param call: the record, with ``result`` or ``error``.
    """


@hookspec
def aeon_model_called(run_id: str, cycle: int, call: dict[str, Any]) -> None:
    """The model answered one request; reported as the cycle that made it ends, before ``aeon_cycle_end``.

    The state and the log keep each call's output only (a prompt is large, and rebuilt from the state each
    cycle); this hook is where a run gives out its prompts. The artifact collector keeps them (``model_call``
    artifacts), which is how ``aeon inspect`` shows the exact prompt of every call.

    :param run_id: the run's identifier.
    :param cycle: the cycle that made the call (its ``LogEntry.step_number``).
    :param call: ``number`` (its place among the cycle's calls, from 0); ``request``: ``model``, ``prompt``,
        ``system_prompt``, ``max_tokens``, ``temperature`` and ``json_schema`` as sent (None where the adapter
        cannot constrain decoding); ``started_ns`` (when it began: wall clock, ns since the epoch); and the
        response as the cycle's record keeps it: ``text``, ``usage``, ``constrained``, ``duration_ms`` (retries
        included). Shared by every implementation: read it, do not change it.
    """


@hookspec
def aeon_supervisor_action(run_id: str, action: SupervisorAction) -> None:
    """The supervisor made one repair attempt.

    :param run_id: the run's identifier.
    :param action: the attempt, with ``repaired_output`` or ``error``.
    """


@hookspec
def aeon_pass_event(run_id: str, pass_number: int, event: str, record: dict[str, Any]) -> None:
    """Something happened in a multi-pass run (spec 003).

    A pass began or ended, or a profile, a TTL allocation, a validation report, an assessment or a refinement
    came out.

    :param run_id: the run's identifier.
    :param pass_number: the pass (0 is the initial plan's).
    :param event: ``pass_start``, ``profile``, ``ttl``, ``report``, ``assessment``, ``refinement``,
        ``profile_update`` or ``pass_end``.
    :param record: the event's data as JSON: a ``TaskProfile``, a ``SemanticValidationReport``, a
        ``ConvergenceAssessment``, the refinement outcomes, or an ``ExecutionPass``, dumped.

    Called by the multi-pass scheduler as it goes; the JSONL sink writes each as a line.
    """


@hookspec
def aeon_run_end(run_id: str, result: dict[str, Any]) -> None:
    """A run ended.

    :param run_id: the run's identifier.
    :param result: what ``Orchestrator.execute`` returns (``RunResult.to_dict()``): ``run_id``, ``status``,
        ``plan``, ``answer``, ``errors``, ``message``, ``convergence`` and ``final_state``. Shared by every
        implementation: read it, do not change it.
    """
