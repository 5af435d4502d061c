"""The kernel's planner, ``model``: the model writes the plan (FR-006/010), and nothing it writes is used unchecked.

The plan is asked for with decoding constrained to the plan schema (naming the registered tools), then read by
:func:`~aeon_kernel.plan.parse.parse_plan`: parsed, validated and, when malformed, repaired by the supervisor,
whose repair may not add a tool (FR-032). A planner plugin (spec 003's RecursivePlanner) replaces this one by
name: ``[planner] use = "..."``.
"""

from __future__ import annotations

from typing import Any

from aeon_kernel.contracts import Planner, RecordAction, Supervisor, Validator
from aeon_kernel.llm.client import ModelClient
from aeon_kernel.llm.prompts import MAX_PLAN_STEPS, SYSTEM_PROMPT, plan_prompt, plan_schema
from aeon_kernel.llm.structured import ModelBacked
from aeon_kernel.models import Plan
from aeon_kernel.plan.parse import parse_plan
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
        tools = tool_registry.export_tools_for_llm()
        text = self.llm.generate(
            plan_prompt(task_description, tools),
            SYSTEM_PROMPT,
            self.max_tokens,
            self.temperature,
            json_schema=plan_schema(tools, self.max_steps),
        )["text"]
        return parse_plan(text, tool_registry, self.supervisor, self.validator, record=record).plan
