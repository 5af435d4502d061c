"""The ``default`` supervisor: cheap deterministic repair first, then the model with a repair-only prompt.

Each repair method makes at most two attempts (FR-050). Attempt 1 first tries a deterministic fix, one that
changes form and never meaning: the kernel's ``repair_json_text`` (code fences, prose, trailing commas, quotes,
Python literals, comments, YAML; never a text cut off mid-value) and ``normalize_plan`` (fields under other
names, wrappers, ids). If that does not validate, the model is asked, shown the validator's exact error.
Attempt 2 asks the model again with the error its previous answer produced. Every attempt is reported as a
SupervisorAction. A candidate that names a tool the original did not (FR-032), or an unregistered tool
(FR-066), is rejected in code like any other invalid answer; a plan repair's decoding is held to the same rule
(:func:`confined`), so a small model cannot spend its attempts on such answers.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from aeon_kernel import (
    LLMAdapter,
    Register,
    SupervisorAction,
    SupervisorError,
    ToolRegistry,
    ValidationError,
    Validator,
    hookimpl,
)
from aeon_kernel import Supervisor as SupervisorContract
from aeon_kernel.kit import (
    MAX_REPAIR_CHARS,
    RecordAction,
    RepairScope,
    SupervisorActionType,
    about,
    admit_repair,
    canonical_json,
    dumps_lenient,
    ensure_repairable,
    loads_strict,
    named_tools,
    schema_errors,
    structure,
)
from aeon_plugins.planning import normalize_plan, plan_repair_scope, repair_json_text, tool_call_scope

REPAIR_SYSTEM_PROMPT: Final = (
    "You repair JSON. Fix only its syntax and structure so that it matches the schema. Keep the meaning, keep "
    "every value you can, and never add a tool. Reply with the corrected JSON only."
)

#: The plan shape without the registry's tool list: a repair may keep a tool it cannot check, never add one.
GENERIC_PLAN_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "goal": {"type": "string", "minLength": 1},
        "steps": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "step_id": {"type": "string", "minLength": 1},
                    "description": {"type": "string", "minLength": 1},
                    "tool": {"type": "string"},
                    "agent": {"const": "llm"},
                    "arguments": {"type": "object"},
                },
                "required": ["step_id", "description"],
            },
        },
    },
    "required": ["goal", "steps"],
}

Check = Callable[[Any], Any]  # returns the accepted value or raises ValidationError


class _Rejected(Exception):
    """A candidate repair failed its check; ``message`` is what the model is told next."""


class DefaultSupervisor(SupervisorContract):
    def __init__(
        self,
        llm: LLMAdapter,
        validator: Validator,
        tools: ToolRegistry | None = None,
        system_prompt: str = REPAIR_SYSTEM_PROMPT,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> None:
        self.llm, self.validator, self.tools = llm, validator, tools or ToolRegistry()
        self.system_prompt, self.max_tokens, self.temperature = system_prompt, max_tokens, temperature

    # --- spec 002 methods --------------------------------------------------------------------------------------

    def repair_json(
        self,
        malformed_json: str,
        expected_schema: dict[str, Any] | None = None,
        max_attempts: int = 2,
        *,
        record: RecordAction | None = None,
    ) -> Any:
        text = malformed_json if isinstance(malformed_json, str) else dumps_lenient(malformed_json)
        ensure_repairable(text)  # neither json-repair nor a model prompt can take more in reasonable time

        def check(value: Any) -> Any:
            _ensure_json(value)
            if expected_schema is not None:
                _raise_schema_errors(expected_schema, value)
            elif not isinstance(value, (dict, list)):
                raise ValidationError(f"expected a JSON object or array, got {type(value).__name__}")
            admit_repair(text, value, scope)  # FR-032
            return value

        before = structure(text)
        scope = RepairScope(arguments=None)  # text that is not JSON has no values to keep
        if before is not text and expected_schema is not None:
            scope = RepairScope(arguments=about(schema_errors(expected_schema, before), before))

        return self._repair(
            "json_repair",
            {"text": text},
            text,
            check,
            confined(expected_schema, before, scope),
            lambda: repair_json_text(text),
            max_attempts,
            record,
        )

    def repair_tool_call(
        self,
        malformed_call: dict[str, Any],
        tool_schema: dict[str, Any],
        max_attempts: int = 2,
        *,
        record: RecordAction | None = None,
    ) -> dict[str, Any]:
        call = malformed_call if isinstance(malformed_call, dict) else {"arguments": malformed_call}
        name = call.get("tool_name") or call.get("tool")
        given = structure(call.get("arguments"))
        scope = tool_call_scope(tool_schema, given)

        def check(value: Any) -> dict[str, Any]:
            arguments = value.get("arguments") if isinstance(value, dict) and "arguments" in value else value
            repaired = {"tool_name": name, "arguments": arguments}
            self.validator.validate_tool_call(repaired, tool_schema)
            _ensure_json(arguments)
            admit_repair({"tool_name": name, "arguments": given}, repaired, scope)  # FR-032
            return repaired

        def deterministic() -> Any:
            arguments = call.get("arguments")
            return repair_json_text(arguments) if isinstance(arguments, str) else arguments

        result: dict[str, Any] = self._repair(
            "tool_call_repair",
            _as_dict(call),
            dumps_lenient(call.get("arguments")),
            check,
            tool_schema,
            deterministic,
            max_attempts,
            record,
            subject=f"the arguments of the tool {name!r}",
        )
        return result

    def repair_plan(
        self,
        malformed_plan: Any,
        max_attempts: int = 2,
        *,
        record: RecordAction | None = None,
    ) -> dict[str, Any]:
        candidate = normalize_plan(malformed_plan, self.tools)
        scope = plan_repair_scope(malformed_plan, self.tools)

        def check(value: Any) -> dict[str, Any]:
            self.validator.validate_plan(value)
            admit_repair(malformed_plan, value, scope)  # FR-032
            return dict(value)

        result: dict[str, Any] = self._repair(
            "plan_repair",
            _as_dict(malformed_plan),
            dumps_lenient(malformed_plan),
            check,
            confined(GENERIC_PLAN_SCHEMA, malformed_plan, scope),
            lambda: candidate,
            max_attempts,
            record,
            subject="the plan",
        )
        return result

    def repair_missing_tool_step(
        self,
        step: dict[str, Any],
        available_tools: list[dict[str, Any]],
        plan_goal: str,
        max_attempts: int = 2,
        *,
        record: RecordAction | None = None,
    ) -> dict[str, Any]:
        by_name = {tool["name"]: tool for tool in available_tools}

        def check(value: Any) -> dict[str, Any]:
            if not isinstance(value, dict) or value.get("tool") not in by_name:
                raise ValidationError(f"'tool' must be one of {sorted(by_name)}")
            arguments = value.get("arguments")
            if arguments is not None:
                _raise_schema_errors(by_name[value["tool"]]["input_schema"], arguments)
            # FR-066: the repair is about the tool, so it may pick a registered one; the arguments were the
            # missing tool's, so none of them need be kept
            admit_repair(step, value, RepairScope(tools=frozenset(by_name), arguments=None))
            return {**step, "tool": value["tool"], "arguments": arguments, "errors": []}

        def deterministic() -> Any:
            """A misspelt or differently cased tool name that closely matches exactly one registered tool."""
            wanted = str(step.get("tool") or "").strip().lower()
            if len(wanted) < 3:
                return None
            lowered = {name.lower(): name for name in by_name}
            matches = [
                name for low, name in lowered.items() if low.startswith(wanted) or wanted.startswith(low)
            ]
            if not matches:
                matches = [
                    lowered[m] for m in difflib.get_close_matches(wanted, list(lowered), n=2, cutoff=0.6)
                ]
            return {"tool": matches[0], "arguments": step.get("arguments")} if len(matches) == 1 else None

        schema = {
            "type": "object",
            "properties": {"tool": {"enum": sorted(by_name)}, "arguments": {"type": "object"}},
            "required": ["tool"],
        }
        context = (
            f"Plan goal: {plan_goal}\nThe step names no usable tool ({'; '.join(step.get('errors') or [])}). "
            f"Pick the registered tool that does this step.\nTools: "
            + "; ".join(f"{t['name']}: {t['description']}" for t in available_tools)
        )
        result: dict[str, Any] = self._repair(
            "missing_tool_repair",
            _as_dict(step),
            dumps_lenient(step),
            check,
            schema,
            deterministic,
            max_attempts,
            record,
            subject="the step",
            context=context,
        )
        return result

    # --- the attempt loop --------------------------------------------------------------------------------------

    def _repair(
        self,
        action_type: SupervisorActionType,
        original: dict[str, Any],
        original_text: str,
        check: Check,
        schema: dict[str, Any] | None,
        deterministic: Callable[[], Any],
        max_attempts: int,
        record: RecordAction | None,
        subject: str = "the JSON",
        context: str = "",
    ) -> Any:
        if not 1 <= max_attempts <= 2:
            raise ValueError("FR-050 allows 1 or 2 repair attempts")
        emit = record or (lambda action: None)
        error = _first_error(check, original_text)
        for attempt in range(1, max_attempts + 1):
            if attempt == 1:
                try:
                    value = check(deterministic())
                except Exception as exc:  # json-repair or a normaliser can fail on hostile input
                    error = _message(exc) if isinstance(exc, ValidationError) else error
                else:
                    emit(_action(action_type, original, attempt, "deterministic", repaired=value))
                    return value
            reply = self.llm.generate(
                _repair_prompt(subject, original_text, error, schema, context),
                self.system_prompt,
                self.max_tokens,
                self.temperature,
                json_schema=schema,
            )["text"]
            try:
                value = check(repair_json_text(reply))
            except Exception as exc:
                error = _message(exc)
                emit(
                    _action(
                        action_type, original, attempt, "llm", error={"message": error, "reply": reply[:2000]}
                    )
                )
                continue
            emit(_action(action_type, original, attempt, "llm", repaired=value))
            return value
        raise SupervisorError(
            f"could not repair {subject} in {max_attempts} attempts: {error}",
            attempts=max_attempts,
            last_error=error,
        )


# --- FR-032 in the decoding -------------------------------------------------------------------------------------

#: keys that begin a step, counted in text that is not JSON (cut off, YAML)
_STEP_KEY: Final = re.compile(r"\b(step_id|description|tool|agent)\b")


def confined(schema: dict[str, Any] | None, original: Any, scope: RepairScope) -> dict[str, Any] | None:
    """A plan schema as a repair of ``original`` may fill it: its steps name only the tools the original named (or
    the repair is about), and there are no more of them than the original began.

    The gate (:func:`admit_repair`) rejects any other answer anyway. Held to the schema, a small model cannot
    spend its two attempts on such answers: asked to repair a plan cut before its tool, Gemma 3 270M wrote an
    ``echo`` step after another until ``max_tokens`` cut it again. Schemas without ``steps`` are returned as
    they are."""
    steps = (schema or {}).get("properties", {}).get("steps")
    if schema is None or not isinstance(steps, dict) or not isinstance(steps.get("items"), dict):
        return schema
    value = structure(original)
    allowed = named_tools(value) | scope.tools
    items = steps["items"]
    within = (_step_within(branch, allowed) for branch in items.get("anyOf", [items]))
    kept = [branch for branch in within if branch is not None]
    if not kept:
        return schema  # no step can be written: the gate says why
    begun = _begun_steps(value)
    held = {**steps, "items": {"anyOf": kept} if "anyOf" in items else kept[0]}
    held["maxItems"] = min(begun, steps.get("maxItems", begun))
    return {**schema, "properties": {**schema["properties"], "steps": held}}


def _step_within(step: dict[str, Any], allowed: set[str]) -> dict[str, Any] | None:
    """A step schema naming only ``allowed`` tools; None when it can name no other."""
    properties = step.get("properties", {})
    tool = properties.get("tool")
    if not isinstance(tool, dict):
        return step
    if "const" in tool:
        return step if tool["const"] in allowed else None
    names = sorted(n for n in tool.get("enum", allowed) if n in allowed)
    if names:
        return {**step, "properties": {**properties, "tool": {"enum": names}}}
    if "tool" in step.get("required", ()):
        return None
    thinking = {k: v for k, v in properties.items() if k not in ("tool", "arguments")}
    required = [*step.get("required", ()), *(["agent"] if "agent" in thinking else [])]
    return {**step, "properties": thinking, "required": list(dict.fromkeys(required))}


def _begun_steps(value: Any) -> int:
    """How many steps ``value`` (parsed where it parses) began: its steps list, or the step keys its text writes."""
    if isinstance(value, Mapping) and isinstance(value.get("steps"), list):
        value = value["steps"]
    if isinstance(value, list):
        return max(len(value), 1)
    text = value if isinstance(value, str) else dumps_lenient(value)
    found = _STEP_KEY.findall(text[:MAX_REPAIR_CHARS])
    return max([found.count(key) for key in set(found)] or [1])


# --- helpers ---------------------------------------------------------------------------------------------------


def _repair_prompt(
    subject: str, original: str, error: str, schema: dict[str, Any] | None, context: str
) -> str:
    parts = [f"Repair {subject}."]
    if context:
        parts.append(context)
    parts.append(f"Validation error: {error}")
    if schema is not None:
        parts.append(f"Schema: {canonical_json(schema)}")
    parts.append(f"Original:\n{original[:4000]}\nCorrected JSON:")
    return "\n".join(parts)


def _first_error(check: Check, text: str) -> str:
    try:
        check(loads_strict(text))
    except ValueError as exc:
        return _message(exc) if isinstance(exc, ValidationError) else f"not valid JSON: {exc}"
    except Exception as exc:
        return _message(exc)
    return "unknown error"


def _message(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(exc.errors)
    return f"{type(exc).__name__}: {exc}"


def _raise_schema_errors(schema: dict[str, Any], value: Any) -> None:
    errors = schema_errors(schema, value)
    if errors:
        raise ValidationError("; ".join(errors), errors)


def _ensure_json(value: Any) -> None:
    """Reject NaN/Infinity and anything else strict JSON cannot carry."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValidationError(f"not strict JSON: {exc}") from None


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {"value": value}


def _action(
    action_type: SupervisorActionType,
    original: dict[str, Any],
    attempt: int,
    method: Any,
    repaired: Any = None,
    error: dict[str, Any] | None = None,
) -> SupervisorAction:
    return SupervisorAction(
        action_type=action_type,
        original_output=original,
        repaired_output=_as_dict(repaired) if error is None else None,
        error=error,
        attempt_number=attempt,
        method=method,
    )


@hookimpl
def aeon_register_supervisors(register: Register) -> None:
    register("default", DefaultSupervisor)
