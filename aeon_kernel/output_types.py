"""Typed results (issue 28): what a caller may ask a run's output to be, as the JSON Schema the run works to.

A run keeps JSON only (its state, its store, its log), so the type a caller gives — a pydantic model, a
TypedDict, a dataclass, any type pydantic can validate, or a JSON Schema itself — becomes a JSON Schema when the
run starts (kept in the run's manifest, so a resumed run works to the same one), and the run's JSON output
becomes a value of that type only when it is handed back (:meth:`OutputType.convert`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aeon_kernel.errors import ValidationError

#: the types :func:`output_type` takes, in words (its errors say them)
OUTPUT_TYPES = (
    "a pydantic model, a TypedDict, a dataclass, another type pydantic validates, or a JSON Schema dict"
)


@dataclass(frozen=True)
class OutputType:
    """The output a caller asked for: its JSON Schema, and the Python type its value is handed back as (None for
    a JSON Schema given as such: the JSON value itself is handed back)."""

    schema: dict[str, Any]
    python_type: Any = None
    #: pydantic's adapter of ``python_type``, made once with the schema
    adapter: Any = field(default=None, repr=False, compare=False)

    def convert(self, value: Any, run_id: str = "") -> Any:
        """The JSON output of run ``run_id`` as the asked type (checked against the schema, and by the type's own
        validators); ``ValidationError`` saying where it does not fit. None stays None (no output was written)."""
        if value is None:
            return None
        from aeon_kernel.schemas import validate_against

        validate_against(self.schema, value, f"the output of run {run_id or '?'}")
        if self.python_type is None:
            return value
        from pydantic import TypeAdapter
        from pydantic import ValidationError as PydanticValidationError

        try:
            return (self.adapter or TypeAdapter(self.python_type)).validate_python(value)
        except PydanticValidationError as exc:
            name = getattr(self.python_type, "__name__", repr(self.python_type))
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"])) or "the output"
            raise ValidationError(
                f"the output of run {run_id or '?'} matches its JSON Schema but is not a valid {name} "
                f"({where}: {first['msg']}); its JSON output is kept in the run's records"
            ) from None


def output_type(spec: Any) -> OutputType:
    """The :class:`OutputType` of ``spec``; a ``ValidationError`` saying what is wrong with it otherwise."""
    if isinstance(spec, OutputType):
        return spec
    if isinstance(spec, dict):
        return OutputType(check_output_schema(spec))
    from pydantic import TypeAdapter

    from aeon_kernel.function_tools import (
        Untitled,
    )  # pydantic's schema generator: loaded when a type is given

    try:
        adapter: TypeAdapter[Any] = TypeAdapter(spec)
        schema = adapter.json_schema(schema_generator=Untitled)
    except Exception as exc:
        problem = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ValidationError(
            f"output_type {spec!r} has no JSON Schema ({problem}): give {OUTPUT_TYPES}"
        ) from None
    return OutputType(schema, spec, adapter)


def check_output_schema(schema: Any) -> dict[str, Any]:
    """``schema`` if it is a JSON Schema a run can work to; a ``ValidationError`` otherwise."""
    if not isinstance(schema, dict) or not schema:
        raise ValidationError(f"an output schema must be a non-empty JSON object, not {schema!r}")
    from aeon_kernel.schemas import check_schema

    try:
        check_schema(schema)
    except ValidationError as exc:
        raise ValidationError(f"the output schema is not valid: {exc}") from None
    return schema
