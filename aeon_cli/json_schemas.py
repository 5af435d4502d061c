"""The JSON Schemas of the data model and of flow manifests, for external tooling (specs 001, 003, 004;
``aeon schemas``, ``docs/schemas/``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from aeon_kernel.models import (
    ConvergenceAssessment,
    LogEntry,
    MemoryEntry,
    OrchestrationState,
    Plan,
    PlanStep,
    SupervisorAction,
    ToolCall,
)
from aeon_kernel.reasoning.models import (
    ExecutionHistory,
    ExecutionPass,
    RefinementAction,
    SemanticValidationReport,
    TaskProfile,
    ValidationIssue,
)
from aeon_kernel.tools import Tool
from aeon_plugins.flow.manifest import ContextFile, FlowSpec, MemoryFile

EXPORTED_MODELS: tuple[type[BaseModel], ...] = (
    Plan,
    PlanStep,
    OrchestrationState,
    ToolCall,
    MemoryEntry,
    SupervisorAction,
    LogEntry,
    Tool,
    # spec 003
    TaskProfile,
    ConvergenceAssessment,
    SemanticValidationReport,
    ValidationIssue,
    RefinementAction,
    ExecutionPass,
    ExecutionHistory,
    # spec 004: the manifests of a flow directory (flow.yaml, context.yaml, memory.yaml)
    FlowSpec,
    ContextFile,
    MemoryFile,
)


def export_json_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema of every data-model entity, by model name."""
    return {model.__name__: model.model_json_schema() for model in EXPORTED_MODELS}
