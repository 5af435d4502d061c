"""Aeon: a small, strict LLM orchestration kernel.

The public API is re-exported here. Importing ``aeon_kernel`` loads no plugin, no CLI library, no HTTP client
and no model runtime (DESIGN rule 5): plugins are discovered from entry-point metadata when an Engine is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
from aeon_kernel.hookspecs import HOOKSPEC_VERSION, hookimpl
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
from aeon_kernel.registry import Register, ToolRegistry

if TYPE_CHECKING:
    from aeon_kernel.engine import Engine
    from aeon_kernel.orchestrator import Orchestrator

__version__ = "0.1.0"

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
    "hookimpl",
]


def __getattr__(name: str) -> object:
    """``Engine`` and ``Orchestrator`` are imported on first use, keeping ``import aeon_kernel`` light."""
    if name == "Engine":
        from aeon_kernel.engine import Engine

        return Engine
    if name == "Orchestrator":
        from aeon_kernel.orchestrator import Orchestrator

        return Orchestrator
    raise AttributeError(f"module 'aeon_kernel' has no attribute {name!r}")
