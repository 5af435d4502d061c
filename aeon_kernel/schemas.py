"""JSON Schema helpers: compiled validators cached per schema, and errors phrased for people and models.

Validation runs on every tool call, tool result and LLM output, so it has two tiers. The verdict comes from
``jsonschema-rs`` (compiled once per distinct schema, in Rust: well under a microsecond for a tool's
arguments). Only when an instance is invalid are the errors listed, by the reference ``jsonschema`` library,
imported then and not before, so messages stay the ones its users know. Both implement the same drafts
(2020-12 unless the schema names another with ``$schema``).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final

from aeon_kernel.errors import ValidationError

if TYPE_CHECKING:
    from jsonschema.protocols import Validator as ReferenceValidator


_encode_canonical = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
).encode


def canonical_json(value: Any) -> str:
    """Stable JSON text for hashing and cache keys (sorted keys, no whitespace)."""
    return _encode_canonical(value)


class CompiledSchema:
    """One schema, compiled: a fast verdict, and the reference library's errors when there are any."""

    __slots__ = ("_fast", "_reference", "schema", "text")

    def __init__(self, schema: dict[str, Any], text: str | None = None) -> None:
        self.schema = schema
        #: canonical JSON of the schema, as prompts show it
        self.text = canonical_json(schema) if text is None else text
        import jsonschema_rs  # here, not at import time: it loads certifi and its Rust core (~6 ms)

        try:
            self._fast: Any = jsonschema_rs.validator_for(schema)
        except Exception:  # a schema the fast engine cannot compile is still checked, by the reference one
            self._fast = None
        self._reference: ReferenceValidator | None = None

    def is_valid(self, instance: Any) -> bool:
        if self._fast is not None:
            try:
                return bool(self._fast.is_valid(instance))
            except ValueError:  # not JSON data (e.g. a non-string key): let the reference library judge it
                pass
        return self.reference().is_valid(instance)

    def errors(self, instance: Any) -> list[str]:
        """Every violation as ``"at $.path: message"``; empty when the instance is valid."""
        if self.is_valid(instance):
            return []
        found = sorted(self.reference().iter_errors(instance), key=_path_order)
        if found:
            return [f"at {error.json_path}: {error.message}" for error in found]
        # The two engines disagree (rare: e.g. a tuple is an array to one of them); the fast one decides.
        return [f"at {_path(e.instance_path)}: {e.message}" for e in self._fast.iter_errors(instance)]

    def reference(self) -> ReferenceValidator:
        if self._reference is None:
            import jsonschema

            cls = jsonschema.validators.validator_for(self.schema, default=jsonschema.Draft202012Validator)
            self._reference = cls(self.schema)
        return self._reference


def _path_order(error: Any) -> list[tuple[bool, Any]]:
    """Sort errors by where they are; indexes and names never compare with each other."""
    return [(isinstance(part, str), part) for part in error.path]


def _path(parts: Any) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


@lru_cache(maxsize=512)
def _compiled(schema_json: str) -> CompiledSchema:
    return CompiledSchema(json.loads(schema_json), schema_json)


#: Compiled schemas by identity: tool schemas live as long as their tools, so most lookups skip building the
#: canonical-JSON key. The entry keeps the schema alive, so an id is never reused while it is in the table.
_BY_IDENTITY: dict[int, tuple[dict[str, Any], CompiledSchema]] = {}
_IDENTITY_LIMIT: Final = 1024


def compiled_validator(schema: dict[str, Any]) -> CompiledSchema:
    """The compiled form of ``schema``: by identity when seen before, else by its canonical JSON.

    Schemas are treated as immutable once used (a tool's schemas are fixed when it is built).
    """
    hit = _BY_IDENTITY.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    compiled = _compiled(canonical_json(schema))
    if len(_BY_IDENTITY) >= _IDENTITY_LIMIT:
        _BY_IDENTITY.clear()
    _BY_IDENTITY[id(schema)] = (schema, compiled)
    return compiled


def check_schema(schema: Any) -> None:
    """Raise :class:`ValidationError` unless ``schema`` is itself a valid JSON Schema."""
    import jsonschema

    if not isinstance(schema, dict):
        raise ValidationError(f"a JSON Schema must be an object, got {type(schema).__name__}")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValidationError(f"invalid JSON Schema: {exc.message}", [exc.message]) from None


def schema_errors(schema: dict[str, Any], instance: Any) -> list[str]:
    """Every way ``instance`` violates ``schema``, each as ``"at $.path: message"`` (empty when valid)."""
    return compiled_validator(schema).errors(instance)


def validate_against(schema: dict[str, Any], instance: Any, what: str) -> None:
    """Raise :class:`ValidationError` naming ``what`` and listing every violation."""
    errors = schema_errors(schema, instance)
    if errors:
        raise ValidationError(f"{what} does not match its schema: " + "; ".join(errors), errors)
