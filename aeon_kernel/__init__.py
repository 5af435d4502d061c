"""Aeon: a small, strict LLM orchestration kernel.

The public API is re-exported here, lazily (PEP 562): ``import aeon_kernel`` costs almost nothing, and each name
loads its module on first use. Nothing here imports a plugin, the CLI library, an HTTP client or a model runtime
(DESIGN rule 5): plugins are discovered from entry-point metadata when an Engine is built.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from aeon_kernel.contracts import (
        ConvergenceEngine,
        FunctionTool,
        LLMAdapter,
        LLMResponse,
        Memory,
        StepToolCheck,
        Supervisor,
        TelemetrySink,
        Tool,
        Validator,
    )
    from aeon_kernel.engine import Engine
    from aeon_kernel.errors import (
        AeonError,
        ConfigError,
        DuplicateComponentError,
        ExecutionError,
        LLMError,
        LLMTransientError,
        MemoryStoreError,
        OrchestrationError,
        PluginError,
        StateTransitionError,
        SupervisorError,
        ToolError,
        ToolRegistrationError,
        UnknownComponentError,
        ValidationError,
    )
    from aeon_kernel.hookspecs import (
        HOOKSPEC_VERSION,
        hookimpl,
    )
    from aeon_kernel.idempotency import current_idempotency_key
    from aeon_kernel.models import (
        ConvergenceAssessment,
        LogEntry,
        MemoryEntry,
        OrchestrationState,
        Plan,
        PlanStep,
        StepExecutionResult,
        StepStatus,
        SupervisorAction,
        ToolCall,
    )
    from aeon_kernel.orchestrator import Orchestrator
    from aeon_kernel.registry import (
        Register,
        ToolRegistry,
    )
    from aeon_kernel.state_store import RunStoreError, StateStore

_EXPORTS: dict[str, str] = {
    "ConvergenceEngine": "aeon_kernel.contracts",
    "FunctionTool": "aeon_kernel.contracts",
    "LLMAdapter": "aeon_kernel.contracts",
    "LLMResponse": "aeon_kernel.contracts",
    "Memory": "aeon_kernel.contracts",
    "StepToolCheck": "aeon_kernel.contracts",
    "Supervisor": "aeon_kernel.contracts",
    "TelemetrySink": "aeon_kernel.contracts",
    "Tool": "aeon_kernel.contracts",
    "Validator": "aeon_kernel.contracts",
    "AeonError": "aeon_kernel.errors",
    "ConfigError": "aeon_kernel.errors",
    "DuplicateComponentError": "aeon_kernel.errors",
    "ExecutionError": "aeon_kernel.errors",
    "LLMError": "aeon_kernel.errors",
    "LLMTransientError": "aeon_kernel.errors",
    "MemoryStoreError": "aeon_kernel.errors",
    "OrchestrationError": "aeon_kernel.errors",
    "PluginError": "aeon_kernel.errors",
    "StateTransitionError": "aeon_kernel.errors",
    "SupervisorError": "aeon_kernel.errors",
    "ToolError": "aeon_kernel.errors",
    "ToolRegistrationError": "aeon_kernel.errors",
    "UnknownComponentError": "aeon_kernel.errors",
    "ValidationError": "aeon_kernel.errors",
    "HOOKSPEC_VERSION": "aeon_kernel.hookspecs",
    "hookimpl": "aeon_kernel.hookspecs",
    "ConvergenceAssessment": "aeon_kernel.models",
    "LogEntry": "aeon_kernel.models",
    "MemoryEntry": "aeon_kernel.models",
    "OrchestrationState": "aeon_kernel.models",
    "Plan": "aeon_kernel.models",
    "PlanStep": "aeon_kernel.models",
    "StepExecutionResult": "aeon_kernel.models",
    "StepStatus": "aeon_kernel.models",
    "SupervisorAction": "aeon_kernel.models",
    "ToolCall": "aeon_kernel.models",
    "Register": "aeon_kernel.registry",
    "ToolRegistry": "aeon_kernel.registry",
    "Engine": "aeon_kernel.engine",
    "current_idempotency_key": "aeon_kernel.idempotency",
    "StateStore": "aeon_kernel.state_store",
    "RunStoreError": "aeon_kernel.state_store",
    "Orchestrator": "aeon_kernel.orchestrator",
}

__all__ = [
    "HOOKSPEC_VERSION",
    "AeonError",
    "ConfigError",
    "ConvergenceAssessment",
    "ConvergenceEngine",
    "DuplicateComponentError",
    "Engine",
    "ExecutionError",
    "FunctionTool",
    "LLMAdapter",
    "LLMError",
    "LLMResponse",
    "LLMTransientError",
    "LogEntry",
    "Memory",
    "MemoryEntry",
    "MemoryStoreError",
    "OrchestrationError",
    "OrchestrationState",
    "Orchestrator",
    "Plan",
    "PlanStep",
    "PluginError",
    "Register",
    "RunStoreError",
    "StateStore",
    "StateTransitionError",
    "StepExecutionResult",
    "StepStatus",
    "StepToolCheck",
    "Supervisor",
    "SupervisorAction",
    "SupervisorError",
    "TelemetrySink",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolRegistrationError",
    "ToolRegistry",
    "UnknownComponentError",
    "ValidationError",
    "Validator",
    "__version__",
    "current_idempotency_key",
    "hookimpl",
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
