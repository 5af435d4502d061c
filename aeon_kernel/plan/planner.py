"""The kernel's planner, ``model``: the model writes the plan (FR-006/010), and nothing it writes is used unchecked.

The plan is asked for with decoding constrained to the plan schema (naming the registered tools), then parsed,
validated and, when malformed, repaired by the supervisor, whose repair may not add a tool (FR-032). A planner
plugin (spec 003's RecursivePlanner) replaces this one by name: ``[planner] use = "..."``.
"""

from __future__ import annotations

from typing import Any

from aeon_kernel.contracts import Planner, RecordAction, Supervisor, Validator
from aeon_kernel.errors import SupervisorError, ValidationError
from aeon_kernel.llm.client import ModelClient
from aeon_kernel.llm.output import ensure_no_new_tools, parse_json
from aeon_kernel.llm.prompts import MAX_PLAN_STEPS, SYSTEM_PROMPT, plan_prompt, plan_schema
from aeon_kernel.llm.structured import ModelBacked, ignore_action
from aeon_kernel.models import Plan
from aeon_kernel.tools import ToolRegistry


class ModelPlanner(ModelBacked, Planner):
    """Plans with the run's model, constrained to the plan schema; repairs through the supervisor."""

    def __init__(
        self,
        llm: ModelClient,
        validator: Validator,
        supervisor: Supervisor,
        max_tokens: int = 512,
        temperature: float = 0.0,
        max_steps: int = MAX_PLAN_STEPS,
    ) -> None:
        super().__init__(llm, validator, supervisor, max_tokens, temperature)
        #: the longest plan the schema lets the model write
        self.max_steps = max_steps

    def generate_plan(
        self,
        task_description: str,
        task_profile: Any,
        tool_registry: ToolRegistry,
        *,
        record: RecordAction | None = None,
    ) -> Plan:
        record = record or ignore_action
        tools = tool_registry.export_tools_for_llm()
        text = self.llm.generate(
            plan_prompt(task_description, tools),
            SYSTEM_PROMPT,
            self.max_tokens,
            self.temperature,
            json_schema=plan_schema(tools, self.max_steps),
        )["text"]
        value = parse_json(text, self.supervisor, record)
        try:
            self.validator.validate_plan(value)
        except ValidationError:
            repaired = self.supervisor.repair_plan(value, record=record)
            ensure_no_new_tools(value, repaired)
            try:
                self.validator.validate_plan(repaired)
            except ValidationError as exc:
                raise SupervisorError(
                    f"the repaired plan is still invalid: {exc}", last_error=str(exc)
                ) from None
            value = repaired
        return Plan.model_validate(value)
