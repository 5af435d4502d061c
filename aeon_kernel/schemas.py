"""JSON Schema helpers: compiled validators cached per schema, and errors phrased for people and models.

Validation runs on every tool call, tool result and LLM output, so validators are compiled once per distinct
schema (the cache key is the schema's canonical JSON) rather than on every call.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Final

import jsonschema
from jsonschema.protocols import Validator as JsonSchemaValidator

from aeon_kernel.errors import ValidationError


def canonical_json(value: Any) -> str:
    """Stable JSON text for hashing and cache keys (sorted keys, no whitespace)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


@lru_cache(maxsize=512)
def _compiled(schema_json: str) -> JsonSchemaValidator:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)


#: Validators by schema identity: tool schemas live as long as their tools, so most lookups skip building the
#: canonical-JSON key. The entry keeps the schema alive, so an id is never reused while it is in the table.
_BY_IDENTITY: dict[int, tuple[dict[str, Any], JsonSchemaValidator]] = {}
_IDENTITY_LIMIT: Final = 1024


def compiled_validator(schema: dict[str, Any]) -> JsonSchemaValidator:
    """The compiled validator for ``schema``: by identity when seen before, else by its canonical JSON.

    Schemas are treated as immutable once used (a tool's schemas are fixed when it is built).
    """
    hit = _BY_IDENTITY.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    validator = _compiled(canonical_json(schema))
    if len(_BY_IDENTITY) >= _IDENTITY_LIMIT:
        _BY_IDENTITY.clear()
    _BY_IDENTITY[id(schema)] = (schema, validator)
    return validator


def check_schema(schema: Any) -> None:
    """Raise :class:`ValidationError` unless ``schema`` is itself a valid JSON Schema."""
    if not isinstance(schema, dict):
        raise ValidationError(f"a JSON Schema must be an object, got {type(schema).__name__}")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValidationError(f"invalid JSON Schema: {exc.message}", [exc.message]) from None


def schema_errors(schema: dict[str, Any], instance: Any) -> list[str]:
    """Every way ``instance`` violates ``schema``, each as ``"at $.path: message"`` (empty when valid)."""
    validator = compiled_validator(schema)
    if validator.is_valid(instance):  # the common case, without building error objects
        return []
    return [
        f"at {error.json_path}: {error.message}"
        for error in sorted(validator.iter_errors(instance), key=lambda e: list(e.path))
    ]


def validate_against(schema: dict[str, Any], instance: Any, what: str) -> None:
    """Raise :class:`ValidationError` naming ``what`` and listing every violation."""
    errors = schema_errors(schema, instance)
    if errors:
        raise ValidationError(f"{what} does not match its schema: " + "; ".join(errors), errors)
