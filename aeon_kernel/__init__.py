"""Aeon: a small, strict LLM orchestration kernel.

This module is the public API: what plugins, embedders and tests may import (plus :mod:`aeon_kernel.testing`).
Every other module is internal and may change between releases. Names are re-exported lazily (PEP 562):
``import aeon_kernel`` costs almost nothing, and each name loads its module on first use. Nothing here imports a
plugin, the CLI library, an HTTP client or a model runtime (DESIGN rule 5).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from aeon_kernel.version import __version__

if TYPE_CHECKING:
    from aeon_kernel.config import (
        AeonConfig,
    )
    from aeon_kernel.contracts import (
        ConvergenceEngine,
        LLMAdapter,
        LLMResponse,
        Memory,
        Planner,
        RecordAction,
        SecretProvider,
        StepToolCheck,
        Supervisor,
        TelemetrySink,
        Validator,
        plan_progress,
    )
    from aeon_kernel.engine import (
        Engine,
    )
    from aeon_kernel.errors import (
        AeonError,
        ComponentBuildError,
        ConfigError,
        DeadlineError,
        DuplicateComponentError,
        LLMError,
        LLMTransientError,
        MemoryStoreError,
        NestingDepthError,
        OrchestrationError,
        PermissionDeniedError,
        PluginError,
        PolicyDeniedError,
        RefinementLimitError,
        RunStoreError,
        StateTransitionError,
        SupervisorError,
        ToolError,
        ToolRegistrationError,
        UnknownComponentError,
        ValidationError,
    )
    from aeon_kernel.flow.engine import (
        FlowEngine,
        TaskResult,
    )
    from aeon_kernel.flow.graph import (
        Flow,
    )
    from aeon_kernel.flow.loader import (
        FlowError,
        load_flow,
    )
    from aeon_kernel.flow.manifest import (
        FlowSpec,
        NodeSpec,
        ProfileSpec,
    )
    from aeon_kernel.flow.nodes import (
        NodeContext,
        ToolMisuseError,
    )
    from aeon_kernel.hookspecs import (
        HOOKSPEC_VERSION,
    )
    from aeon_kernel.idempotency import (
        current_idempotency_key,
    )
    from aeon_kernel.invocation import (
        ToolContext,
    )
    from aeon_kernel.llm.client import (
        ModelClient,
    )
    from aeon_kernel.llm.output import (
        MAX_REPAIR_CHARS,
        check_depth,
        dumps_lenient,
        ensure_no_new_tools,
        ensure_repairable,
        loads_strict,
        tool_names,
        tools_not_in,
    )
    from aeon_kernel.llm.structured import (
        ModelBacked,
        ask_json,
        ignore_action,
    )
    from aeon_kernel.logs import (
        PLAN_CHANGES,
        changed_steps,
        expand_log,
        read_log,
    )
    from aeon_kernel.markers import (
        hookimpl,
    )
    from aeon_kernel.memory_values import (
        INT64_MAX,
        INT64_MIN,
        check_amount,
        check_key,
        check_prefix,
        decode_value,
        encode_value,
        increment_error,
        is_utf8,
    )
    from aeon_kernel.models import (
        ClarityState,
        ConvergenceAssessment,
        LogEntry,
        MemoryEntry,
        OrchestrationState,
        Phase,
        Plan,
        PlanStep,
        RunStatus,
        StepExecutionResult,
        StepStatus,
        SupervisorAction,
        SupervisorActionType,
        ToolCall,
        utc_now,
    )
    from aeon_kernel.orchestrator import (
        Orchestrator,
    )
    from aeon_kernel.plan.context import (
        StepContext,
    )
    from aeon_kernel.plan.grounding import (
        facts_in,
        numbers_in,
        unused_numbers,
    )
    from aeon_kernel.plan.parse import (
        PlanParse,
        normalize_plan,
        parse_plan,
        repair_json_text,
    )
    from aeon_kernel.plan.planner import (
        ModelPlanner,
    )
    from aeon_kernel.policy import (
        Policy,
        PolicyAction,
        PolicyDecision,
    )
    from aeon_kernel.reasoning.contracts import (
        AdaptiveDepth,
        RecursivePlanner,
        SemanticValidator,
    )
    from aeon_kernel.reasoning.deltas import (
        depth_of,
    )
    from aeon_kernel.reasoning.models import (
        SEVERITY_ORDER,
        ArtifactType,
        ExecutionHistory,
        ExecutionPass,
        IssueType,
        RefinementAction,
        SemanticValidationReport,
        Severity,
        TaskProfile,
        ValidationIssue,
    )
    from aeon_kernel.reasoning.ttl import (
        allocate_ttl,
    )
    from aeon_kernel.registry import (
        Register,
    )
    from aeon_kernel.runtime.artifacts import (
        Artifact,
        ArtifactStore,
    )
    from aeon_kernel.runtime.context import (
        Components,
        RunContext,
    )
    from aeon_kernel.runtime.durable import (
        check_claim,
        failure_text,
        plan_snapshots,
        storable_json,
        storable_model_json,
        storable_result,
        storable_text,
        stored_state,
    )
    from aeon_kernel.runtime.executor import (
        BackpressureError,
        Executor,
        ExecutorSettings,
        LocalExecutor,
    )
    from aeon_kernel.runtime.ray_executor import RayExecutor
    from aeon_kernel.runtime.run import (
        Run,
        RunResult,
    )
    from aeon_kernel.runtime.scheduler import (
        Conclusion,
        Scheduler,
        Verdict,
        Work,
    )
    from aeon_kernel.runtime.sqlite_wal import (
        use_wal,
    )
    from aeon_kernel.runtime.state import (
        RunState,
    )
    from aeon_kernel.runtime.store import (
        RunSummary,
        StateStore,
        StoredRun,
    )
    from aeon_kernel.runtime.tasks import (
        TaskCancelledError,
        TaskHandle,
        Tasks,
        TaskStatus,
    )
    from aeon_kernel.schemas import (
        canonical_json,
        check_schema,
        schema_errors,
        validate_against,
    )
    from aeon_kernel.secrets import (
        clean_secret,
        register_secret,
        scrub_secrets,
        scrub_secrets_data,
        scrub_secrets_json,
    )
    from aeon_kernel.tools import (
        FunctionTool,
        Tool,
        ToolRegistry,
        workspace_root,
    )

#: module -> the public names it defines
_MODULES: dict[str, tuple[str, ...]] = {
    "aeon_kernel.config": ("AeonConfig",),
    "aeon_kernel.contracts": (
        "ConvergenceEngine",
        "LLMAdapter",
        "LLMResponse",
        "Memory",
        "Planner",
        "RecordAction",
        "SecretProvider",
        "StepToolCheck",
        "Supervisor",
        "TelemetrySink",
        "Validator",
        "plan_progress",
    ),
    "aeon_kernel.tools": (
        "FunctionTool",
        "Tool",
        "ToolRegistry",
        "workspace_root",
    ),
    "aeon_kernel.invocation": ("ToolContext",),
    "aeon_kernel.engine": ("Engine",),
    "aeon_kernel.errors": (
        "AeonError",
        "ComponentBuildError",
        "ConfigError",
        "DeadlineError",
        "DuplicateComponentError",
        "LLMError",
        "LLMTransientError",
        "MemoryStoreError",
        "NestingDepthError",
        "OrchestrationError",
        "PermissionDeniedError",
        "PluginError",
        "PolicyDeniedError",
        "RefinementLimitError",
        "RunStoreError",
        "StateTransitionError",
        "SupervisorError",
        "ToolError",
        "ToolRegistrationError",
        "UnknownComponentError",
        "ValidationError",
    ),
    "aeon_kernel.flow.engine": ("FlowEngine", "TaskResult"),
    "aeon_kernel.flow.graph": ("Flow",),
    "aeon_kernel.flow.loader": ("FlowError", "load_flow"),
    "aeon_kernel.flow.manifest": ("FlowSpec", "NodeSpec", "ProfileSpec"),
    "aeon_kernel.flow.nodes": ("NodeContext", "ToolMisuseError"),
    "aeon_kernel.hookspecs": ("HOOKSPEC_VERSION",),
    "aeon_kernel.logs": ("PLAN_CHANGES", "changed_steps", "expand_log", "read_log"),
    "aeon_kernel.markers": ("hookimpl",),
    "aeon_kernel.idempotency": ("current_idempotency_key",),
    "aeon_kernel.models": (
        "ConvergenceAssessment",
        "LogEntry",
        "MemoryEntry",
        "ClarityState",
        "OrchestrationState",
        "Phase",
        "Plan",
        "PlanStep",
        "RunStatus",
        "StepExecutionResult",
        "StepStatus",
        "SupervisorAction",
        "SupervisorActionType",
        "ToolCall",
        "utc_now",
    ),
    "aeon_kernel.orchestrator": ("Orchestrator",),
    "aeon_kernel.registry": ("Register",),
    "aeon_kernel.runtime.run": (
        "Run",
        "RunResult",
    ),
    "aeon_kernel.runtime.scheduler": (
        "Conclusion",
        "Scheduler",
        "Verdict",
        "Work",
    ),
    "aeon_kernel.runtime.artifacts": ("Artifact", "ArtifactStore"),
    "aeon_kernel.runtime.context": (
        "Components",
        "RunContext",
    ),
    "aeon_kernel.runtime.executor": ("BackpressureError", "Executor", "ExecutorSettings", "LocalExecutor"),
    "aeon_kernel.runtime.ray_executor": ("RayExecutor",),
    "aeon_kernel.runtime.sqlite_wal": ("use_wal",),
    "aeon_kernel.runtime.state": ("RunState",),
    "aeon_kernel.runtime.tasks": ("TaskCancelledError", "TaskHandle", "TaskStatus", "Tasks"),
    "aeon_kernel.runtime.store": (
        "RunSummary",
        "StateStore",
        "StoredRun",
    ),
    "aeon_kernel.runtime.durable": (
        "check_claim",
        "failure_text",
        "plan_snapshots",
        "storable_json",
        "storable_model_json",
        "storable_result",
        "storable_text",
        "stored_state",
    ),
    "aeon_kernel.plan.context": ("StepContext",),
    "aeon_kernel.plan.parse": (
        "PlanParse",
        "normalize_plan",
        "parse_plan",
        "repair_json_text",
    ),
    "aeon_kernel.plan.planner": ("ModelPlanner",),
    "aeon_kernel.policy": ("Policy", "PolicyAction", "PolicyDecision"),
    "aeon_kernel.llm.client": ("ModelClient",),
    "aeon_kernel.llm.output": (
        "MAX_REPAIR_CHARS",
        "check_depth",
        "dumps_lenient",
        "ensure_no_new_tools",
        "ensure_repairable",
        "loads_strict",
        "tool_names",
        "tools_not_in",
    ),
    "aeon_kernel.schemas": (
        "canonical_json",
        "check_schema",
        "schema_errors",
        "validate_against",
    ),
    "aeon_kernel.secrets": (
        "clean_secret",
        "register_secret",
        "scrub_secrets",
        "scrub_secrets_data",
        "scrub_secrets_json",
    ),
    "aeon_kernel.memory_values": (
        "INT64_MAX",
        "INT64_MIN",
        "check_amount",
        "check_key",
        "check_prefix",
        "decode_value",
        "encode_value",
        "increment_error",
        "is_utf8",
    ),
    "aeon_kernel.reasoning.models": (
        "SEVERITY_ORDER",
        "ArtifactType",
        "IssueType",
        "Severity",
        "ExecutionHistory",
        "ExecutionPass",
        "RefinementAction",
        "SemanticValidationReport",
        "TaskProfile",
        "ValidationIssue",
    ),
    "aeon_kernel.reasoning.contracts": (
        "AdaptiveDepth",
        "RecursivePlanner",
        "SemanticValidator",
    ),
    "aeon_kernel.reasoning.deltas": ("depth_of",),
    "aeon_kernel.plan.grounding": ("facts_in", "numbers_in", "unused_numbers"),
    "aeon_kernel.reasoning.ttl": ("allocate_ttl",),
    "aeon_kernel.llm.structured": (
        "ModelBacked",
        "ask_json",
        "ignore_action",
    ),
}
_EXPORTS: dict[str, str] = {name: module for module, names in _MODULES.items() for name in names}

#: every public name (a test keeps it equal to the table above)
__all__ = [
    "HOOKSPEC_VERSION",
    "INT64_MAX",
    "INT64_MIN",
    "MAX_REPAIR_CHARS",
    "PLAN_CHANGES",
    "SEVERITY_ORDER",
    "AdaptiveDepth",
    "AeonConfig",
    "AeonError",
    "Artifact",
    "ArtifactStore",
    "ArtifactType",
    "BackpressureError",
    "ClarityState",
    "ComponentBuildError",
    "Components",
    "Conclusion",
    "ConfigError",
    "ConvergenceAssessment",
    "ConvergenceEngine",
    "DeadlineError",
    "DuplicateComponentError",
    "Engine",
    "ExecutionHistory",
    "ExecutionPass",
    "Executor",
    "ExecutorSettings",
    "Flow",
    "FlowEngine",
    "FlowError",
    "FlowSpec",
    "FunctionTool",
    "IssueType",
    "LLMAdapter",
    "LLMError",
    "LLMResponse",
    "LLMTransientError",
    "LocalExecutor",
    "LogEntry",
    "Memory",
    "MemoryEntry",
    "MemoryStoreError",
    "ModelBacked",
    "ModelClient",
    "ModelPlanner",
    "NestingDepthError",
    "NodeContext",
    "NodeSpec",
    "OrchestrationError",
    "OrchestrationState",
    "Orchestrator",
    "PermissionDeniedError",
    "Phase",
    "Plan",
    "PlanParse",
    "PlanStep",
    "Planner",
    "PluginError",
    "Policy",
    "PolicyAction",
    "PolicyDecision",
    "PolicyDeniedError",
    "ProfileSpec",
    "RayExecutor",
    "RecordAction",
    "RecursivePlanner",
    "RefinementAction",
    "RefinementLimitError",
    "Register",
    "Run",
    "RunContext",
    "RunResult",
    "RunState",
    "RunStatus",
    "RunStoreError",
    "RunSummary",
    "Scheduler",
    "SecretProvider",
    "SemanticValidationReport",
    "SemanticValidator",
    "Severity",
    "StateStore",
    "StateTransitionError",
    "StepContext",
    "StepExecutionResult",
    "StepStatus",
    "StepToolCheck",
    "StoredRun",
    "Supervisor",
    "SupervisorAction",
    "SupervisorActionType",
    "SupervisorError",
    "TaskCancelledError",
    "TaskHandle",
    "TaskProfile",
    "TaskResult",
    "TaskStatus",
    "Tasks",
    "TelemetrySink",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolMisuseError",
    "ToolRegistrationError",
    "ToolRegistry",
    "UnknownComponentError",
    "ValidationError",
    "ValidationIssue",
    "Validator",
    "Verdict",
    "Work",
    "__version__",
    "allocate_ttl",
    "ask_json",
    "canonical_json",
    "changed_steps",
    "check_amount",
    "check_claim",
    "check_depth",
    "check_key",
    "check_prefix",
    "check_schema",
    "clean_secret",
    "current_idempotency_key",
    "decode_value",
    "depth_of",
    "dumps_lenient",
    "encode_value",
    "ensure_no_new_tools",
    "ensure_repairable",
    "expand_log",
    "facts_in",
    "failure_text",
    "hookimpl",
    "ignore_action",
    "increment_error",
    "is_utf8",
    "load_flow",
    "loads_strict",
    "normalize_plan",
    "numbers_in",
    "parse_plan",
    "plan_progress",
    "plan_snapshots",
    "read_log",
    "register_secret",
    "repair_json_text",
    "schema_errors",
    "scrub_secrets",
    "scrub_secrets_data",
    "scrub_secrets_json",
    "storable_json",
    "storable_model_json",
    "storable_result",
    "storable_text",
    "stored_state",
    "tool_names",
    "tools_not_in",
    "unused_numbers",
    "use_wal",
    "utc_now",
    "validate_against",
    "workspace_root",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'aeon_kernel' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return __all__
