"""Turning model text into trusted data: strict parsing, validation, and routing failures to the supervisor.

FR-003/FR-024/FR-027: nothing the model writes is used before it parses and validates; what fails goes to the
supervisor, whose repairs are checked again here so that a supervisor plugin cannot smuggle in a tool the
original output did not name (FR-032) or one that is not registered (FR-066).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from aeon_kernel.contracts import RecordAction, Supervisor, Validator
from aeon_kernel.errors import SupervisorError, ValidationError
from aeon_kernel.memory_values import is_utf8, json_encoder
from aeon_kernel.schemas import schema_errors

#: Deeper model output is refused: nothing Aeon expects nests this far, and unbounded depth breaks serialisers.
MAX_JSON_DEPTH: Final = 32
#: Model text longer than this that is not JSON is refused, not repaired: repair costs grow faster than the text
#: (json-repair takes 0.3 s at 100,000 characters and 10 s at 1,000,000), and no answer Aeon asks for is near it.
MAX_REPAIR_CHARS: Final = 65_536


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    """A number too large for a float (``1e999``) is refused while parsing, not read as infinity."""
    if math.isfinite(value := float(text)):
        return value
    raise ValueError(f"{text[:40]} is too large a number for JSON data")


# Built once: ``json.loads``/``json.dumps`` with any non-default option construct a decoder or encoder per call.
_decode_strict = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float).decode
_encode_lenient = json_encoder(ensure_ascii=False)


def loads_strict(text: str) -> Any:
    """``json.loads`` that rejects NaN/Infinity and turns every parser failure into ``ValueError``.

    Nesting deeper than MAX_JSON_DEPTH and oversized integers are parse failures like any other.
    """
    try:
        value = _decode_strict(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    # skipped where it cannot fail: too few brackets to nest, no surrogate escape (too large a number was refused)
    if text.count("{") + text.count("[") >= MAX_JSON_DEPTH or not is_utf8(text) or _SURROGATE.search(text):
        check_depth(value)
    return value


#: what in JSON text can decode to what :func:`check_depth` refuses: a lone surrogate
_SURROGATE: Final = re.compile(r"\\u[dD][89a-fA-F]")


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


# --- FR-032's one gate: whether a repaired output may replace the original --------------------------------------
#
# A repair exists to make malformed output usable, not to change what the model said. Every repair path — JSON,
# plan, step, tool arguments, a missing tool, any supervisor plugin's output — passes :func:`admit_repair`, which
# compares parsed structure, never text:
#
# - **tools**: the repair names no tool the original did not name as a ``tool``/``tool_name`` value (a model text
#   that merely mentions "calculator" names no tool), except the ones the repair is about (the missing-tool repair
#   may pick a registered tool: FR-066);
# - **arguments**: an argument value the original gave validly stays as it was; a repair may change or add values
#   only where the problem it repairs is (an argument the schema rejects, a step that was invalid), and may drop
#   any.

#: a tool named in text that is not JSON: a ``tool`` or ``tool_name`` key with a value, as JSON, YAML, Python,
#: escaped JSON or JSON with typographic quotes writes it ("use the calculator" names none)
_NAMED_TOOL: Final = re.compile(
    r"""(?<![\w.-])tool(?:_name)?["'\\\u201c\u201d\u2018\u2019]*\s*[:=]\s*["'\\\u201c\u201d\u2018\u2019]*"""
    r"""([A-Za-z0-9_.-]+)"""
)


@dataclass(frozen=True)
class RepairScope:
    """What a repair is about, so what it may change besides the form.

    ``tools``: tools it may name although the original did not (the missing-tool repair: the registered ones).
    ``arguments``: where it may change argument values — argument names for a tool call, step ids for a plan;
    None: anywhere (the original's arguments could not be read, so there is nothing to keep).
    """

    tools: frozenset[str] = frozenset()
    arguments: frozenset[str] | None = field(default_factory=frozenset)


def admit_repair(original: Any, repaired: Any, scope: RepairScope | None = None) -> None:
    """Raise :class:`SupervisorError` unless ``repaired`` may replace ``original`` (a value, or the model's raw
    text) under FR-032; ``scope`` says what the repair is about."""
    scope = scope or RepairScope()
    before = structure(original)
    added = tool_names(repaired) - named_tools(before) - scope.tools
    if added:
        raise SupervisorError(f"the repair names tools the original output did not: {sorted(added)}")
    if scope.arguments is None:
        return
    for where, old, new in _changed_arguments(before, repaired):
        if where not in scope.arguments:
            raise SupervisorError(
                f"the repair changed {where} from {_shown(old)} to {_shown(new)}, which the problem it repairs "
                "was not about (a repair may fix what is malformed, not change what the model said)"
            )


def structure(value: Any) -> Any:
    """``value`` as parsed JSON when it is text that parses; otherwise as it is."""
    if isinstance(value, str) and len(value) <= MAX_REPAIR_CHARS:
        with contextlib.suppress(ValueError):
            return loads_strict(value)
    return value


def named_tools(value: Any) -> set[str]:
    """The tools a value names as ``tool``/``tool_name`` values; in text that is not JSON, the same keys read
    from the text (``"tool": "calculator"``), never a bare mention."""
    if isinstance(value, str):
        return set(_NAMED_TOOL.findall(value[:MAX_REPAIR_CHARS]))
    return tool_names(value)


def about(errors: Collection[str], value: Any = None) -> frozenset[str]:
    """What schema errors (``"at $.name: ..."``, :func:`~aeon_kernel.schemas.schema_errors`) are about: the
    top-level names they point at and, in a plan (``value``), the ids of the steps they point into."""
    found = set()
    steps = value.get("steps") if isinstance(value, Mapping) else None
    for error in errors:
        match = re.match(r"at \$\.steps\[(\d+)\]", error)
        if match and isinstance(steps, list) and int(match.group(1)) < len(steps):
            step = steps[int(match.group(1))]
            found.add(str(step.get("step_id")) if isinstance(step, Mapping) else match.group(1))
        elif match := re.match(r"at \$\.([^.\[\s:]+)", error):
            found.add(match.group(1))
    return frozenset(found)


def _changed_arguments(before: Any, after: Any) -> list[tuple[str, Any, Any]]:
    """Each argument value ``after`` changes from ``before``: where (a step id, or an argument name), old, new."""
    changed = []
    old_steps, new_steps = _steps(before), _steps(after)
    if old_steps is not None and new_steps is not None:
        for step_id, old in old_steps.items():
            new = new_steps.get(step_id)
            if new is not None and _arguments_changed(old, new):
                changed.append((step_id, old, new))
        return changed
    old_args, new_args = _arguments(before), _arguments(after)
    if old_args is None or new_args is None:
        return changed
    for name, old in old_args.items():
        if name in new_args and new_args[name] != old:
            changed.append((name, old, new_args[name]))
    return changed


def _steps(value: Any) -> dict[str, Mapping[str, Any]] | None:
    """A plan's step arguments by step id (only steps that have an id and object arguments), or None."""
    if not isinstance(value, Mapping) or not isinstance(value.get("steps"), list):
        return None
    found = {}
    for step in value["steps"]:
        if isinstance(step, Mapping) and isinstance(step.get("arguments"), Mapping):
            found[str(step.get("step_id"))] = step["arguments"]
    return found


def _arguments(value: Any) -> Mapping[str, Any] | None:
    if isinstance(value, Mapping):
        inner = value.get("arguments")
        return inner if isinstance(inner, Mapping) else value
    return None


def _arguments_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    return any(name in new and new[name] != value for name, value in old.items())


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
