"""The ``schema`` validator: pydantic for plans, JSON Schema for model output and tool arguments (FR-024…027)."""

from __future__ import annotations

from typing import Any, Final

import pydantic

from aeon_kernel import (
    ConfigError,
    Plan,
    PlanStep,
    Register,
    ToolRegistry,
    ValidationError,
    Validator,
    hookimpl,
)
from aeon_kernel.kit import StepToolCheck, dumps_lenient, validate_against

#: The defaults of the size limits: far above any plan or call a model writes, far below what hurts a run.
MAX_PLAN_STEPS: Final = 1_000
MAX_PLAN_BYTES: Final = 1_048_576
MAX_ARGUMENT_BYTES: Final = 262_144


class SchemaValidator(Validator):
    """Schemas, plus limits on what a plan or a tool call may weigh (``[validator]`` options), so a runaway model,
    planner or user plan is a clear validation error rather than a run that writes gigabytes of state and log."""

    # class-level defaults too, so a subclass that does not call ``super().__init__`` still has its limits
    max_plan_steps: int = MAX_PLAN_STEPS
    max_plan_bytes: int = MAX_PLAN_BYTES
    max_argument_bytes: int = MAX_ARGUMENT_BYTES

    def __init__(
        self,
        max_plan_steps: int = MAX_PLAN_STEPS,
        max_plan_bytes: int = MAX_PLAN_BYTES,
        max_argument_bytes: int = MAX_ARGUMENT_BYTES,
    ) -> None:
        for name, value in [
            ("max_plan_steps", max_plan_steps),
            ("max_plan_bytes", max_plan_bytes),
            ("max_argument_bytes", max_argument_bytes),
        ]:
            if type(value) is not int or value < 1:
                raise ConfigError(f"schema validator: {name} must be a positive integer, got {value!r}")
        self.max_plan_steps = max_plan_steps
        self.max_plan_bytes = max_plan_bytes
        self.max_argument_bytes = max_argument_bytes

    def validate_plan(self, plan_dict: dict[str, Any]) -> bool:
        self._plan(plan_dict)
        return True

    def validated_plan(self, plan_dict: dict[str, Any]) -> Plan:
        """One validation: the check builds the Plan (unless a subclass adds rules to ``validate_plan``)."""
        if type(self).validate_plan is not SchemaValidator.validate_plan:
            return super().validated_plan(plan_dict)
        return self._plan(plan_dict)

    def _plan(self, plan_dict: dict[str, Any]) -> Plan:
        if not isinstance(plan_dict, dict):
            raise ValidationError(f"a plan must be a JSON object, got {type(plan_dict).__name__}")
        steps = plan_dict.get("steps")
        if isinstance(steps, (list, tuple)) and len(steps) > self.max_plan_steps:
            raise ValidationError(
                f"the plan has {len(steps):,} steps, more than the {self.max_plan_steps:,} allowed "
                "(max_plan_steps under [validator] in aeon.toml)"
            )
        _check_size(plan_dict, self.max_plan_bytes, "the plan", "max_plan_bytes")
        try:
            return Plan.model_validate(plan_dict)
        except pydantic.ValidationError as exc:
            errors = [f"at {'.'.join(map(str, e['loc'])) or '$'}: {e['msg']}" for e in exc.errors()]
            raise ValidationError("invalid plan: " + "; ".join(errors), errors) from None

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
        _check_size(arguments, self.max_argument_bytes, f"the arguments for {name}", "max_argument_bytes")
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


def _check_size(value: Any, limit: int, what: str, option: str) -> None:
    size = len(dumps_lenient(value).encode("utf-8", "backslashreplace"))
    if size > limit:
        raise ValidationError(
            f"{what} take {size:,} bytes as JSON, more than the {limit:,} allowed ({option} under [validator])"
        )


@hookimpl
def aeon_register_validators(register: Register) -> None:
    register("schema", SchemaValidator)
