"""Model text to a validated plan, with every repair on record (FR-029…033, SC-003).

:func:`parse_plan` is the path the kernel's planner takes. Text that is not JSON goes to the supervisor's
``repair_json``; a value that does not validate, or says what a plan says under other names, to its
``repair_plan``; whatever comes back must validate and may name no tool the text did not (FR-032).

With ``deterministic_only`` (or no supervisor) the same two stages use the kernel's deterministic repairs, which
the default supervisor also tries first: :func:`repair_json_text` (syntax) and :func:`normalize_plan`
(structure). They change form, never meaning: no tool is renamed or added, no argument key or value is changed,
no goal or description is invented, and a text cut off where closing it would drop or change what it said is
refused (a model may still repair it). Tool names the registry does not know are left for the step's
missing-tool repair (FR-066), which runs when the step does.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from aeon_kernel import Plan, Supervisor, SupervisorAction, ToolRegistry, Validator
from aeon_kernel.errors import SupervisorError, ValidationError
from aeon_kernel.kit import (
    MAX_REPAIR_CHARS,
    Check,
    RecordAction,
    RepairScope,
    SupervisorActionType,
    about,
    admit_repair,
    dumps_lenient,
    ignore_action,
    loads_strict,
    parse_json,
    schema_errors,
    tool_names,
)

#: Other names models give a plan's fields, tried in order when the field itself is missing.
_STEPS_KEYS: Final = ("steps", "plan", "plan_steps", "actions", "tasks", "subtasks", "step")
_GOAL_KEYS: Final = ("goal", "objective", "task", "request", "title", "summary", "name", "description")
_ID_KEYS: Final = ("step_id", "id", "step_number", "number", "step")
_TOOL_KEYS: Final = ("tool", "tool_name", "function", "function_name", "tool_call")
#: keys that name a tool only when their value is a registered tool's name (else they describe the step)
_MAYBE_TOOL_KEYS: Final = ("action", "name")
_ARGUMENT_KEYS: Final = ("arguments", "args", "parameters", "params", "input", "inputs", "tool_input")
_DESCRIPTION_KEYS: Final = ("description", "desc", "name", "action", "task", "title", "summary", "step")
#: what a run writes into a step; a new plan starts without it (a model's "status": "complete" skips nothing)
_RUN_STATE: Final = ("status", "errors", "result", "failure")
_STEP_KEYS: Final = frozenset({"tool", "agent", "arguments", *_TOOL_KEYS, *_ARGUMENT_KEYS})
_NEXT: Final = (
    "A model may still repair it (parse_plan with a supervisor, without deterministic_only), or ask the model "
    "again (with a larger max_tokens if it was cut off)"
)
_MAX_NESTING: Final = 3  # JSON inside a string inside a string is as deep as any model goes
_WORD: Final = re.compile(r"[^\s,:{}\[\]\"'/#]+")
_OPENER: Final = re.compile(r"[{\[]")
_STRING: Final = {q: re.compile(rf"{q}(?:[^{q}\\]|\\.)*{q}", re.DOTALL) for q in "\"'"}
_CLOSER: Final = {"{": "}", "[": "]"}
#: the bare words a JSON value may hold, with Python's spelling of them
_LITERALS: Final = {
    "true": "true",
    "false": "false",
    "null": "null",
    "True": "true",
    "False": "false",
    "None": "null",
}
_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_ESCAPE: Final = re.compile(r"\\(u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|.)", re.DOTALL)
#: JSON's escapes and Python's \' (the \u and \x escapes are read as code points)
_ESCAPES: Final = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "b": "\b",
    "f": "\f",
    "/": "/",
    "\\": "\\",
    '"': '"',
    "'": "'",
}
_CAMEL: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_FENCE: Final = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True, slots=True)
class PlanParse:
    """A plan and the repair actions that made it (empty when the text was a valid plan as written)."""

    plan: Plan
    actions: tuple[SupervisorAction, ...] = ()


def parse_plan(
    text: str,
    tools: ToolRegistry,
    supervisor: Supervisor | None,
    validator: Validator,
    *,
    deterministic_only: bool = False,
    record: RecordAction | None = None,
    schema: dict[str, Any] | None = None,
) -> PlanParse:
    """The plan ``text`` describes, checked by ``validator``; each repair attempt is also passed to ``record``.

    ``schema`` is the JSON Schema the model was asked to write to, given when its decoding was constrained to
    it: text that is not JSON (cut off by ``max_tokens``) is then repaired to that schema, so the supervisor's
    model repair is constrained too (unconstrained, a small model echoes the repair prompt back).

    Raises SupervisorError (or ValidationError) when no plan can be had: with ``deterministic_only`` or no
    supervisor, whenever a repair would need the model.
    """
    actions: list[SupervisorAction] = []
    emit = record or ignore_action

    def keep(action: SupervisorAction | Check) -> None:
        if isinstance(action, SupervisorAction):
            actions.append(action)
        emit(action)

    if not isinstance(text, str):
        raise ValidationError(f"a plan is read from text, got {type(text).__name__}")
    model = None if deterministic_only else supervisor
    value = parse_json(text, model, keep, schema) if model is not None else _load(text, keep)
    plan = _as_plan(value, tools, validator)
    if plan is None:
        original = value
        if model is None:
            value = _normalize(value, tools, validator, keep)
        else:
            value = model.repair_plan(value, record=keep)
            try:
                validator.validate_plan(value)
            except ValidationError as exc:
                raise SupervisorError(
                    f"the repaired plan is still invalid: {exc}", last_error=str(exc)
                ) from None
        admit_repair(original, value, plan_repair_scope(original, tools))  # FR-032
        plan = Plan.model_validate(value)
    if not actions:  # read from the text as it is, nothing repaired: JSON data, as loads_strict checked
        if len(_PARSED) >= 16:
            _PARSED.clear()
        _PARSED[id(plan)] = (plan, validator)
    return PlanParse(plan, tuple(actions))


#: The plans :func:`parse_plan` read lately from JSON text with no repair, with the validator that accepted them
#: (the plan is kept, so its id cannot be reused while it is here): a scheduler need not check them again.
_PARSED: dict[int, tuple[Plan, Validator]] = {}


def parsed_by(plan: Plan, validator: Validator) -> bool:
    """Whether ``plan`` is one :func:`parse_plan` read (lately) from JSON text and ``validator`` accepted."""
    kept = _PARSED.get(id(plan))
    return kept is not None and kept[0] is plan and kept[1] is validator


def tool_call_scope(schema: dict[str, Any], arguments: Any) -> RepairScope:
    """What a tool call's repair is about: the arguments the tool's schema rejects (all of them when the model's
    arguments are not an object); the others stay as the model wrote them."""
    if not isinstance(arguments, dict):
        return RepairScope(arguments=None)
    return RepairScope(arguments=about(schema_errors(schema, arguments)))


def plan_repair_scope(original: Any, tools: ToolRegistry) -> RepairScope:
    """What a plan repair is about: it may name the tools the plan names under another key (``tool_name``,
    ``function``: what :func:`normalize_plan` reads), and change the arguments of the steps whose arguments were
    not valid for their tool (or whose tool is unknown); every other step's arguments stay as the model wrote them."""
    named = frozenset(tool_names(normalize_plan(original, tools)))
    steps = original.get("steps") if isinstance(original, dict) else None
    if not isinstance(steps, list):
        return RepairScope(tools=named, arguments=None)
    broken = set()
    for step in steps:
        if not isinstance(step, dict):
            continue
        tool = tools.get(step["tool"]) if isinstance(step.get("tool"), str) else None
        arguments = step.get("arguments")
        if tool is None or not isinstance(arguments, dict) or schema_errors(tool.input_schema, arguments):
            broken.add(str(step.get("step_id")))
    return RepairScope(tools=named, arguments=frozenset(broken))


