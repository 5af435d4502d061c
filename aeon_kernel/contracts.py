"""The contracts of spec 002/003: what a plugin's objects must implement.

Hooks find and choose components; these classes do the work (DESIGN rule 1). The method names are the spec's;
where a spec signature needed more (a JSON Schema for constrained decoding, a way to report supervisor attempts),
the extra parameter is keyword-only with a default, so a plain spec implementation still fits.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field, field_validator

from aeon_kernel.errors import ValidationError
from aeon_kernel.models import FrozenModel
from aeon_kernel.schemas import check_schema, schema_errors

if TYPE_CHECKING:
    from aeon_kernel.models import ConvergenceAssessment, PlanStep, SupervisorAction
    from aeon_kernel.registry import ToolRegistry


class LLMResponse(TypedDict, total=False):
    """What ``LLMAdapter.generate`` returns: ``text`` always; ``usage`` and ``model`` when known."""

    text: str
    usage: dict[str, int]
    model: str


class LLMAdapter(ABC):
    """A language model behind one method (spec 002).

    Adapters classify failures: raise :class:`~aeon_kernel.errors.LLMTransientError` for what is worth retrying
    (connection errors, timeouts, 429, 5xx) and :class:`~aeon_kernel.errors.LLMError` for the rest. The kernel
    owns the retry policy (FR-048), so adapters do not retry themselves.
    """

    #: True when ``generate`` can constrain decoding to ``json_schema`` (grammars, ``response_format``).
    supports_json_schema: bool = False
    #: Identifies the model in logs and replays.
    model_id: str = "unknown"

    @abstractmethod
    def generate(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> LLMResponse:
        """Return the model's reply to ``prompt``. ``json_schema`` is only passed when supported."""

    def supports_streaming(self) -> bool:
        """Whether the adapter can stream. The Sprint 1 loop never streams."""
        return False

    def close(self) -> None:  # noqa: B027 - optional hook with nothing to do by default
        """Release resources (model weights, connections). Called when the engine is closed."""


class Memory(ABC):
    """Key/value memory outside the kernel (FR-014…018). Values are JSON-compatible; keys non-empty strings."""

    @abstractmethod
    def write(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key`` atomically. Raises MemoryStoreError on failure."""

    @abstractmethod
    def read(self, key: str) -> Any | None:
        """The value stored under ``key``, or None when there is none (never raises for a missing key)."""

    @abstractmethod
    def search(self, prefix: str) -> list[tuple[str, Any]]:
        """Every ``(key, value)`` whose key starts with ``prefix`` (case-sensitive; FR-017), in key order."""

    def increment(self, key: str, amount: int = 1) -> int:
        """Atomically add ``amount`` to the integer under ``key`` (a missing key counts as 0); return the new value.

        Optional: a read-then-write in the caller would lose updates under concurrency, so only backends that can
        do it atomically override this. Raises MemoryStoreError when the stored value is not an integer.
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not support atomic increment; use a memory backend that does "
            f"(for example 'sqlite' or 'redis')"
        )

    def close(self) -> None:  # noqa: B027 - optional hook with nothing to do by default
        """Release resources. Called when the engine is closed."""


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


class StepToolCheck(FrozenModel):
    """Result of ``Validator.validate_step_tool``: the step comes back with ``errors`` filled in when invalid.

    Spec 002 mutates the step in place; steps are immutable here, so the updated copy is returned instead.
    """

    valid: bool
    error: str | None = None
    step: Any  # PlanStep, typed loosely to keep this module free of import cycles


class Validator(ABC):
    """Validates plans, LLM outputs and tool calls (FR-024…027). Raises ValidationError, never returns False."""

    @abstractmethod
    def validate_plan(self, plan_dict: dict[str, Any]) -> bool: ...

    @abstractmethod
    def validate_llm_output(self, output: Any, expected_schema: dict[str, Any] | None = None) -> bool: ...

    @abstractmethod
    def validate_tool_call(self, tool_call: dict[str, Any], tool_schema: dict[str, Any]) -> bool: ...

    @abstractmethod
    def validate_step_tool(self, step: PlanStep, tool_registry: ToolRegistry) -> StepToolCheck: ...


RecordAction = Callable[["SupervisorAction"], None]


class Supervisor(ABC):
    """Repairs malformed model output (FR-028…033, FR-050/051).

    Each method makes at most ``max_attempts`` (2) attempts, reports every attempt through ``record`` as a
    SupervisorAction, and raises SupervisorError when it gives up. It must never introduce a tool the original
    output did not name (FR-032), and a missing-tool repair may only pick a registered tool (FR-066).
    """

    @abstractmethod
    def repair_json(
        self,
        malformed_json: str,
        expected_schema: dict[str, Any] | None = None,
        max_attempts: int = 2,
        *,
        record: RecordAction | None = None,
    ) -> Any: ...

    @abstractmethod
    def repair_tool_call(
        self,
        malformed_call: dict[str, Any],
        tool_schema: dict[str, Any],
        max_attempts: int = 2,
        *,
        record: RecordAction | None = None,
    ) -> dict[str, Any]: ...

    @abstractmethod
    def repair_plan(
        self,
        malformed_plan: Any,
        max_attempts: int = 2,
        *,
        record: RecordAction | None = None,
    ) -> dict[str, Any]: ...

    @abstractmethod
    def repair_missing_tool_step(
        self,
        step: dict[str, Any],
        available_tools: list[dict[str, Any]],
        plan_goal: str,
        max_attempts: int = 2,
        *,
        record: RecordAction | None = None,
    ) -> dict[str, Any]: ...


class ConvergenceEngine(ABC):
    """Decides whether a run has reached its answer (spec 003). The loop stops as soon as it says so."""

    @abstractmethod
    def assess(
        self,
        plan_state: dict[str, Any],
        execution_results: list[dict[str, Any]],
        semantic_validation_report: Any = None,
        custom_criteria: dict[str, Any] | None = None,
    ) -> ConvergenceAssessment: ...


class TelemetrySink:
    """A telemetry sink: an object registered on the engine's plugin manager that implements event hooks.

    Subclasses implement any of ``aeon_run_start``, ``aeon_cycle_end``, ``aeon_step_status_changed``,
    ``aeon_tool_called``, ``aeon_supervisor_action`` and ``aeon_run_end`` with ``@hookimpl``.
    """

    def close(self) -> None:
        """Flush and release resources. Called when the engine is closed."""
