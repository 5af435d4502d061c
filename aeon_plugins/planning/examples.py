"""Worked plan examples, chosen per request: a small model copies the example closest to the request.

Gemma 3 270M writes a plan by imitating the examples in its prompt far more than by reading the request: shown
"what is 6 times 7?" → ``6 * 7`` only, it writes ``2 * 10`` for "2 to the power of 10". Shown the example whose
wording is nearest the request ("what is 3 to the power of 4?" → ``3 ^ 4``), it writes ``2 ^ 10``. So the plan
prompt shows the :data:`PLAN_EXAMPLES` most like the request, by shared words (in any of their forms) and symbols,
the closest last (nearest the request). Examples that use a tool the run does not have are never shown.

Measured on twenty requests written after the pool, none of them in it (bench/README.md, issue 14): 14/20
calculator plans right with the chosen examples, against 10/20 with the fixed five. The pool then grew (issue 26,
stop 45) by wordings the model got wrong with no example of their own ("64 over 8" as ``64 * 8``, "three quarters
of 80" as ``3 * 80``, "the difference between 100 and 37" as ``100 + 37``) and by chains joined without "then"
("multiply 7 by 8 and subtract 6 from the product"); each calculator example is one the calculator's review does
not fault (``tests/llm/test_examples.py``). Its effect on the frozen set is in bench/README.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

from aeon_plugins.calculator import request_numbers

#: How many examples a plan prompt shows.
EXAMPLES_SHOWN: Final = 5

#: how much a difference of one in the count of numbers weighs against shared words: a small model copies the
#: example's shape, so "multiply 9 by 6" is shown "6 times 7" before "multiply 7 by 8 and subtract 6" (which made
#: it write ``9 * 6 - 9``)
_SHAPE_WEIGHT: Final = 0.25

#: the words and symbols compared; not the numbers, which a request shares with an example by chance (how many it
#: states is compared apart: :data:`_SHAPE_WEIGHT`)
_WORD: Final = re.compile(r"[a-z]+|[-+*/%^()]")


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

    @cached_property
    def numbers(self) -> int:
        return _numbers(self.request)

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
    _calculation("what is the square of 7?", "Square 7", "7 ^ 2"),
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
    # wordings a small model gets wrong without an example of its own (issue 26): shares, "over", "go into",
    # "exceed", "less", averages, roots, units, percent changes, and chains (joined by "and" as well as "then")
    _calculation("how much is 56 over 7?", "Divide 56 by 7", "56 / 7", "Report the quotient"),
    _calculation("how many times does 6 go into 42?", "Divide 42 by 6", "42 / 6", "Report the quotient"),
    _calculation("by how much does 80 exceed 35?", "Subtract 35 from 80", "80 - 35", "Report the difference"),
    _calculation("what is 90 less 25?", "Subtract 25 from 90", "90 - 25", "Report the difference"),
    _calculation(
        "what is the difference between 50 and 18?", "Subtract 18 from 50", "50 - 18", "Report the difference"
    ),
    _calculation("what is the sum of 14 and 27?", "Add 14 and 27", "14 + 27", "Report the sum"),
    _calculation("what is the product of 8 and 12?", "Multiply 8 by 12", "8 * 12", "Report the product"),
    _calculation("divide 96 by 8", "Divide 96 by 8", "96 / 8", "Report the quotient"),
    _calculation("multiply 4 by 9", "Multiply 4 by 9", "4 * 9", "Report the product"),
    _calculation("what is half of 48?", "Halve 48", "48 / 2"),
    _calculation("what is three quarters of 40?", "Take three quarters of 40", "40 * 3 / 4"),
    _calculation("what is a quarter of 36?", "Take a quarter of 36", "36 / 4"),
    _calculation(
        "what is 30 percent of 70?", "Take 30 percent of 70", "70 * 30 / 100", description="30 percent of 70"
    ),
    _calculation("what is the square root of 81?", "Take the square root of 81", "81 ^ 0.5"),
    _calculation("double 35", "Double 35", "35 * 2"),
    _calculation("triple 14", "Triple 14", "14 * 3"),
    _calculation("what is the remainder when 17 is divided by 5?", "17 modulo 5", "17 % 5"),
    _calculation(
        "find the average of 10, 20 and 60",
        "Average 10, 20 and 60",
        "(10 + 20 + 60) / 3",
        "Report the average",
    ),
    _calculation(
        "split 120 dollars evenly between 6 people", "Divide 120 by 6", "120 / 6", "Report each share"
    ),
    _calculation("how many seconds are in 5 minutes?", "Multiply 5 minutes by 60", "5 * 60"),
    _calculation("increase 60 by 15%", "Add 15 percent of 60 to 60", "60 + 60 * 15 / 100"),
    _calculation("decrease 250 by 40 percent", "Take 40 percent of 250 off 250", "250 - 250 * 40 / 100"),
    _calculation(
        "a jacket costs 80 dollars and is 25% off. What is the price?",
        "Take 25 percent off 80",
        "80 - 80 * 25 / 100",
        "Report the price",
    ),
    _calculation(
        "multiply 7 by 8 and subtract 6 from the product", "Multiply 7 by 8, then subtract 6", "7 * 8 - 6"
    ),
    _calculation(
        "take the square root of 64 and add 5 to it", "Square root of 64, then add 5", "64 ^ 0.5 + 5"
    ),
    _calculation("square 5, then subtract 4", "Square 5, then subtract 4", "5 ^ 2 - 4"),
    _calculation("double 15 and then add 9", "Double 15, then add 9", "15 * 2 + 9"),
    _calculation("add 12 and 14, then halve the result", "Add 12 and 14, then halve", "(12 + 14) / 2"),
    _calculation(
        "what is 20 percent of 40, plus 3?", "Take 20 percent of 40, then add 3", "40 * 20 / 100 + 3"
    ),
    _calculation(
        "start with 100, subtract 20, then divide by 4",
        "Subtract 20 from 100, then divide by 4",
        "(100 - 20) / 4",
    ),
    _calculation(
        "subtract 8 from 40, then multiply by 3, then add 2",
        "Subtract 8 from 40, multiply by 3, add 2",
        "(40 - 8) * 3 + 2",
    ),
    _calculation("what is 9 more than the product of 4 and 5?", "Multiply 4 by 5, then add 9", "4 * 5 + 9"),
    _calculation("what is 3 less than 6 times 7?", "Multiply 6 by 7, then subtract 3", "6 * 7 - 3"),
    _calculation(
        "multiply the sum of 3 and 5 by the difference of 10 and 4",
        "Multiply 3 + 5 by 10 - 4",
        "(3 + 5) * (10 - 4)",
    ),
    _calculation(
        "there are 4 bags with 15 apples each, and 7 apples are eaten. How many are left?",
        "Multiply 4 by 15, then subtract 7",
        "4 * 15 - 7",
        "Report how many are left",
    ),
    _calculation(
        "a pen costs 3 dollars. What do 8 pens cost with a 5 dollar discount?",
        "Multiply 8 by 3, then subtract 5",
        "8 * 3 - 5",
        "Report the cost",
    ),
    _calculation(
        "a car drives 50 km an hour for 4 hours. How far does it go?",
        "Multiply 50 by 4",
        "50 * 4",
        "Report the distance",
    ),
    _echo("say good morning", "Say good morning", "good morning"),
    _echo(
        "repeat back exactly: the sky is blue", "Repeat the sky is blue", "the sky is blue", "Repeat the text"
    ),
    _echo("echo the words see you soon", "Echo see you soon", "see you soon", "Echo the words"),
    _thought("who wrote Hamlet?", "Name the author of Hamlet", "Answer who wrote Hamlet"),
    _thought("what time is it in Tokyo?", "Tell the time in Tokyo", "Explain that no tool can tell the time"),
    _thought(
        "what is the weather like in Oslo today?",
        "Tell the weather in Oslo",
        "Explain that no tool can tell the weather",
    ),
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
    return frozenset(_stem(word) for word in _WORD.findall(text.lower()))


#: endings a word is compared without, longest first, so that "cube", "cubed" and "cubes" (or "divide" and
#: "divided", "multiply" and "multiplied") count as one word; "half" is "halve"'s
_ENDINGS: Final = ("ing", "ed", "es", "e", "s")
_STEMS: Final = {"half": "halv"}


def _stem(word: str) -> str:
    if len(word) < 4 or not word.isalpha():
        return word
    stem = next((word[: -len(end)] for end in _ENDINGS if word.endswith(end)), word)
    stem = f"{stem[:-1]}y" if stem.endswith("i") else stem
    return _STEMS.get(stem, stem)


def _numbers(text: str) -> int:
    """How many numbers ``text`` states, in digits or words: a rough count of the operations it asks for."""
    return len(request_numbers(text))


def plan_examples(
    request: str, tools: Collection[str], shown: int = EXAMPLES_SHOWN, leave_out: int | None = None
) -> str:
    """The prompt's examples for ``request``: the ``shown`` examples of the pool whose tools are all in ``tools``
    and whose words are most like the request's (Jaccard similarity), least like it first. ``leave_out``: the
    rank (0, the nearest) of one of them to show the next nearest instead, for a plan written from other
    examples (:mod:`aeon_plugins.planning.agreement`)."""
    words, numbers = _words(request), _numbers(request)

    def likeness(example: PlanExample) -> float:
        theirs = example.words
        shared = len(words & theirs) / (len(words | theirs) or 1)
        return shared - _SHAPE_WEIGHT * abs(numbers - example.numbers)

    usable = [e for e in PLAN_EXAMPLES if e.tools <= set(tools)]
    ranked = sorted(usable, key=likeness, reverse=True)  # stable: ties keep the pool's order
    if leave_out is not None and leave_out < len(ranked):
        del ranked[leave_out]
    closest = ranked[:shown]
    return "\n".join(example.text() for example in reversed(closest))