def _load(text: str, keep: RecordAction) -> Any:
    try:
        return loads_strict(text)
    except ValueError:
        pass
    try:
        value = repair_json_text(text)
    except ValidationError as exc:
        keep(_action("json_repair", {"text": text}, error=str(exc)))
        raise SupervisorError(
            f"no plan can be read from the model's text without guessing: {exc}. {_NEXT}",
            attempts=1,
            last_error=str(exc),
        ) from None
    keep(_action("json_repair", {"text": text}, repaired=value))
    return value


def _as_plan(value: Any, tools: ToolRegistry, validator: Validator) -> Plan | None:
    """The plan ``value`` is when valid, and not only because pydantic ignores a field under another name
    (``tool_name``); else None. A plan in its own shape (:func:`_canonical`) skips :func:`normalize_plan`."""
    try:
        plan = validator.validated_plan(value)
        if _canonical(value):
            return plan
        normalized = normalize_plan(value, tools)
        return plan if normalized == value or _dump(normalized) == _dump(value) else None
    except (ValidationError, ValueError):
        return None


_PLAN_FIELDS: Final = frozenset({"goal", "steps"})
_STEP_FIELDS: Final = frozenset({"step_id", "description", "tool", "arguments", "agent"})


def _canonical(value: Any) -> bool:
    """Whether :func:`normalize_plan` would give ``value`` back unchanged, told without running it: a goal and a
    non-empty list of steps, each with only its own keys, a trimmed id of its own, a description, a tool (text) or
    ``"agent": "llm"``, and arguments that are an object. Anything else takes the full path."""
    steps = value.get("steps") if isinstance(value, dict) and value.keys() <= _PLAN_FIELDS else None
    if not isinstance(steps, list) or not steps or not _text(value.get("goal")):
        return False
    ids: set[str] = set()
    for step in steps:
        if type(step) is not dict or not step.keys() <= _STEP_FIELDS:
            return False
        step_id, tool, agent = step.get("step_id"), step.get("tool"), step.get("agent")
        if not isinstance(step_id, str) or step_id in ids or step_id != step_id.strip() or not _text(step_id):
            return False
        if not _text(step.get("description")) or type(step.get("arguments", {})) is not dict:
            return False
        if agent not in (None, "llm") or not (_text(tool) or (agent == "llm" and "tool" not in step)):
            return False
        ids.add(step_id)
    return True


