"""Worked plan examples, chosen per request: a small model copies the example closest to the request.

Gemma 3 270M writes a plan by imitating the examples in its prompt far more than by reading the request: shown
"what is 6 times 7?" → ``6 * 7`` only, it writes ``2 * 10`` for "2 to the power of 10". Shown the example whose
wording is nearest the request ("what is 3 to the power of 4?" → ``3 ^ 4``), it writes ``2 ^ 10``. So the plan
prompt shows the :data:`PLAN_EXAMPLES` most like the request, by shared words and symbols, the closest last
(nearest the request). Examples that use a tool the run does not have are never shown.

Measured on twenty requests written after the pool, none of them in it (bench/README.md, issue 14): 14/20
calculator plans right with the chosen examples, against 10/20 with the fixed five.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

#: How many examples a plan prompt shows.
EXAMPLES_SHOWN: Final = 5

_WORD: Final = re.compile(r"[a-z]+|\d+(?:\.\d+)?|[-+*/%^()]")


@dataclass(frozen=True)
class PlanExample:
    """A request and the plan that serves it."""

    request: str
    plan: dict[str, Any]

    # Cached: the pool is constant, and every plan prompt reads each example's tools and words.
    @cached_property
    def tools(self) -> frozenset[str]:
        return frozenset(step["tool"] for step in self.plan["steps"] if "tool" in step)

    @cached_property
    def words(self) -> frozenset[str]:
        return _words(self.request)

    def text(self) -> str:
        return self._text

    @cached_property
    def _text(self) -> str:
        return f"Request: {self.request}\nPlan: {json.dumps(self.plan)}"


def _calculation(
    request: str, goal: str, expression: str, report: str = "Report the result", description: str = ""
) -> PlanExample:
    return PlanExample(
        request,
        {
            "goal": goal,
            "steps": [
                {
                    "step_id": "1",
                    "description": description or goal,
                    "tool": "calculator",
                    "arguments": {"expression": expression},
                },
                {"step_id": "2", "description": report, "agent": "llm"},
            ],
        },
    )


def _echo(request: str, goal: str, message: str, description: str = "") -> PlanExample:
    step = {
        "step_id": "1",
        "description": description or goal,
        "tool": "echo",
        "arguments": {"message": message},
    }
    return PlanExample(request, {"goal": goal, "steps": [step]})


def _thought(request: str, goal: str, description: str) -> PlanExample:
    return PlanExample(
        request, {"goal": goal, "steps": [{"step_id": "1", "description": description, "agent": "llm"}]}
    )


#: The pool, in the order ties are broken (earlier first).
PLAN_EXAMPLES: Final = (
    _calculation("what is 6 times 7?", "Multiply 6 by 7", "6 * 7", "Report the product"),
    _calculation(
        "what is nine minus four, then doubled?",
        "Subtract 4 from 9 and double it",
        "(9 - 4) * 2",
        description="Compute (9 - 4) * 2",
    ),
    _calculation(
        "what is 10% of 50?", "Take 10 percent of 50", "50 * 10 / 100", description="10 percent of 50"
    ),
    _calculation("what is 4 squared?", "Square 4", "4 ^ 2"),
    _calculation(
        "what is 3 to the power of 4?",
        "Raise 3 to the power of 4",
        "3 ^ 4",
        description="3 to the power of 4",
    ),
    _calculation("compute (1 + 2) * 6", "Compute (1 + 2) * 6", "(1 + 2) * 6"),
    _calculation("subtract 7 from 30", "Subtract 7 from 30", "30 - 7", "Report the difference"),
    _calculation(
        "add 6 and 9, then divide the result by 5",
        "Add 6 and 9, then divide by 5",
        "(6 + 9) / 5",
        description="Compute (6 + 9) / 5",
    ),
    _calculation("what is five plus eleven?", "Add 5 and 11", "5 + 11", "Report the sum"),
    _calculation("what is 5 cubed?", "Cube 5", "5 ^ 3"),
    _calculation(
        "what is sixty minus twenty-two?", "Subtract 22 from 60", "60 - 22", "Report the difference"
    ),
    _echo("say good morning", "Say good morning", "good morning"),
    _echo(
        "repeat back exactly: the sky is blue", "Repeat the sky is blue", "the sky is blue", "Repeat the text"
    ),
    _thought("who wrote Hamlet?", "Name the author of Hamlet", "Answer who wrote Hamlet"),
    _thought("what time is it in Tokyo?", "Tell the time in Tokyo", "Explain that no tool can tell the time"),
)


def example_arguments() -> frozenset[str]:
    """Every text argument the pool's plans give a tool ("the sky is blue", "6 * 7"): a plan that gives one of
    them for another request may have copied it (:func:`aeon_plugins.planning.grounding.plan_problems`)."""
    return frozenset(
        value
        for example in PLAN_EXAMPLES
        for step in example.plan["steps"]
        for value in step.get("arguments", {}).values()
        if isinstance(value, str)
    )


def _words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower()))


def plan_examples(
    request: str, tools: Collection[str], shown: int = EXAMPLES_SHOWN, leave_out: int | None = None
) -> str:
    """The prompt's examples for ``request``: the ``shown`` examples of the pool whose tools are all in ``tools``
    and whose words are most like the request's (Jaccard similarity), least like it first. ``leave_out``: the
    rank (0, the nearest) of one of them to show the next nearest instead, for a plan written from other
    examples (:mod:`aeon_plugins.planning.agreement`)."""
    words = _words(request)

    def likeness(example: PlanExample) -> float:
        theirs = example.words
        return len(words & theirs) / (len(words | theirs) or 1)

    usable = [e for e in PLAN_EXAMPLES if e.tools <= set(tools)]
    ranked = sorted(usable, key=likeness, reverse=True)  # stable: ties keep the pool's order
    if leave_out is not None and leave_out < len(ranked):
        del ranked[leave_out]
    closest = ranked[:shown]
    return "\n".join(example.text() for example in reversed(closest))
