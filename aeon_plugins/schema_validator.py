"""The ``schema`` validator: pydantic for plans, JSON Schema for model output and tool arguments (FR-024…027)."""

from __future__ import annotations

from typing import Any

import pydantic

from aeon_kernel import (
    Plan,
    PlanStep,
    Register,
    StepToolCheck,
    ToolRegistry,
    ValidationError,
    Validator,
    hookimpl,
    validate_against,
)


class SchemaValidator(Validator):
    def validate_plan(self, plan_dict: dict[str, Any]) -> bool:
        if not isinstance(plan_dict, dict):
            raise ValidationError(f"a plan must be a JSON object, got {type(plan_dict).__name__}")
        try:
            Plan.model_validate(plan_dict)
        except pydantic.ValidationError as exc:
            errors = [f"at {'.'.join(map(str, e['loc'])) or '$'}: {e['msg']}" for e in exc.errors()]
            raise ValidationError("invalid plan: " + "; ".join(errors), errors) from None
        return True

    def validate_llm_output(self, output: Any, expected_schema: dict[str, Any] | None = None) -> bool:
        if expected_schema is None:
            if not isinstance(output, dict):
                raise ValidationError(f"model output must be a JSON object, got {type(output).__name__}")
            return True
        validate_against(expected_schema, output, "model output")
        return True

    def validate_tool_call(self, tool_call: dict[str, Any], tool_schema: dict[str, Any]) -> bool:
        if not isinstance(tool_call, dict):
            raise ValidationError(f"a tool call must be a JSON object, got {type(tool_call).__name__}")
        name = tool_call.get("tool_name", "the tool")
        arguments = tool_call.get("arguments")
        if not isinstance(arguments, dict):
            raise ValidationError(
                f"arguments for {name} must be a JSON object, got {type(arguments).__name__}"
            )
        validate_against(tool_schema, arguments, f"arguments for {name}")
        return True

    def validate_step_tool(self, step: PlanStep, tool_registry: ToolRegistry) -> StepToolCheck:
        if step.tool is None and step.agent == "llm":
            return StepToolCheck.trusted(valid=True, error=None, step=step)
        if step.tool is None:
            error = f"step {step.step_id!r} names no tool and is not an llm step"
        elif step.tool not in tool_registry:
            available = ", ".join(tool_registry.list_all()) or "none"
            error = f"Tool {step.tool!r} not found in registry (available: {available})"
        else:
            return StepToolCheck.trusted(valid=True, error=None, step=step)
        errors = step.errors if error in step.errors else (*step.errors, error)
        return StepToolCheck(valid=False, error=error, step=step.model_copy(update={"errors": errors}))


@hookimpl
def aeon_register_validators(register: Register) -> None:
    register("schema", SchemaValidator)