def _normalize(value: Any, tools: ToolRegistry, validator: Validator, keep: RecordAction) -> Any:
    """``repair_plan`` without a model: :func:`normalize_plan`, kept only when the validator accepts it."""
    repaired = normalize_plan(value, tools)
    try:
        validator.validate_plan(repaired)
    except ValidationError as exc:
        keep(_action("plan_repair", _as_dict(value), error=str(exc)))
        raise SupervisorError(
            f"no deterministic repair makes this a valid plan: {exc}. {_NEXT}",
            attempts=1,
            last_error=str(exc),
        ) from None
    keep(_action("plan_repair", _as_dict(value), repaired=repaired))
    return repaired


# --- syntax ----------------------------------------------------------------------------------------------------


def repair_json_text(text: str) -> Any:
    """The JSON value ``text`` holds, read leniently: code fences and prose around it, trailing commas, single
    quotes, Python literals, comments, raw control characters, closing brackets that are all that is missing
    (read exactly, token by token; what that cannot read goes to json-repair), or YAML in a closed ```yaml block.
    Several values in the text come back as a list.

    Raises ValidationError when nothing can be read without guessing: no JSON at all, NaN or Infinity, a lone
    surrogate, quotes that do not pair up, or a text cut off inside a string, a number or a list, or after a key
    (closing it would change or drop what it said).
    """
    try:
        return loads_strict(text)
    except ValueError:
        pass
    if len(text) > MAX_REPAIR_CHARS:
        raise ValidationError(
            f"{len(text):,} characters are too long to repair (at most {MAX_REPAIR_CHARS:,})"
        )
    fences = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
    yaml_blocks = [body for lang, body in fences if lang in ("yaml", "yml")]
    if yaml_blocks:
        return _load_yaml(yaml_blocks[0])
    if re.search(r"```[ \t]*ya?ml", text, re.IGNORECASE):
        raise ValidationError("a ```yaml block without its closing fence may have been cut off")
    if '\\"' in text and isinstance(unescaped := _loads_or_none(f'"{text.strip()}"'), str):
        text = unescaped  # the inside of a JSON string, without its quotes: every quote in it is escaped
    tokens = _tokens(text)
    problem = _guess_needed(tokens)
    if problem is not None:
        raise ValidationError(problem)
    values = _strict_values(tokens)
    if values:
        return _json_data(values[0] if len(values) == 1 else values)
    import json_repair  # imported here: `import aeon_kernel` stays light

    try:
        value = json_repair.repair_json(text, return_objects=True)
    except RecursionError:
        raise ValidationError("the JSON is nested too deeply to repair") from None
    except Exception as exc:  # a third-party parser on hostile text; what failed is all that matters
        raise ValidationError(f"json-repair could not read it: {type(exc).__name__}: {exc}") from None
    if not isinstance(value, (dict, list)) and fences:
        return _load_yaml(fences[0][1])  # an unlabelled block that is not JSON may be YAML
    if value == "" and text.strip() not in ('""', "''"):
        raise ValidationError("no JSON could be recovered from the text")
    return _json_data(value)


