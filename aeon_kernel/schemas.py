"""JSON Schema helpers: compiled validators cached per schema, and errors phrased for people and models.

Validation runs on every tool call, tool result and LLM output, so validators are compiled once per distinct
schema (the cache key is the schema's canonical JSON) rather than on every call.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

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
    validator = _compiled(canonical_json(schema))
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
