"""The decomposition helpers (aeon_plugins/multipass/decompose.py): the split, the part steps and their context."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aeon_kernel import PlanStep, StepStatus
from aeon_plugins.multipass.decompose import (
    MAX_PARTS,
    fresh_id,
    part_context,
    part_steps,
    proposed_parts,
    sequenced_parts,
    with_context,
)


@pytest.mark.parametrize(
    ("request_text", "parts"),
    [
        ("add 2 and 3, then multiply the result by 4", ["add 2 and 3", "multiply the result by 4"]),
        ("subtract 5 from 20, then divide the result by 3", ["subtract 5 from 20", "divide the result by 3"]),
        ("calculate 9 times 9 and then echo the result", ["calculate 9 times 9", "echo the result"]),
        ("add 1 and 2; double it", ["add 1 and 2", "double it"]),
        ("add 1 and 2; and then double it", ["add 1 and 2", "double it"]),
        ("add 1 and 2, after that double it", ["add 1 and 2", "double it"]),
        ("add 1 and 2 then double it, finally echo it", ["add 1 and 2", "double it", "echo it"]),
        # an operation on what came before starts a part, and stays in it
        ("what is 20 percent of 150, plus 7?", ["what is 20 percent of 150", "plus 7"]),
        ("What is 7 plus 8, all times 4?", ["What is 7 plus 8", "times 4"]),
        ("take 8 squared, divided by 4", ["take 8 squared", "divided by 4"]),
        # "and" or a comma before an operation verb, once an operation on a number came before
        (
            "multiply eight by nine and subtract twelve from the product",
            ["multiply eight by nine", "subtract twelve from the product"],
        ),
        ("take 7 cubed and subtract 43", ["take 7 cubed", "subtract 43"]),
        ("double 45, subtract 30, and then divide by 6", ["double 45", "subtract 30", "divide by 6"]),
        ("put 45 and 55 together and split it in 4", ["put 45 and 55 together", "split it in 4"]),
        # "what do you get if ..." asks; it is no condition
        (
            "what do you get if you add 2 and 3, then double it?",
            ["what do you get if you add 2 and 3", "double it"],
        ),
        # not sequences: operands, a condition, a single operation, a verb with nothing done before it
        ("what do you get if you take 50, add 25?", ["what do you get if you take 50, add 25?"]),
        ("add 5 and 10 and 15", ["add 5 and 10 and 15"]),
        ("add eleven to the product of four and nine", ["add eleven to the product of four and nine"]),
        ("what is the average of 3, 9 and 12?", ["what is the average of 3, 9 and 12?"]),
        ("add 2 and 3 and 4", ["add 2 and 3 and 4"]),
        ("if it is over 10 then halve it", ["if it is over 10 then halve it"]),
        ("if it is over 10 then halve it, then add 1", ["if it is over 10 then halve it", "add 1"]),
        ("compute (3 + 4) * 5", ["compute (3 + 4) * 5"]),
        ("Then what?", ["Then what?"]),
        (" ; then ", [" ; then "]),  # nothing but markers: one (empty) part, the request as it is
    ],
)
def test_sequenced_parts(request_text: str, parts: list[str]) -> None:
    assert sequenced_parts(request_text) == parts


def test_a_long_chain_keeps_the_rest_in_its_last_part() -> None:
    parts = sequenced_parts("a; b; c; d; e; f")
    assert len(parts) == MAX_PARTS and parts == ["a", "b", "c", "d, e, f"]


def test_part_steps_get_fresh_ids_and_are_linked() -> None:
    steps = part_steps(["add 2 and 3", "double it"], taken={"1", "2", "part1"})
    assert [s.step_id for s in steps] == ["part1a", "part2"]
    assert all(s.agent == "llm" and s.status is StepStatus.PENDING for s in steps)
    assert steps[1].incoming_context == "the result of part 1"
    assert steps[1].handoff_to_next == "its result is the answer"
    assert fresh_id("p", {"p", *(f"p{c}" for c in "abcdefghijklmnopqrstuvwxyz")}) == "p_2"


def _done(step_id: str, result: object, **fields: object) -> PlanStep:
    return PlanStep(step_id=step_id, description="d", status=StepStatus.COMPLETE, result=result, **fields)  # type: ignore[arg-type]


def test_the_context_is_what_the_previous_parts_tool_found() -> None:
    steps = [
        _done(
            "1", {"expression": "20 - 5", "value": 15}, tool="calculator", arguments={"expression": "20 - 5"}
        ),
        _done(
            "part1.1",
            {"expression": "2 + 3", "value": 5},
            tool="calculator",
            arguments={"expression": "2 + 3"},
        ),
        _done("part1.2", "2 + 3 is 5.", agent="llm"),
        PlanStep(step_id="part2", description="multiply the result by 4", agent="llm"),
    ]
    assert part_context(steps, "part1") == "5"  # the tool's new number, not its operands nor step 1's
    divided = [
        _done(
            "part1.1",
            {"expression": "144 / 12", "value": 12},
            tool="calculator",
            arguments={"expression": "144 / 12"},
        )
    ]
    assert part_context(divided, "part1") == "12"  # the value, although 12 is an operand too
    assert part_context(steps, None) is None  # the first part has none
    assert part_context(steps, "part9") is None  # nothing of that part completed
    assert with_context("multiply the result by 4", "5") == "multiply 5 by 4"
    assert with_context("add 2 and 3", None) == "add 2 and 3"


@pytest.mark.parametrize(
    ("part", "context", "text"),
    [
        (
            "add 19 to it",
            "81",
            "add 19 to 81",
        ),  # Gemma 3 270M wrote 19 + 19 for "add 19 to it, where the result is 81"
        ("multiply what is left by 2", "165", "multiply 165 by 2"),
        ("take 10 percent of that", "400", "take 10 percent of 400"),
        ("divided by 5", "75", "75 divided by 5"),
        ("all times 4", "15", "15 all times 4"),
        ("take away 13", "63", "take away 13 from 63"),
        ("subtract 15", "-2.5", "subtract 15 from -2.5"),
        ("add eleven", "4", "add eleven to 4"),
        ("divide by 4", "300", "divide 300 by 4"),
        ("halve it again", "320", "halve 320 again"),
        ("halve", "10", "halve 10"),
        # a part that refers to nothing, or a context that is not one number: the context goes after the part
        ("report the answer nicely", "5, 7", "report the answer nicely, where the result is 5, 7"),
        ("translate it", "bonjour", "translate it, where the result is bonjour"),
        ("what is 3 squared", "12", "what is 3 squared, where the result is 12"),
    ],
)
def test_a_number_found_goes_where_the_part_refers_to_it(part: str, context: str, text: str) -> None:
    assert with_context(part, context) == text


def test_a_part_without_a_tool_hands_on_its_answer() -> None:
    steps = [_done("part1", "Lisbon is the capital of Portugal", agent="llm")]
    assert part_context(steps, "part1") == "Lisbon is the capital of Portugal"
    echoed = [_done("part1.1", {"message": "hi"}, tool="echo", arguments={"message": "hi"})]
    assert part_context(echoed, "part1") == '{"message": "hi"}'  # no new number: the result, as text
    failed = [
        PlanStep(step_id="part1.1", description="d", tool="calculator", status=StepStatus.FAILED, failure="x")
    ]
    assert part_context(failed, "part1") is None


@given(
    st.lists(
        st.sampled_from(
            [
                "add 2",
                "then",
                "and then",
                ";",
                ",",
                "plus 7",
                "if",
                "x",
                "after that",
                "and",
                "double 3",
                "get",
            ]
        ),
        max_size=12,
    )
)
def test_the_split_never_makes_up_text_nor_too_many_parts(words: list[str]) -> None:
    request = " ".join(words) or "x"
    parts = sequenced_parts(request)
    assert 1 <= len(parts) <= MAX_PARTS
    assert all(part.strip() for part in parts)
    said = set(re.findall(r"\w+", request))
    assert all(set(re.findall(r"\w+", part)) <= said for part in parts)


# --- parts a planner proposed (no connective in the request) -------------------------------------------------------


@pytest.mark.parametrize(
    ("request_text", "proposed"),
    [
        # the numbers taken in another order, an earlier result named in words
        ("Take away 4 from the product of 9 and 3", ["multiply 9 and 3", "subtract 4 from the result."]),
        # number words read as the calculator reads them, written in digits or words by the parts
        ("multiply thirty by three and take away eight", ["multiply 30 by 3", "take away eight from it"]),
        ("Halve 50 and add 5", ["halve 50", "add 5 to the result", "report it"]),
    ],
)
def test_proposed_parts_that_state_the_requests_numbers_are_kept(
    request_text: str, proposed: list[str]
) -> None:
    assert proposed_parts(request_text, proposed) == [p.strip(" .") for p in proposed]


@pytest.mark.parametrize(
    "proposed",
    [
        ["multiply 9 and 3", "subtract the result"],  # drops 4
        ["multiply 9 and 3", "subtract 4 from the result", "add 1"],  # adds 1
        ["multiply 9 and 9", "subtract 4 from the result"],  # 9 twice, 3 never
        ["add 6 and 9", "divide the result by 5"],  # a worked example's parts, copied
        ["Take away 4 from the product of 9 and 3", "report the result"],  # the whole request as a part
        ["Take away 4 from the product of 9 and 3"],  # one part
        ["multiply 9", "and 3", "subtract 4", "from the result", "please"],  # more than MAX_PARTS
        ["", "  ", "9 3 4"],  # empty parts are dropped: one part left
    ],
)
def test_proposed_parts_that_do_not_state_the_requests_numbers_are_not_kept(proposed: list[str]) -> None:
    request_text = "Take away 4 from the product of 9 and 3"
    assert proposed_parts(request_text, proposed) == [request_text]


def test_a_request_without_numbers_is_never_split_by_a_proposal() -> None:
    assert proposed_parts("translate cat and then dog", ["translate cat", "translate dog"]) == [
        "translate cat and then dog"
    ]