Token = tuple[str, str, int, int]  # kind (open, close, ",", ":", string, word, cut), text, start, end


def _tokens(text: str) -> list[Token]:
    """The tokens of the bracketed values in ``text``; prose between them, whitespace and comments are skipped.
    A string or comment left open ends the list with a ``cut`` token."""
    tokens: list[Token] = []
    depth, i, n = 0, 0, len(text)
    while i < n:
        if depth == 0:  # prose between top-level values: jump to the next bracket
            found = _OPENER.search(text, i)
            if found is None:
                break
            i = found.start()
        start, char = i, text[i]
        if char.isspace():
            i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                tokens.append(("cut", "a comment", start, n))
                break
            i = end + 2
            continue
        if char == "#" or text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if char in "\"'":
            string = _STRING[char].match(text, i)
            if string is None:
                tokens.append(("cut", "a string", start, n))
                break
            kind, i = "string", string.end()
        elif char in "{[":
            kind, i, depth = "open", i + 1, depth + 1
        elif char in "}]":
            kind, i, depth = "close", i + 1, max(depth - 1, 0)
        elif char in ",:":
            kind, i = char, i + 1
        else:
            match = _WORD.match(text, i)
            kind, i = "word", match.end() if match else i + 1
        tokens.append((kind, text[start:i], start, i))
    return tokens


