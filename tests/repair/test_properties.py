"""Properties of the deterministic repair, on plans and texts Hypothesis makes up."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from aeon_kernel import AeonError
from aeon_plugins.planning import PlanParse, normalize_plan, parse_plan, repair_json_text
from aeon_plugins.schema_validator import SchemaValidator
from tests.repair.corpus import corpus_tools

TOOLS = corpus_tools()
VALIDATOR = SchemaValidator()

words = st.text(st.sampled_from("abcxyz 0123456789+-*/'\",:{}[]\\é"), min_size=1, max_size=12).filter(
    str.strip
)
arguments = st.dictionaries(
    st.sampled_from(["expression", "message", "text", "times"]), words | st.integers()
)
tool_steps = st.fixed_dictionaries(
    {
        "description": words,
        "tool": st.sampled_from(["calculator", "echo", "repeat", "weather"]),
        "arguments": arguments,
    }
)
llm_steps = st.fixed_dictionaries({"description": words, "agent": st.just("llm")})
plans = st.builds(
    lambda goal, steps: {"goal": goal, "steps": [{"step_id": str(i), **s} for i, s in enumerate(steps, 1)]},
    words,
    st.lists(tool_steps | llm_steps, min_size=1, max_size=4),
)


def deterministic(text: str) -> PlanParse | AeonError:
    try:
        return parse_plan(text, TOOLS, None, VALIDATOR, deterministic_only=True)
    except AeonError as exc:
        return exc


def written(plan: dict[str, Any], style: int) -> str:
    """The plan as a model may write it: compact JSON, pretty JSON, or a Python literal."""
    return [json.dumps(plan), json.dumps(plan, indent=2), repr(plan)][style]


@settings(max_examples=40, deadline=None)
@given(plans, st.integers(0, 2))
def test_a_plan_cut_anywhere_is_the_whole_plan_or_refused(plan: dict[str, Any], style: int) -> None:
    """No step ever loses its tool or arguments to a cut: what comes back is the plan as written, or an error."""
    text = written(plan, style)
    for end in range(len(text)):
        outcome = deterministic(text[:end])
        if isinstance(outcome, PlanParse):
            assert outcome.plan.model_dump(mode="json", exclude_defaults=True) == plan, text[:end]


@settings(max_examples=300, deadline=None)
@given(
    st.text(st.characters(codec=None, exclude_categories=())) | st.text(st.sampled_from("{}[]:,\"' \n\\aN1"))
)
def test_any_text_ends_in_a_plan_or_a_structured_error(text: str) -> None:
    outcome = deterministic(text)
    assert isinstance(outcome, (PlanParse, AeonError))
    with contextlib.suppress(AeonError):  # a value, or a structured error: nothing else
        repair_json_text(text)


@settings(max_examples=200, deadline=None)
@given(
    plans,
    st.integers(0, 2),
    st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from("{}[]:,\"' x\n")), max_size=3),
)
def test_a_damaged_plan_never_gains_a_tool(
    plan: dict[str, Any], style: int, edits: list[tuple[int, str]]
) -> None:
    """FR-032 under random damage: a repair may lose a tool, never name one the text did not."""
    text = written(plan, style)
    for position, char in edits:
        at = position % (len(text) + 1)
        text = text[:at] + char + text[at + 1 :]
    outcome = deterministic(text)
    if isinstance(outcome, PlanParse):
        assert all(step.tool is None or step.tool in text for step in outcome.plan.steps)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | words,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["goal", "steps", "Steps", "tool_name", "args", "id", "plan", "action"])
            | st.integers(),
            inner,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(json_values | plans)
def test_normalize_plan_never_raises_and_is_idempotent(value: Any) -> None:
    once = normalize_plan(value, TOOLS)
    assert normalize_plan(once, TOOLS) == once


# --- the fast path of a plan written in its own shape (issue 31) ----------------------------------------------------

#: plans near the canonical shape: ids that are numbers or padded, a key of another name, a tool that is not text,
#: a repeated id, an agent in capitals, arguments as JSON text, the run's own fields
variations = st.sampled_from(
    [
        lambda s: {**s, "step_id": int(s["step_id"])},
        lambda s: {**s, "step_id": f" {s['step_id']}"},
        lambda s: {**s, "step_id": "1"},
        lambda s: {**s, "status": "pending"},
        lambda s: {**s, "agent": "LLM"} if "agent" in s else {**s, "tool_name": s["tool"]},
        lambda s: {**s, "arguments": json.dumps(s["arguments"])} if "arguments" in s else {**s, "args": {}},
        lambda s: {k: v for k, v in s.items() if k != "description"},
        lambda s: {**s, "tool": None},
        lambda s: s,
    ]
)
near_plans = st.builds(
    lambda plan, changes: {
        **plan,
        "steps": [change(step) for step, change in zip(plan["steps"], changes, strict=False)]
        + plan["steps"][len(changes) :],
    },
    plans,
    st.lists(variations, max_size=4),
)


@settings(max_examples=300, deadline=None)
@given(near_plans | plans)
def test_a_plan_the_fast_path_takes_is_one_normalize_plan_leaves_unchanged(value: dict[str, Any]) -> None:
    from aeon_plugins.planning.parse import _canonical

    if _canonical(value):
        assert normalize_plan(value, TOOLS) == value


@settings(max_examples=150, deadline=None)
@given(near_plans | plans, st.integers(0, 2))
def test_the_fast_path_and_the_full_pipeline_give_the_same_plan(plan: dict[str, Any], style: int) -> None:
    """A valid plan read through the fast path and through normalize_plan: the same Plan, or the same error."""
    import aeon_plugins.planning.parse as parse

    text = written(plan, style)
    fast = deterministic(text)
    with contextlib.ExitStack() as stack:
        stack.enter_context(_patched(parse, "_canonical", lambda value: False))
        full = deterministic(text)
    if isinstance(fast, PlanParse) and isinstance(full, PlanParse):
        untimed = [[a.model_dump(exclude={"timestamp"}) for a in p.actions] for p in (fast, full)]
        assert fast.plan == full.plan and untimed[0] == untimed[1]
    else:
        assert type(fast) is type(full) and str(fast) == str(full)


@settings(max_examples=50, deadline=None)
@given(plans)
def test_every_plan_the_strategy_writes_takes_the_fast_path(plan: dict[str, Any]) -> None:
    """So the two properties above are about the fast path, not only about plans that leave it."""
    from aeon_plugins.planning.parse import _canonical

    assert _canonical(plan)


@contextlib.contextmanager
def _patched(module: Any, name: str, value: Any) -> Any:
    original = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, original)


def test_a_parsed_plan_is_known_as_json_to_the_validator_that_accepted_it_only() -> None:
    """The linear scheduler skips re-checking a plan parse_plan read from JSON text with the run's validator; a
    copy, or a plan another validator accepted, is checked again (issue 31)."""
    from aeon_plugins.planning.parse import parsed_by

    text = json.dumps({"goal": "g", "steps": [{"step_id": "1", "description": "d", "agent": "llm"}]})
    parsed = parse_plan(text, TOOLS, None, VALIDATOR, deterministic_only=True)
    assert parsed_by(parsed.plan, VALIDATOR)
    assert not parsed_by(parsed.plan, SchemaValidator())
    assert not parsed_by(parsed.plan.model_copy(), VALIDATOR)
