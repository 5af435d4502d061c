"""FR-032's one gate: whether a repaired output may replace the original.

A repair exists to make malformed output usable, not to change what the model said. Every repair path — JSON,
plan, step, tool arguments, a missing tool, any supervisor plugin's output — passes :func:`admit_repair`, which
compares parsed structure, never text:

- **tools**: the repair names no tool the original did not name as a ``tool``/``tool_name`` value (a model text
  that merely mentions "calculator" names no tool), except the ones the repair is about (the missing-tool repair
  may pick a registered tool: FR-066);
- **arguments**: an argument value the original gave validly stays as it was; a repair may change or add values
  only where the problem it repairs is (an argument the schema rejects, a step that was invalid), and may drop
  any.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from aeon_kernel.errors import SupervisorError
from aeon_kernel.llm.output import MAX_REPAIR_CHARS, loads_strict, tool_names

#: a tool named in text that is not JSON: a ``"tool"`` or ``"tool_name"`` key with a string value
_NAMED_TOOL: Final = re.compile(r"""["']?\btool(?:_name)?\b["']?\s*[:=]\s*["']([A-Za-z0-9_.-]+)["']""")


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