def _guess_needed(tokens: list[Token]) -> str | None:
    """Why reading these tokens as JSON would take a guess; None when it would not.

    Refused: a value cut off where closing it would drop or change what it said (inside a string, a number or a
    list, or after a key: a plan cut inside its steps has lost a step, or a step its tool or arguments); quotes
    that do not pair up (a string running straight into a word, as in ``'it's'``); NaN, Infinity or an integer
    too long to read, which json-repair would turn into text.
    """
    stack: list[str] = []
    before = last = word = ""  # the kinds of the last two tokens; the last bare word
    last_end = -1
    for kind, token, start, end in tokens:
        if kind == "cut":
            return f"it was cut off inside {token}"
        if kind in ("string", "word") and last in ("string", "word") and start == last_end:
            return "its quotes do not pair up (a string runs straight into a word): where a value ends is a guess"
        if kind == "word":
            word, bare = token, token.lstrip("+-").lower()
            if bare in ("nan", "inf", "infinity"):
                return f"{token} is not a number JSON can hold"
            if bare.isdigit() and len(bare) > (sys.get_int_max_str_digits() or len(bare)):
                return "it holds an integer too long to read"
        elif kind == "open":
            stack.append(token)
        elif kind == "close" and stack:
            stack.pop()
        before, last, last_end = last, kind, end
    if not stack:
        return None
    if "[" in stack:
        return "it was cut off inside a list: what followed (later steps, the rest of a step) is lost"
    if last == "close" or (before == ":" and (last == "string" or (last == "word" and word in _LITERALS))):
        return None
    if last == "word" and before == ":":
        return f"it was cut off after {word!r}, which may have lost characters"
    return "it was cut off before a value was complete"


def _strict_values(tokens: list[Token]) -> list[Any] | None:
    """The values the tokens spell, read exactly: strings in either quote, Python's True/False/None, trailing
    commas dropped, missing closing brackets added. None when a token needs a guess (json-repair's job)."""
    values: list[Any] = []
    parts: list[str] = []
    stack: list[str] = []
    for kind, token, _, _ in tokens:
        if kind == "string":
            parts.append(json.dumps(_unquoted(token), ensure_ascii=False))
        elif kind == "word":
            literal = _LITERALS.get(token) or (token if _NUMBER.fullmatch(token) else None)
            if literal is None:
                return None
            parts.append(literal)
        elif kind == "open":
            stack.append(token)
            parts.append(token)
        elif kind == "close":
            if not stack or _CLOSER[stack.pop()] != token:
                return None
            if parts[-1] == ",":
                parts.pop()
            parts.append(token)
            if not stack:
                values.append("".join(parts))
                parts = []
        else:
            parts.append(token)
    if stack:  # cut off where only closing brackets are missing (_guess_needed let it through)
        values.append("".join([*parts, *(_CLOSER[bracket] for bracket in reversed(stack))]))
    try:
        return [loads_strict(value) for value in values]
    except ValueError:
        return None


def _unquoted(token: str) -> str:
    """A string token's text, its escapes read; an escape JSON does not know is kept as written."""
    text = _ESCAPE.sub(_escape, token[1:-1])
    try:
        return text.encode("utf-16", "surrogatepass").decode("utf-16")  # the halves of a pair joined
    except UnicodeDecodeError:
        return text  # a lone surrogate: refused as JSON data later


def _escape(match: re.Match[str]) -> str:
    code = match[1]
    return chr(int(code[1:], 16)) if len(code) > 1 else _ESCAPES.get(code, match[0])


