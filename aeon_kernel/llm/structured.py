"""Asking the model for a JSON value of a given schema: the one path every model-backed module takes (spec 003).

Decoding is constrained to the schema where the adapter can do it; the text is parsed strictly; a value that is
not JSON, or does not match the schema, goes to the supervisor's ``repair_json`` (at most two attempts); the
repaired value is checked again. The model client retries transient failures (3 attempts with backoff) and
raises ``LLMError`` when the model stays unavailable.
"""

from __future__ import annotations

from typing import Any, Final

from aeon_kernel.contracts import RecordAction, Supervisor, Validator
from aeon_kernel.errors import SupervisorError, ValidationError
from aeon_kernel.llm.client import ModelClient
from aeon_kernel.llm.output import parse_json
from aeon_kernel.models import Check, SupervisorAction

#: the system prompt of every JSON request the kernel makes (plans, steps, repairs, judges)
SYSTEM_PROMPT: Final = (
    "You are the planning and reasoning engine of Aeon, an orchestration kernel. "
    "Reply with exactly one JSON object and nothing else."
)


def ignore_action(action: SupervisorAction | Check) -> None:
    """Where repair attempts go when the caller keeps no record of them."""


def ask_json(
    llm: ModelClient,
    supervisor: Supervisor,
    validator: Validator,
    prompt: str,
    schema: dict[str, Any],
    *,
    record: RecordAction | None = None,
    max_tokens: int = 512,
    temperature: float = 0.0,
    system_prompt: str = SYSTEM_PROMPT,
    decode: dict[str, Any] | None = None,
) -> Any:
    """The model's answer to ``prompt`` as a value matching ``schema``. ``decode``: a narrower schema to constrain
    decoding to (what the caller's own checks accept); the answer is still validated and repaired against ``schema``.

    Raises ``LLMError`` (model unavailable), or ``SupervisorError`` when no repair gave a valid value.
    """
    record = record or ignore_action
    text = llm.generate(prompt, system_prompt, max_tokens, temperature, json_schema=decode or schema)["text"]
    value = parse_json(text, supervisor, record, schema, validator)
    try:
        validator.validate_llm_output(value, schema)
    except ValidationError as exc:
        raise SupervisorError(
            f"the model's answer does not match its schema: {exc}", last_error=str(exc)
        ) from None
    return value


class ModelBacked:
    """What a component that asks the run's model holds: the model, the validator and supervisor that check and
    repair its answers, and the generation settings; :meth:`ask` is :func:`ask_json` with them.

    Subclass it beside the contract (``class Mine(ModelBacked, SemanticValidator)``): the factory then takes
    ``llm``, ``validator``, ``supervisor``, ``max_tokens`` and ``temperature``, which the engine gives.
    """

    def __init__(
        self,
        llm: ModelClient,
        validator: Validator,
        supervisor: Supervisor,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> None:
        self.llm = llm
        self.validator = validator
        self.supervisor = supervisor
        self.max_tokens = max_tokens
        self.temperature = temperature

    def ask(self, prompt: str, schema: dict[str, Any], *, record: RecordAction | None = None) -> Any:
        """The model's answer to ``prompt`` as a value matching ``schema`` (see :func:`ask_json`)."""
        return ask_json(
            self.llm,
            self.supervisor,
            self.validator,
            prompt,
            schema,
            record=record,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
        )
