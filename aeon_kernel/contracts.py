"""The contracts of spec 002/003: what a plugin's objects must implement.

Hooks find and choose components; these classes do the work (DESIGN rule 1). The method names are the spec's;
where a spec signature needed more (a JSON Schema for constrained decoding, a way to report supervisor attempts),
the extra parameter is keyword-only with a default, so a plain spec implementation still fits.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, TypedDict

from aeon_kernel.models import Check, ConvergenceAssessment, FrozenModel, Plan, PlanStep, SupervisorAction
from aeon_kernel.tools import ToolRegistry


class LLMResponse(TypedDict, total=False):
    """What ``LLMAdapter.generate`` (and ``stream``) returns: ``text`` always; ``usage`` and ``model`` when known."""

    text: str
    usage: dict[str, int]
    model: str


class LLMAdapter(ABC):
    """A language model behind one method (spec 002). Adapters raise :class:`~aeon_kernel.errors.LLMTransientError`
    for what is worth retrying (connection errors, timeouts, 429, 5xx) and :class:`~aeon_kernel.errors.LLMError` for
    the rest; the kernel owns the retry policy (FR-048), so adapters do not retry themselves."""

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

    def stream(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
        on_text: Callable[[str], None],
    ) -> LLMResponse:
        """:meth:`generate`, also passing ``on_text`` each new piece of the reply, in order, as the model writes it
        (issue 28). Whatever ``on_text`` raises ends the call and propagates: it is how a consumer stops a reply.
        This default passes the whole reply at once; an adapter that really streams overrides it and
        :meth:`supports_streaming`."""
        kwargs: dict[str, Any] = {"json_schema": json_schema} if json_schema is not None else {}
        response = self.generate(prompt, system_prompt, max_tokens, temperature, **kwargs)
        if isinstance(response, dict) and response.get("text"):
            on_text(response["text"])
        return response

    def supports_streaming(self) -> bool:
        """Whether :meth:`stream` passes the reply on as it is written, not only once it is whole (the default)."""
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

    def release(self, prefix: str) -> None:  # noqa: B027 - optional hook: durable backends keep their keys
        """The kernel no longer needs the keys under ``prefix`` (a run's, once it ended): a backend holding data only
        for its process drops them, so an engine does not grow with every run; a durable one keeps them."""

    def close(self) -> None:  # noqa: B027 - optional hook with nothing to do by default
        """Release resources. Called when the engine is closed."""


class StepToolCheck(FrozenModel):
    """Result of ``Validator.validate_step_tool``: the step comes back with ``errors`` filled in when invalid.

    Spec 002 mutates the step in place; steps are immutable here, so the updated copy is returned instead.
    """

    valid: bool
    error: str | None = None
    step: PlanStep


class Validator(ABC):
    """Validates plans, LLM outputs and tool calls (FR-024…027). Raises ValidationError, never returns False."""

    @abstractmethod
    def validate_plan(self, plan_dict: dict[str, Any]) -> bool: ...

    def validated_plan(self, plan_dict: dict[str, Any]) -> Plan:
        """:meth:`validate_plan`, then the :class:`Plan` it accepted (override it to validate once)."""
        self.validate_plan(plan_dict)
        return Plan.model_validate(plan_dict)

    @abstractmethod
    def validate_llm_output(self, output: Any, expected_schema: dict[str, Any] | None = None) -> bool: ...

    @abstractmethod
    def validate_tool_call(self, tool_call: dict[str, Any], tool_schema: dict[str, Any]) -> bool: ...

    @abstractmethod
    def validate_step_tool(self, step: PlanStep, tool_registry: ToolRegistry) -> StepToolCheck: ...


#: The callback supervisors, planners and step executors report each repair attempt and each check
#: (:class:`~aeon_kernel.models.Check`) through; both land in the cycle's log line and the run's state.
RecordAction = Callable[[SupervisorAction | Check], None]


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


def plan_progress(plan_state: dict[str, Any]) -> tuple[bool, float, list[str]]:
    """The deterministic part of a convergence verdict (FR-004), from a plan as JSON: whether every step is
    finished (complete or failed), the share of complete steps, and the reason codes (``steps_unfinished``, one
    ``step_failed:<id>`` per failed step and one ``step_invalid:<id>`` per blocked one, spec 003)."""
    steps = [s for s in plan_state.get("steps") or [] if isinstance(s, dict)]
    statuses = [step.get("status") for step in steps]
    finished = bool(steps) and all(s in ("complete", "failed") for s in statuses)
    reasons = [] if finished else ["steps_unfinished"]
    reasons += [
        f"step_{s.get('status')}:{s.get('step_id')}"
        for s in steps
        if s.get("status") in ("failed", "invalid")
    ]
    return finished, statuses.count("complete") / len(steps) if steps else 0.0, reasons


class SecretProvider(ABC):
    """Where secrets come from (spec 004 §10.11): ``{ "$<name>" = "reference" }`` in aeon.toml asks the provider
    registered as ``name`` (``aeon_register_secret_providers``); ``$env`` and ``$file`` are the kernel's own."""

    @abstractmethod
    def get(self, reference: str) -> str:
        """The secret ``reference`` names, as text. Raise ConfigError when there is none (never quoting a value)."""


class TelemetrySink:
    """A telemetry sink: an object registered on the engine's plugin manager that implements event hooks.

    Subclasses implement any of ``aeon_run_start``, ``aeon_run_resumed``, ``aeon_cycle_end``,
    ``aeon_step_status_changed``, ``aeon_tool_called``, ``aeon_supervisor_action`` and ``aeon_run_end`` with
    ``@hookimpl``. Each sink gets every event, whatever another sink raises.
    """

    def close(self) -> None:
        """Flush and release resources. Called when the engine is closed."""


class Planner(ABC):
    """Writes the plan for a request (spec 003's ``RecursivePlanner.generate_plan``, the part Sprint 1 needs).

    The kernel's planner (``model``) asks the model for a plan constrained to the plan schema, parses it,
    validates it and lets the supervisor repair it (FR-006/010). A planner returns a valid :class:`Plan`
    or raises: :class:`~aeon_kernel.errors.LLMError` when the model is unavailable (the run fails, FR-049),
    any other :class:`~aeon_kernel.errors.AeonError` when no usable plan came out.
    """

    @abstractmethod
    def generate_plan(
        self,
        task_description: str,
        task_profile: Any,
        tool_registry: ToolRegistry,
        *,
        record: RecordAction | None = None,
    ) -> Plan:
        """The plan for ``task_description``. ``task_profile`` is None until adaptive depth (spec 003) sets it."""

    def answer_problem(
        self, answer: Any, request: str, steps: Sequence[PlanStep], *, final: bool
    ) -> str | None:
        """What is wrong with the model's ``answer`` to one of this planner's steps (``final``: the plan's last),
        given the ``request`` and the plan's ``steps`` so far, or None. The step executor asks the model once more,
        told why, and answers from the tools when the second answer is wrong too. The default checks nothing; the
        ``model`` planner checks answers against the tool results unless ``[planner] check = false``."""
        return None