@functools.cache
def _yaml_loader() -> Any:
    """A safe YAML loader that reads only what JSON can say: ``no`` and ``1:20`` and dates stay text."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.yaml_implicit_resolvers = {}
    for tag, pattern, first in [
        ("bool", r"true|false|True|False", "tTfF"),
        ("null", r"null|Null|~|", ["n", "N", "~", ""]),
        ("int", r"-?(?:0|[1-9][0-9]*)", "-0123456789"),
        ("float", _NUMBER.pattern, "-0123456789"),
    ]:
        Loader.add_implicit_resolver(f"tag:yaml.org,2002:{tag}", re.compile(f"^(?:{pattern})$"), list(first))
    return Loader


def _load_yaml(block: str) -> Any:
    import yaml

    loader = _yaml_loader()
    try:
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(block, Loader=loader)):
            raise ValidationError("YAML aliases are not repaired (they can expand without bound)")
        return _json_data(yaml.load(block, Loader=loader))  # noqa: S506 - a SafeLoader subclass
    except (yaml.YAMLError, RecursionError) as exc:
        raise ValidationError(f"the YAML block does not parse: {exc}") from None


def _json_data(value: Any) -> Any:
    """``value`` as JSON data: no NaN or Infinity, no lone surrogate, no bytes or dates, not too deep; keys text."""
    try:
        return loads_strict(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValidationError(f"not JSON data: {exc}") from None


# --- structure -------------------------------------------------------------------------------------------------


def normalize_plan(value: Any, tools: ToolRegistry | None = None) -> Any:
    """``value`` in the plan's own shape, by fixes that change no meaning; what it cannot fix is left for the
    validator to report. Never raises.

    It reads a plan given as JSON text, inside a wrapper (``{"plan": {...}}``) or as a bare list of steps; takes
    ``steps`` and ``goal`` from other names, a single step or steps keyed by id as the list; in each step takes
    the tool from ``tool_name``/``function`` (or ``action``/``name`` when that is a registered tool), the
    arguments from ``args``/``parameters``/``input`` or a JSON string, the description from ``name``/``task``;
    fills or renumbers missing or repeated ids, drops exact repeats of a step and the run's own fields.
    """
    registered = frozenset(tools.list_all() if tools is not None else ())
    plan = _plan_object(value, registered, 0)
    if plan is None:
        return value
    plan = dict(plan)
    steps = plan.get("steps")
    if not isinstance(steps, list):
        for key in _STEPS_KEYS:
            found = _as_steps(plan.get(key), registered)
            if found is not None:
                plan.pop(key)
                steps = found
                break
    if not _text(plan.get("goal")):
        for key in _GOAL_KEYS:
            if _text(plan.get(key)):
                plan["goal"] = plan.pop(key)
                break
    if not isinstance(steps, list):
        return plan
    fixed: list[Any] = []
    seen: set[str] = set()
    for step in steps:
        if isinstance(step, dict):
            step = _step(step, registered)
            key = dumps_lenient(sorted(step.items(), key=repr))
            if key in seen:  # the same step, id and all, written twice
                continue
            seen.add(key)
        fixed.append(step)
    ids = [s.get("step_id") if isinstance(s, dict) else None for s in fixed]
    if None in ids or len(set(ids)) != len(ids):
        fixed = [{**s, "step_id": str(n)} if isinstance(s, dict) else s for n, s in enumerate(fixed, 1)]
    return {**plan, "steps": fixed}


def _plan_object(value: Any, registered: frozenset[str], depth: int) -> dict[str, Any] | None:
    """The dict that holds the plan: ``value`` itself, parsed from text, unwrapped, or built around steps."""
    if depth > _MAX_NESTING:
        return None
    if isinstance(value, str):
        value = _parsed(value)
        return None if value is None else _plan_object(value, registered, depth + 1)
    if isinstance(value, list):
        if value and all(_is_step(item, registered) for item in value):
            return {"steps": value}
        plans = _unique(p for item in value if (p := _plan_object(item, registered, depth + 1)) is not None)
        return plans[0] if len(plans) == 1 else None
    if not isinstance(value, dict):
        return None
    plan = _snake_keys(value)
    if any(_as_steps(plan.get(key), registered) is not None for key in _STEPS_KEYS):
        return plan
    inner = _unique(
        p for v in plan.values() if (p := _plan_object(v, registered, depth + 1)) is not None and "steps" in p
    )
    if len(inner) == 1:
        goal = {"goal": plan["goal"]} if _text(plan.get("goal")) else {}
        return {**goal, **inner[0]}
    return None


def _as_steps(value: Any, registered: frozenset[str]) -> list[Any] | None:
    """A list of steps from a list, one step, steps keyed by their id, or the JSON text of any of these."""
    if isinstance(value, str):
        value = _parsed(value)
    if isinstance(value, list):
        return value if value and any(_is_step(item, registered) for item in value) else None
    if _is_step(value, registered):
        return [value]
    if isinstance(value, dict) and value and all(_is_step(v, registered) for v in value.values()):
        return [{"step_id": key, **step} for key, step in value.items()]
    return None


def _is_step(value: Any, registered: frozenset[str]) -> bool:
    if not isinstance(value, dict):
        return False
    step = _snake_keys(value)
    return (
        not _STEP_KEYS.isdisjoint(step) or not registered.isdisjoint(step) or _text(step.get("description"))
    )


def _step(raw: dict[str, Any], registered: frozenset[str]) -> dict[str, Any]:
    step = {k: v for k, v in _snake_keys(raw).items() if k not in _RUN_STATE}
    if not _text(step.get("tool")):
        _take_tool(step, registered)
    for key in _ARGUMENT_KEYS:  # an object, or the JSON text of one; other text may mean something else
        value = _parsed(step[key]) if isinstance(step.get(key), str) else step.get(key)
        if isinstance(value, dict) and (key == "arguments" or "arguments" not in step):
            step.pop(key)
            step["arguments"] = value
            break
    if isinstance(step.get("agent"), str) and step["agent"].strip().lower() == "llm":
        step["agent"] = "llm"
    if not _text(step.get("description")):
        for key in _DESCRIPTION_KEYS[1:]:
            if _text(step.get(key)) and step[key] != step.get("tool"):
                step["description"] = step.pop(key)
                break
    for key, value in [(key, step.pop(key)) for key in _ID_KEYS if key in step]:
        if _integer(value) or (_text(value) and (key in ("step_id", "id") or value.strip().isdigit())):
            step["step_id"] = str(value).strip()
            break
    return step


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _take_tool(step: dict[str, Any], registered: frozenset[str]) -> None:
    """The tool from another key: a name, a call object (``{"function": {"name": ..., "arguments": ...}}``), or
    a registered tool's name as the key of its arguments."""
    for key in (*_TOOL_KEYS, *_MAYBE_TOOL_KEYS):
        value = step.get(key)
        if isinstance(value, dict):
            call = _snake_keys(value)
            name = next((call[k] for k in ("name", *_TOOL_KEYS) if _text(call.get(k))), None)
            if name is not None:
                step.pop(key)
                step["tool"] = name
                arguments = next((call[k] for k in _ARGUMENT_KEYS if k in call), None)
                if arguments is not None and "arguments" not in step:
                    step["arguments"] = arguments
                return
        if _text(value) and (key in _TOOL_KEYS or value in registered):
            step["tool"] = step.pop(key)
            return
    named = [k for k in step if k in registered and isinstance(step[k], dict)]
    if len(named) == 1 and "arguments" not in step:
        step["arguments"] = step.pop(named[0])
        step["tool"] = named[0]


def _snake_keys(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` with its keys in snake case (``stepId``, ``Step ID``, ``Goal``), unless that name is taken."""
    result: dict[str, Any] = {}
    for key, item in value.items():
        name = re.sub(r"[\s-]+", "_", _CAMEL.sub("_", key.strip())).lower() if isinstance(key, str) else key
        result[name if name not in value and name not in result else key] = item
    return result


def _loads_or_none(text: str) -> Any:
    try:
        return loads_strict(text)
    except ValueError:
        return None


def _parsed(text: str) -> Any:
    try:
        return repair_json_text(text)
    except ValidationError:
        return None


def _unique(items: Iterator[dict[str, Any]]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for item in items:
        if item not in found:
            found.append(item)
    return found


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _dump(value: Any) -> Any:
    return Plan.model_validate(value).model_dump(mode="json")


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {"value": value}


def _action(
    kind: SupervisorActionType, original: dict[str, Any], repaired: Any = None, error: str | None = None
) -> SupervisorAction:
    return SupervisorAction(
        action_type=kind,
        original_output=original,
        repaired_output=None if error is not None else _as_dict(repaired),
        error=None if error is None else {"message": error},
        attempt_number=1,
        method="deterministic",
    )
