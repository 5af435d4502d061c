"""Turning model text into trusted data: strict parsing, validation, and routing failures to the supervisor.

FR-003/FR-024/FR-027: nothing the model writes is used before it parses and validates; what fails goes to the
supervisor, whose repairs are checked again here so that a supervisor plugin cannot smuggle in a tool the
original output did not name (FR-032) or one that is not registered (FR-066).
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterable
from typing import Any, Final

from aeon_kernel.contracts import RecordAction, Supervisor, Validator
from aeon_kernel.errors import SupervisorError, ValidationError
from aeon_kernel.memory_values import is_utf8
from aeon_kernel.schemas import schema_errors

#: Deeper model output is refused: nothing Aeon expects nests this far, and unbounded depth breaks serialisers.
MAX_JSON_DEPTH: Final = 32
#: Model text longer than this that is not JSON is refused, not repaired: repair costs grow faster than the text
#: (json-repair takes 0.3 s at 100,000 characters and 10 s at 1,000,000), and no answer Aeon asks for is near it.
MAX_REPAIR_CHARS: Final = 65_536


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# Built once: ``json.loads``/``json.dumps`` with any non-default option construct a decoder or encoder per call.
_decode_strict = json.JSONDecoder(parse_constant=_reject_constant).decode
_encode_lenient = json.JSONEncoder(ensure_ascii=False).encode


def loads_strict(text: str) -> Any:
    """``json.loads`` that rejects NaN/Infinity and turns every parser failure into ``ValueError``.

    Nesting deeper than MAX_JSON_DEPTH and oversized integers are parse failures like any other.
    """
    try:
        value = _decode_strict(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    check_depth(value)
    return value


def check_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise ValueError when ``value`` nests deeper than ``limit``, or holds what JSON data cannot: a lone
    surrogate (from a ``\\ud800`` escape; it has no UTF-8 form) or an infinite number (``1e999``). Checked
    without recursion."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth >= limit:
                raise ValueError(f"JSON nested deeper than {limit} levels")
            if isinstance(item, dict):
                stack.extend((key, depth) for key in item)
                children: Iterable[Any] = item.values()
            else:
                children = item
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(item, str):
            if not item.isascii() and not is_utf8(item):
                raise ValueError("JSON text holds a lone surrogate, which has no UTF-8 form")
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{item} is not valid JSON")


def parse_json(
    text: str,
    supervisor: Supervisor,
    record: RecordAction,
    expected_schema: dict[str, Any] | None = None,
    validator: Validator | None = None,
) -> Any:
    """Parse ``text``; when it is not JSON, or (given a validator) does not match ``expected_schema``, repair it.

    Whatever supervisor repairs it, the repair may not name a tool the model's text did not (FR-032).
    """
    from aeon_kernel.llm.repair_gate import RepairScope, about, admit_repair

    try:
        value = loads_strict(text)
    except ValueError:
        ensure_repairable(text)
        repaired = supervisor.repair_json(text, expected_schema, record=record)
        admit_repair(text, repaired, RepairScope(arguments=None))  # no value was readable: none to keep
        return repaired
    if validator is None or expected_schema is None:
        return value
    try:
        validator.validate_llm_output(value, expected_schema)
        return value
    except ValidationError:
        repaired = supervisor.repair_json(dumps_lenient(value), expected_schema, record=record)
    admit_repair(value, repaired, RepairScope(arguments=about(schema_errors(expected_schema, value), value)))
    return repaired


def ensure_repairable(text: str) -> None:
    """Refuse (SupervisorError, no attempt made) model text too long to repair: :data:`MAX_REPAIR_CHARS`."""
    if len(text) > MAX_REPAIR_CHARS:
        raise SupervisorError(
            f"{len(text):,} characters that are not JSON (or not the JSON expected) are too long to repair: "
            f"text longer than {MAX_REPAIR_CHARS:,} characters is not repaired (is max_tokens far too high?)",
            attempts=0,
            last_error="output too long to repair",
        )


def dumps_lenient(value: Any) -> str:
    """JSON text of ``value`` for a prompt or a record; its ``str`` when it cannot be JSON."""
    try:
        return _encode_lenient(value)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def tool_names(value: Any) -> set[str]:
    """Every tool a JSON value names: ``tool`` and ``tool_name`` string fields, at any depth (bounded), also inside
    strings that are themselves JSON (a plan written as a string still names its tools)."""
    found: set[str] = set()
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > 64:
            continue
        if isinstance(item, dict):
            for key in ("tool", "tool_name"):
                if isinstance(item.get(key), str):
                    found.add(item[key])
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str) and item.lstrip()[:1] in ("{", "[") and len(item) <= MAX_REPAIR_CHARS:
            with contextlib.suppress(ValueError):
                stack.append((loads_strict(item), depth + 1))
    return found
