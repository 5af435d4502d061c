"""Tools (FR-019…023): the Tool contract, the registry a run calls into, and the one way a tool is invoked.

Every tool invocation goes through the ``aeon_invoke_tool`` hook, whose kernel implementation (here, ``trylast``)
runs the tool inside its idempotency scope and checks the result against ``output_schema``. A plugin can deny a
call (``tryfirst``, returning a ``ToolCall`` with an error), or wrap it (``wrapper=True``) to time, limit or
sandbox it — the seam that the permissions and policies of spec 004 §5/§10.5 plug into.
"""

from __future__ import annotations

import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from aeon_kernel.errors import AeonError, ToolRegistrationError, ValidationError
from aeon_kernel.idempotency import idempotency_scope
from aeon_kernel.markers import hookimpl
from aeon_kernel.schemas import check_schema, schema_errors

if TYPE_CHECKING:
    from aeon_kernel.models import ToolCall

_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]+")


class Tool(BaseModel, ABC):
    """A tool: a name, a description, JSON Schemas for input and output, and ``invoke`` (FR-019).

    A tool is a pydantic model, so its definition is validated when it is created: blank names and invalid
    schemas are rejected up front rather than at the first call. Validators are compiled once per schema.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, validate_default=True)

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    example: dict[str, Any] | None = None

    # Validators rather than Field constraints: a subclass that redeclares ``name: str = "echo"`` keeps them.
    @field_validator("name")
    @classmethod
    def _valid_name(cls, name: str) -> str:
        if not _TOOL_NAME.fullmatch(name):
            raise ValueError(f"tool names are letters, digits, '_', '.' and '-' (got {name!r})")
        return name

    @field_validator("description")
    @classmethod
    def _valid_description(cls, description: str) -> str:
        if not description.strip():
            raise ValueError("a tool needs a description: the model chooses tools by it")
        return description

    @field_validator("input_schema", "output_schema")
    @classmethod
    def _valid_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        try:
            check_schema(schema)
        except ValidationError as exc:
            raise ValueError(str(exc)) from None
        return schema

    @abstractmethod
    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        """Run the tool on arguments already validated against ``input_schema``. Raise ToolError on failure."""

    def validate_input(self, **kwargs: Any) -> bool:
        """True when ``kwargs`` match ``input_schema``; raises :class:`ValidationError` listing each problem."""
        return self._check(self.input_schema, kwargs, "arguments")

    def validate_output(self, result: dict[str, Any]) -> bool:
        """True when ``result`` matches ``output_schema``; raises :class:`ValidationError` otherwise."""
        return self._check(self.output_schema, result, "result")

    def _check(self, schema: dict[str, Any], value: Any, what: str) -> bool:
        errors = schema_errors(schema, value)
        if errors:
            raise ValidationError(f"{self.name} {what} invalid: " + "; ".join(errors), errors)
        return True

    def describe(self) -> dict[str, Any]:
        """The tool as ``export_tools_for_llm`` shows it."""
        return self.model_dump(include={"name", "description", "input_schema", "output_schema", "example"})


class FunctionTool(Tool):
    """Wrap a plain function as a tool, so embedders need not subclass :class:`Tool`."""

    function: Callable[..., dict[str, Any]] = Field(exclude=True)

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        return self.function(**kwargs)


class ToolRegistry:
    """The tools a run may call (FR-020…022), with spec 002's interface."""

    def __init__(self, tools: list[Tool] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools or ():
            self.register(tool)

    def register(self, tool: Tool) -> None:
        """Add ``tool``. Its schemas were validated when it was built; a duplicate name is refused."""
        if not isinstance(tool, Tool):
            raise ToolRegistrationError(
                f"expected an aeon_kernel.Tool, got {type(tool).__name__}; wrap functions with FunctionTool"
            )
        if tool.name in self._tools:
            raise ToolRegistrationError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def list_all(self) -> list[str]:
        return list(self._tools)

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)

    def export_tools_for_llm(self) -> list[dict[str, Any]]:
        """Every tool's name, description, schemas and example, for prompts and repairs."""
        return [tool.describe() for tool in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Who is calling a tool: the run and the step. Passed to every ``aeon_invoke_tool`` implementation."""

    run_id: str
    step_id: str

    @property
    def idempotency_key(self) -> str:
        """``"<run_id>:<step_id>"``: the same when a resumed run executes a step again."""
        return f"{self.run_id}:{self.step_id}"


def invoke_tool(tool: Tool, arguments: dict[str, Any], context: ToolContext) -> ToolCall:
    """Run a tool; any exception, or a result that breaks ``output_schema``, is a tool failure (FR-054)."""
    from aeon_kernel.models import ToolCall, utc_now  # the data model is not needed to define a tool

    started = time.perf_counter()
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    try:
        with idempotency_scope(context.run_id, context.step_id):
            result = tool.invoke(**arguments)
        if not isinstance(result, dict):
            raise ValidationError(f"{tool.name} returned {type(result).__name__}, not an object")
        tool.validate_output(result)
    except Exception as exc:
        result = None
        error = failed_call_error(tool.name, exc)
    # Every field is built here, and ``result`` xor ``error`` holds by construction.
    return ToolCall.trusted(
        tool_name=tool.name,
        arguments=arguments,
        step_id=context.step_id,
        result=result,
        error=error,
        duration_ms=round((time.perf_counter() - started) * 1000, 3),
        timestamp=utc_now(),
    )


def failed_call_error(tool_name: str, exc: BaseException) -> dict[str, Any]:
    """The ``error`` record of a tool call that raised ``exc``."""
    if isinstance(exc, AeonError):
        return {**exc.to_dict(), "message": f"{tool_name} failed: {exc}"}
    return {"type": type(exc).__name__, "message": f"{tool_name} failed: {type(exc).__name__}: {exc}"}


class KernelToolInvoker:
    """The kernel's ``aeon_invoke_tool``: runs last, so any plugin may deny, replace or wrap the call."""

    @hookimpl(trylast=True)
    def aeon_invoke_tool(self, tool: Tool, arguments: dict[str, Any], context: ToolContext) -> ToolCall:
        return invoke_tool(tool, arguments, context)
