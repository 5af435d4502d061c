"""The calculator's review of its calls against the request (issue 26): what it must find, and what it must let
through. The wrong calls below are the kinds Gemma 3 270M writes (issue 26, bench/README.md); the requests are
worded here, not taken from the frozen evaluation set (bench/verified/cases.jsonl)."""

from __future__ import annotations

import pytest

from aeon_plugins.calculator import CalculatorTool
from aeon_plugins.calculator.numbers import request_numbers
from aeon_plugins.calculator.review import review_calls


def review(request: str, *expressions: str, results: tuple[float, ...] = ()) -> tuple[bool, str]:
    calls = [
        {"arguments": {"expression": e}, **({"result": {"value": results[i]}} if i < len(results) else {})}
        for i, e in enumerate(expressions)
    ]
    found = review_calls(request, calls)
    return found.approved, " ".join(found.findings)


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("what is seventeen plus twenty-six?", [17, 26]),
        ("one hundred and five apples", [105]),
        ("add eight and nine", [8, 9]),  # "and" joins a number only after a scale word
        ("twenty and three hundred and two", [20, 302]),
        ("two thousand three hundred", [2300]),
        ("add 1,250 and 3.5", [1250, 3.5]),
        ("ninety nine bottles", [99]),
        ("which one of them is bigger, 4 or 9?", [4, 9]),  # "one of them" is no number
        ("give each one 3 more", [3]),  # nor "each one"
        ("one fifth of 45", [45]),  # "one fifth" is a share, read with its word
        ("2 raised to the 8th power", [2, 8]),  # an ordinal before "power" is the exponent
        ("on the 5th of May I bought 3", [3]),  # elsewhere an ordinal is no operand
    ],
)
def test_numbers_are_read_in_digits_and_in_words(text: str, values: list[float]) -> None:
    assert [value for _, value, _ in request_numbers(text)] == values


@pytest.mark.parametrize(
    ("request_text", "expressions", "finding"),
    [
        ("add 11 and 4, then multiply the result by 3", ["(11 + 4) / 3"], "asks to multiply"),
        ("add 10 and 20 and then halve it", ["10 + 20"], "asks to halve"),
        ("subtract 4 from 10, then multiply by 3", ["10 - 4 * 3"], "in another order"),
        ("add 4 and 5, then multiply the result by 3", ["(4 * 3) + 5"], "in another order"),
        ("what is nine squared?", ["9 * 2"], "asks to raise to a power"),
        ("what is the square of 12?", ["12 ^ 12"], "power of itself"),
        ("double 21", ["21 * 21"], "asks to double or triple"),
        ("square eleven, then subtract twenty", ["11 ^ 2 - 22"], "uses 22"),
        ("multiply forty by three", ["4 * 3"], "states 40"),
        ("compute (6 + 2) * 5", ["6 + 2 * 5"], "which is 40"),
        ("what is 15% of 200?", ["200 * 15 / 20"], "uses 20"),
        ("add 2 and 3. Multiply that by 4. Subtract 1.", ["(2 + 3) * 4"], "asks to subtract"),
        # two steps with no word for their order: one multiplication cannot do both (the answer 12 is wrong)
        ("multiply 3 by 4 and double it", ["3 * 4"], "asks for 2 operations"),
        ("What's 5 times 6, doubled?", ["5 * 6"], "asks to multiply, then double"),
        ("she gave away 8 of her 40 stickers", ["40 * 8"], "asks to subtract"),
        # a percentage used as the whole number: "lower 80 by 25%" is not 80 * 25
        ("lower 80 by 25%, then add 5", ["80 * 25", "2000 + 5"], "never taken as a percentage"),
        # an operation named with its operands must combine exactly those ("the difference" names no result here)
        ("how big is the difference between 90 and 24?", ["90 + 24"], "difference of 90 and 24"),
        ("add 2 to the product of nine and five", ["2 * 9 + 5"], "product of 9 and 5"),
        ("the sum of 8 and 12, halved", ["8 + 12 / 2"], "sum of 8 and 12"),
        ("what is the mean of 2, 4 and 9?", ["2 + 4 + 9 / 3"], "mean of 2, 4 and 9"),
        ("give me the quotient of 96 and 8", ["8 / 96"], "quotient of 96 and 8"),
        ("what is the remainder when 17 is divided by 5?", ["17 / 5"], "asks to take the remainder"),
        # a subtraction, a division or a power the wrong way round (the model's "operands reversed")
        ("subtract 4 from 10", ["4 - 10"], "other way round (4 - 10)"),
        ("what is 20 minus 7?", ["7 - 20"], "asks for 20 - 7"),
        ("how much is 9 less than 30?", ["9 - 30"], "asks for 30 - 9"),
        ("take seven away from twenty", ["7 - 20"], "asks for 20 - 7"),
        ("divide 10 by 4", ["4 / 10"], "asks for 10 / 4"),
        ("what is 30 divided by 5?", ["5 / 30"], "asks for 30 / 5"),
        ("how many 4s go into 36?", ["4 / 36"], "asks for 36 / 4"),
        ("what is 2 to the power of 5?", ["5 ^ 2"], "asks for 2 ^ 5"),
        ("split 90 dollars equally among 3 friends", ["3 / 90"], "asks for 90 / 3"),
        ("reduce 80 by 15", ["15 - 80"], "asks for 80 - 15"),
        # an operation named with its operands, or a scaling, done by another operation
        ("increase 50 by 20", ["50 * 20"], "asks to increase 50 by 20"),
        ("halve 90", ["90 * 2"], "asks to halve"),
        ("what is the square root of 49?", ["49 ^ 2"], "asks to take the square root"),
        (
            "subtract twelve from one hundred and five, then halve it",
            ["12 - 105", "-93 / 2"],
            "asks for 105 - 12",
        ),
        ("what is 6 to the third power?", ["6 * 3"], "asks to raise to a power"),
        # "add A and B", "multiply A by B": the verb's own numbers, whatever else the chain holds
        ("add 2 and 3 and multiply by 4", ["2 + 3 * 4"], "asks to add 2 and 3"),
        ("sum 2, 4 and 6 then divide by 3", ["2 + 4 + 6 / 3"], "asks to add 2, 4 and 6"),
        ("multiply 7 by 6 and subtract 2", ["7 * (6 - 2)"], "asks to multiply 7 and 6"),
        # an operation named with its operands is itself an operand, which way round
        ("take 4 away from the product of 7 and 6", ["4 - 7 * 6"], "asks for 42 - 4"),
        ("subtract the sum of 3 and 4 from 20", ["(3 + 4) - 20"], "asks for 20 - 7"),
        ("divide the sum of 10 and 20 by 5", ["5 / (10 + 20)"], "asks for 30 / 5"),
        ("from 100 subtract 45", ["45 - 100"], "asks for 100 - 45"),
        ("30 take away 8", ["8 - 30"], "asks for 30 - 8"),
        ("deduct 7 from 25", ["7 - 25"], "asks for 25 - 7"),
        ("what is 40 shared between 8 people?", ["8 / 40"], "asks for 40 / 8"),
        # an operation on an earlier result: the result is the left operand
        ("multiply 8 by 5 and then subtract 12", ["8 * 5", "12 - 40"], "asks for the result - 12"),
        ("take the sum of 6 and 9, then divide it by 5", ["6 + 9", "5 / 15"], "asks for the result / 5"),
        # a spoken chain is worked out as it is said, in one call or over several
        ("what is 100 minus 30 minus 20?", ["100 - (30 - 20)"], "100 - 30 - 20, which is 50"),
        ("what is 100 minus 30 minus 20?", ["30 - 20", "100 - 10"], "which is 50"),
        ("what is 10 minus 2 plus 3?", ["10 - (2 + 3)"], "which is 11"),
        ("what is 7 times 8 minus 6?", ["7 * (8 - 6)"], "which is 50"),
        ("what is 12 divided by 4 times 3?", ["12 / (4 * 3)"], "which is 9"),
        ("what is 6 times 7 plus 8 times 2?", ["6 * (7 + 8) * 2"], "which is 58"),
        # each number reaches the answer; what does not reach it does not count ("the previous result ignored")
        ("add 11 and 4, then multiply the result by 3", ["11 + 4", "11 * 3"], "4 never reaches the answer"),
        ("subtract 6 from 20, then halve it", ["20 - 6", "20 / 2"], "6 never reaches the answer"),
        ("what is 45 divided by 9, plus 7?", ["45 / 9", "9 + 7"], "45 never reaches the answer"),
        ("double 13 and then add 4", ["13 * 2", "13 + 4"], "asks to double or triple"),
        # a power, a percentage off or on, a scaling: of the number the request gives it
        ("what is 12 squared minus 4?", ["12 ^ (2 - 4)"], "asks for 12 squared"),
        ("what is 30% off 80?", ["80 * 0.3"], "take 30% off"),
        ("a shirt costs 40 dollars. It is 25% off. What do I pay?", ["40 * 0.25"], "multiplication by 0.75"),
        ("what is 3 more than twice 8?", ["(3 + 8) * 2"], "asks for twice 8"),
        ("what is 10 more than 3 times 4?", ["(10 + 3) * 4"], "10 + 3 * 4, which is 22"),
        # ", times 2" / ", squared" apply to what comes before the comma
        ("what is 7 plus 8, times 2?", ["7 + 8 * 2"], "in another order"),
        ("what is 81 divided by 9, squared?", ["81 / 9 ^ 2"], "in another order"),
        # an operation worded with its operands is done on them
        ("Divide 144 by 12 and add 8", ["144 / (12 + 8)"], "asks for 144 / 12; no calculation does that"),
        # a number the words imply, used more often than they imply it: one "half", two 2s
        (
            "What is half of 64, plus 10?",
            ["64 / 2 + 10 * 2"],
            "uses 2 twice; the request's words imply it once",
        ),
        (
            "Take 9, multiply it by 4 and subtract 6",
            ["9 * (4 - 6)"],
            "asks for the result - 6; no calculation",
        ),
        (
            "Lisa has 3 boxes of 24 crayons. She gives 10 away. How many are left?",
            ["3 * 24 + 10"],
            "subtract",
        ),
        # more wordings that say which way round (stop 44)
        ("What does 3 go into 27?", ["3 / 27"], "the other way round"),
        (
            "Five friends split a 95 dollar bill evenly. How much does each pay?",
            ["5 / 95"],
            "other way round",
        ),
        ("Split 72 into 8 equal parts", ["8 / 72"], "the other way round"),
        ("what is 90 over 6", ["6 / 90"], "the other way round"),
        ("By how much does 81 exceed 29?", ["29 - 81"], "the other way round"),
        ("Take 15 off 60", ["15 - 60"], "the other way round"),
        ("Work out 13 times 7, then knock off 41.", ["41 - 13 * 7"], "the other way round"),
        ("Work out 13 times 7, then knock off 41.", ["13 * (7 - 41)"], "the result - 41; no calculation"),
        ("Cube 4 and take 14 off", ["14 - 4 ^ 3"], "the other way round"),
        # an earlier result named in words: "what remains", "it", "of it"
        ("Take 60, take away 15, then divide what remains by 5.", ["5 / (60 - 15)"], "the other way round"),
        ("Add 25 and 35 and split it into 6 equal parts.", ["25 + 35 / 6"], "the result / 6; no calculation"),
        (
            "Twelve people each give 5 dollars and we spend 18 of it. How much is left?",
            ["12 * (5 - 18)"],
            "the result - 18; no calculation",
        ),
        # ", plus 20" adds to what comes before the comma
        ("What's 10 percent of 400, plus 15?", ["400 * (10 + 15) / 100"], "the result + 15; no calculation"),
        # a difference is the larger less the smaller
        (
            "Multiply the sum of 3 and 7 by the difference of 8 and 2.",
            ["(3 + 7) * (2 - 8)"],
            "the difference of 8 and 2",
        ),
        # a share named in words is taken
        ("What is three quarters of 60?", ["3 * 60"], "takes that share"),
        ("Add 10, 15 and 25, then take a fifth of it.", ["(10 + 15 + 25) * 5"], "takes that share"),
        ("Seven more than a third of 24", ["(24 + 7) / 3"], "a third of 24; no calculation scales it"),
        ("Take 80 to the 2nd power", ["2 ^ 80"], "the other way round"),
        ("What is 12 less than 5 times 6?", ["12 - 5 * 6"], "the other way round"),
        ("What is 12 less than 5 times 6?", ["5 * (6 - 12)"], "asks for 30 - 12; no calculation"),
        ("What's the remainder of 61 divided by 8?", ["8 % 61"], "the other way round"),
        ("Subtract 9 from 40, then subtract 6 from that.", ["6 - (40 - 9)"], "the other way round"),
        ("Divide 63 among 9 kids, then give each one 2 more.", ["9 / 63 + 2"], "the other way round"),
        ("Divide 63 among 9 kids, then give each one 2 more.", ["63 / (9 + 2)"], "the result + 2; no"),
        ("What is 3 raised to the 4th power, divided by 9?", ["9 / 3 ^ 4"], "the other way round"),
        ("Multiply 4 by itself and add 2.", ["4 * (4 + 2)"], "the result + 2; no calculation"),
        ("Double 9 then double it again", ["9 * 2"], "double or triple, then double or triple"),
        ("What's 150 split evenly across 10 boxes?", ["10 / 150"], "the other way round"),
        ("From 400, take off 25 percent.", ["400 * 0.25"], "take 25% off"),
        # a number named with what is done to it is one operand: "9 squared", "15 percent of 200"
        ("What's 8 squared minus 5 squared?", ["5 ^ 2 - 8 ^ 2"], "the other way round"),
        ("What's 300 minus 20 percent of 300?", ["(300 - 20) * 0.2"], "asks for 300 - 60; no calculation"),
        ("Twenty percent of 150, then minus 6", ["150 * (20 - 6) / 100"], "the result - 6; no calculation"),
        # the earlier result second: "subtract it from 100"
        ("Take 20 percent of 60 and subtract it from 50.", ["(50 - 60) * 0.2"], "50 - the result; no"),
        ("Take 20 percent of 60 and subtract it from 50.", ["60 * 0.2 - 50"], "the other way round"),
        ("How much more is 70 than 45?", ["45 - 70"], "the other way round"),
        ("How many times bigger is 56 than 8?", ["8 / 56"], "the other way round"),
        ("What is 9 taken from 40?", ["9 - 40"], "the other way round"),
        # a stated number used again, with an operation copied from a worked example's longer chain
        (
            "add four and nine, then double the result",
            ["(4 + 9) * 2 + 2"],
            "uses 2 twice; the request's words",
        ),
        (
            "Sum 6 and 8, then multiply the total by four",
            ["(6 + 8) * 4 + 4"],
            "uses 4 twice; the request states",
        ),
        ("Take 10 from 25 and divide what is left by 5", ["(25 - 10) / 5 - 5"], "uses 5 twice"),
        # a percentage is taken once; only what it is taken of may come back
        ("What is 10 percent of 80 added to 80?", ["80 * 10 / 100 + 10"], "uses 10 twice"),
        # an amount taken off a price is subtracted from what the rest comes to
        (
            "A ticket costs 15 dollars. What do 4 tickets cost with a 10 dollar discount?",
            ["4 * 10 - 15"],
            "asks for the result - 10; no calculation",
        ),
        (
            "What do 3 shirts at 20 euros cost with a discount of 12 euros?",
            ["3 * 12 - 20"],
            "asks for the result - 12; no calculation",
        ),
        ("Shoes cost $80 and I have a $15 coupon. What do I pay?", ["15 - 80"], "the other way round"),
        # a calculation written in brackets is worked out as written
        ("what is 10 divided by (5 - 5)?", ["(10 - 5) / 5"], "writes '(5 - 5)'; no calculation works"),
        (
            "what is 10 divided by (5 - 5)?",
            ["(5 - 5) / 10"],
            "asks for 10 / 0; the calculation does it the other",
        ),
        # a percentage is taken as one: divided by 100 or multiplied by 0.01, not any use of 100
        ("Increase 60 by 20 percent", ["60 + 20 * 100"], "20% is never taken as a percentage"),
    ],
)
def test_a_call_that_does_not_do_what_the_request_says_is_found_out(
    request_text: str, expressions: list[str], finding: str
) -> None:
    approved, findings = review(request_text, *expressions)
    assert not approved
    assert finding in findings


@pytest.mark.parametrize(
    ("request_text", "expressions"),
    [
        ("add 11 and 4, then multiply the result by 3", ["(11 + 4) * 3"]),
        ("what is seventeen plus twenty-six?", ["17 + 26"]),
        ("what is nine squared?", ["9 ^ 2"]),
        ("what is nine squared?", ["9 * 9"]),  # a square as a product
        ("what is 9 times 9?", ["9 * 9"]),  # and a product of a number with itself
        # a call written before an earlier one ran: its value is worked out (arithmetic is pure)
        ("add 2 and 3, then multiply the result by 4", ["2 + 3", "5 * 4"]),
        ("what is 5 cubed?", ["5 ** 3"]),
        ("double 21", ["21 * 2"]),
        ("double 21", ["21 + 21"]),
        ("what is 15% of 200?", ["200 * 15 / 100"]),
        ("what is 15% of 200?", ["0.15 * 200"]),
        ("raise 40 by 10 percent", ["40 * 1.1"]),
        ("a coat costs 120 and is discounted by 25%", ["120 * 0.75"]),
        ("what is the average of 3, 9 and 12?", ["(3 + 9 + 12) / 3"]),
        ("I have 30 pears and eat a third of them. How many are left?", ["30 - 30 / 3"]),
        ("compute (6 + 2) * 5", ["(6 + 2) * 5"]),
        ("what is the square root of 81?", ["81 ** 0.5"]),
        ("what is 10 divided by (5 - 5)?", ["10 / (5 - 5)"]),
        # step by step: a later call uses an earlier call's result
        ("add 2 and 3. Multiply that by 4. Subtract 1.", ["2 + 3", "5 * 4", "20 - 1"]),
        # "the total" named the sum before it: not a second addition, after the division
        ("add 8, 6 and 2, then divide the total by 4", ["(8 + 6 + 2) / 4"]),
        # each step done by an operation of its own, in one call or in several
        ("multiply 3 by 4 and double it", ["3 * 4 * 2"]),
        ("multiply 3 by 4 and double it", ["3 * 4", "12 * 2"]),
        ("double 6 and add 1", ["1 + 6 + 6"]),  # no order word: any order
        ("add 5 to 10 and tell me the sum", ["5 + 10"]),  # two words for one addition
        ("she gave away 8 of her 40 stickers", ["40 - 8"]),
        ("lower 80 by 25%, then add 5", ["80 * 0.75", "60 + 5"]),
        ("what is 25 percent of 80?", ["80 * 25 / 100"]),
        ("how big is the difference between 90 and 24?", ["90 - 24"]),
        ("how big is the difference between 24 and 90?", ["90 - 24"]),  # either way round
        ("add 2 to the product of nine and five", ["2 + 9 * 5"]),
        ("add 2 to the product of nine and five", ["9 * 5", "45 + 2"]),
        ("the sum of 8 and 12, halved", ["(8 + 12) / 2"]),
        ("what is the sum of 3, 4, and 5?", ["5 + 4 + 3"]),
        ("give me the quotient of 96 and 8", ["96 / 8"]),
        ("what is the remainder when 17 is divided by 5?", ["17 % 5"]),
        ("how many 4s go into 36?", ["36 / 4"]),
        ("how many times does 6 go into 42?", ["42 / 6"]),  # "how many times" counts, it does not multiply
        # the operands the right way round, whichever way the request names them
        ("subtract 4 from 10", ["10 - 4"]),
        ("how much is 9 less than 30?", ["30 - 9"]),
        ("take seven away from twenty", ["20 - 7"]),
        ("what is 2 plus 20 minus 7?", ["2 + 20 - 7"]),  # 20 - 7 is not a node of its own here
        ("what is 2 to the power of 5?", ["2 ^ 5"]),
        ("split 90 dollars equally among 3 friends", ["90 / 3"]),
        ("increase 50 by 20", ["50 + 20"]),
        ("increase 50 by 20%", ["50 * 1.2"]),  # a percentage: a share, not an addend
        ("reduce 80 by 15", ["80 - 15"]),
        ("halve 90", ["90 / 2"]),
        ("what is half of 58?", ["58 * 0.5"]),
        ("what is the square root of 49?", ["49 ** 0.5"]),
        ("the product of 4 and 25 percent", ["4 * 0.25"]),  # a percentage is a share, not an operand
        ("what is 6 to the third power?", ["6 ^ 3"]),  # an ordinal, not "a third"
        ("add 2 and 3 and multiply by 4", ["(2 + 3) * 4"]),
        # the calculator runs \u00d7 as *, and its review reads it so
        ("add 2 and 3 and multiply by 4", ["(2 + 3) \u00d7 4"]),
        ("sum 2, 4 and 6 then divide by 3", ["(2 + 4 + 6) / 3"]),
        ("multiply 7 by 6 and subtract 2", ["7 * 6 - 2"]),
        ("add 9 to 41", ["41 + 9"]),
        ("raise 3 to the fourth power", ["3 ** 4"]),
        ("take 4 away from the product of 7 and 6", ["7 * 6 - 4"]),
        ("take 4 away from the product of 7 and 6", ["7 * 6", "42 - 4"]),
        ("subtract the sum of 3 and 4 from 20", ["20 - (3 + 4)"]),
        ("from 100 subtract 45", ["100 - 45"]),
        ("multiply 8 by 5 and then subtract 12", ["8 * 5", "40 - 12"]),
        ("take the sum of 6 and 9, then divide it by 5", ["(6 + 9) / 5"]),
        ("what is 100 minus 30 minus 20?", ["100 - 30 - 20"]),
        ("what is 100 minus 30 minus 20?", ["100 - 30", "70 - 20"]),
        ("what is 7 times 8 minus 6?", ["7 * 8 - 6"]),
        ("what is 12 divided by 4 times 3?", ["12 / 4 * 3"]),
        ("add 11 and 4, then multiply the result by 3", ["11 + 4", "15 * 3"]),
        # 5 is stated and is the first result: the second call builds on it
        ("add 2 and 3, then multiply the result by 5", ["2 + 3", "5 * 5"]),
        ("what is 12 squared minus 4?", ["12 * 12 - 4"]),
        ("what is 5 cubed?", ["5 ** 3"]),
        ("what is 30% off 80?", ["80 - 80 * 30 / 100"]),
        ("what is 30% off 80?", ["80 * 0.7"]),
        ("reduce 200 by 15%, then add 10", ["200 * 0.85", "170 + 10"]),
        ("what is 3 more than twice 8?", ["8 * 2", "16 + 3"]),
        ("what is 3 more than twice 8?", ["8 + 8 + 3"]),
        ("what is 10 more than 3 times 4?", ["10 + 3 * 4"]),
        ("what is 7 plus 8, times 2?", ["7 + 8", "15 * 2"]),
        ("what is 81 divided by 9, squared?", ["(81 / 9) ^ 2"]),
        ("Divide 144 by 12 and add 8", ["144 / 12 + 8"]),
        ("Divide 144 by 12 and add 8", ["144 / 12", "12 + 8"]),
        ("Take 9, multiply it by 4 and subtract 6", ["9 * 4", "36 - 6"]),
        ("take 20 and subtract 5", ["20 - 5"]),
        ("what is 5 squared plus 3 squared?", ["5 ^ 2 + 3 ^ 2"]),  # two words, two 2s
        (
            "how many seconds are in 2 hours, doubled?",
            ["2 * 60 * 60 * 2"],
        ),  # no operation before: 20 is what the 5 comes off
        ("half of 250 minus 25", ["250 / 2 - 25"]),  # the pair after "half of" is no operation of its own
        ("I earn 15 dollars an hour for 8 hours and spend 30. How much do I keep?", ["15 * 8 - 30"]),
        ("My salary of 3000 rises by 10%. What is it now?", ["3000 + 3000 * 0.1"]),
        ("share 48 sweets between 6 children", ["48 / 6"]),
        ("I have 120 marbles and lose a quarter of them. How many are left?", ["120 * 0.75"]),
        ("I had 50 dollars, spent 12 and then 8. How much is left?", ["50 - 12", "38 - 8"]),
        ("What does 3 go into 27?", ["27 / 3"]),
        ("Five friends split a 95 dollar bill evenly. How much does each pay?", ["95 / 5"]),
        ("Split 72 into 8 equal parts", ["72 / 8"]),
        ("what is 90 over 6", ["90 / 6"]),
        ("sixty over twelve", ["60 / 12"]),
        ("By how much does 81 exceed 29?", ["81 - 29"]),
        ("Take 15 off 60", ["60 - 15"]),
        ("Work out 13 times 7, then knock off 41.", ["13 * 7 - 41"]),
        ("Cube 4 and take 14 off", ["4 ^ 3 - 14"]),
        ("Take 60, take away 15, then divide what remains by 5.", ["(60 - 15) / 5"]),
        ("Add 25 and 35 and split it into 6 equal parts.", ["25 + 35", "60 / 6"]),
        ("What's 10 percent of 400, plus 15?", ["400 * 10 / 100 + 15"]),
        ("What's 3 times 4, plus 2?", ["2 + 3 * 4"]),
        ("Multiply the sum of 3 and 7 by the difference of 8 and 2.", ["(3 + 7) * (8 - 2)"]),
        ("What is the difference between 37 and 100?", ["100 - 37"]),
        ("Reduce 10 by 15", ["10 - 15"]),  # "reduce A by B" is A - B, whichever is larger
        ("What is three quarters of 60?", ["60 * 3 / 4"]),
        ("Start from 1000. Divide it by 8, then add 25.", ["1000 / 8", "125 + 25"]),
        ("Find 18 times 3 and then take 20 from it.", ["18 * 3", "54 - 20"]),
        ("How many 6s are there in 54?", ["54 / 6"]),
        ("What is 6 fewer than 30?", ["30 - 6"]),
        ("What is 12 less than 5 times 6?", ["5 * 6 - 12"]),
        ("Divide 63 among 9 kids, then give each one 2 more.", ["63 / 9 + 2"]),
        ("What is 3 raised to the 4th power, divided by 9?", ["3 ^ 4 / 9"]),
        ("Multiply 4 by itself and add 2.", ["4 * 4 + 2"]),
        ("Double 9 then double it again", ["9 * 2 * 2"]),
        ("From 400, take off 25 percent.", ["400 * 0.75"]),
        ("one fifth of 45", ["45 / 5"]),
        ("Seven more than a third of 24", ["24 / 3 + 7"]),
        ("I lose a quarter of 48 apples. How many are left?", ["48 * 0.75"]),
        ("What's 8 squared minus 5 squared?", ["8 ^ 2 - 5 ^ 2"]),
        ("What's 300 minus 20 percent of 300?", ["300 - 300 * 0.2"]),
        ("Twenty percent of 150, then minus 6", ["150 * 20 / 100 - 6"]),
        ("What is the average of 14, 16 and 24, plus 2?", ["(14 + 16 + 24) / 3 + 2"]),
        ("Take 3 from 10, then multiply by 7.", ["(10 - 3) * 7"]),  # 10 - 3 is 7 too
        ("Take 20 percent of 60 and subtract it from 50.", ["50 - 60 * 0.2"]),
        ("Take 9 and subtract it from 20.", ["20 - 9"]),  # "it" is 9 itself: no calculation before
        ("How much more is 70 than 45?", ["70 - 45"]),
        ("How many times bigger is 56 than 8?", ["56 / 8"]),
        ("What is 9 taken from 40?", ["40 - 9"]),
        # a number may come back where the words take it again: a power's base, "by itself", a percentage change
        ("Cube 4, then add 1.", ["4 * 4 * 4 + 1"]),
        ("Square 6 and take 11 off.", ["6 * 6 - 11"]),
        ("Multiply 3 by itself and add 1.", ["3 * 3 + 1"]),
        ("Increase 60 by 15%.", ["60 + 60 * 15 / 100"]),
        ("What is 5 plus 5?", ["5 + 5"]),  # stated twice
        ("Add 2 and 3, then multiply by 5.", ["2 + 3", "5 * 5"]),  # the second 5 is the first call's result
        ("What is 10 percent of 80 added to 80?", ["80 * 10 / 100 + 80"]),
        ("Divide 12 by (2 + 4)", ["12 / (4 + 2)"]),
        ("what is 15% of 200?", ["200 * 0.01 * 15"]),
        ("Increase 60 by 20 percent", ["60 + 60 * 20 / 100"]),
        ("Divide 81 by 9 and multiply the quotient by 7.", ["81 / 9 * 7"]),  # "the quotient": a result's name
        ("A ticket costs 15 dollars. What do 4 tickets cost with a 10 dollar discount?", ["15 * 4 - 10"]),
    ],
)
def test_a_call_that_does_what_the_request_says_is_approved(
    request_text: str, expressions: list[str]
) -> None:
    results = tuple(
        float(CalculatorTool().invoke(expression=e)["value"]) for e in expressions if "(5 - 5)" not in e
    )
    approved, findings = review(request_text, *expressions, results=results)
    assert approved, findings


def test_a_request_that_asks_for_no_calculation_is_unrelated() -> None:
    for request_text in ("translate 'cat' into French", "who won the cup in 2014?", "book a table for two"):
        found = review_calls(request_text, [{"arguments": {"expression": "2014 - 1"}}])
        assert found.unrelated and not found.approved, request_text


@pytest.mark.parametrize(
    ("request_text", "expressions"),
    [
        ("Each box holds 12 eggs. How many eggs are in 7 boxes?", ["12 * 7"]),
        ("Each box holds 12 eggs. How many eggs are in 7 boxes?", ["12 + 7"]),
        ("how many minutes are in 3 hours and 15 minutes?", ["3 * 60 + 15"]),
        ("how many seconds are in 4 hours?", ["4 * 3600"]),
        ("how many seconds are in 4 hours?", ["4 / 3600"]),
        # an operation that no word of the request accounts for: the 8 was spent, not earned
        ("I had 50 dollars, spent 12 and then 8. How much is left?", ["50 - 12 + 8"]),
        ("what is 6 times 7?", ["6 * 7 + 1"]),
        ("what is 100 minus 30 minus 20?", ["100 - (30 + 20)"]),  # right, but the + is no word of it
    ],
)
def test_an_operation_the_request_does_not_name_cannot_be_checked(
    request_text: str, expressions: list[str]
) -> None:
    """Right or wrong, a call applying an operation no word of the request names is not approved: which operation
    the request means is not something the review can read, so the result stays unverified (not verified)."""
    assert review_calls(request_text, [{"arguments": {"expression": e}} for e in expressions]) is None


def test_an_expression_the_calculator_cannot_read_is_a_finding() -> None:
    approved, findings = review("add 2 and 2", "two plus two")
    assert not approved and "not an expression the calculator can read" in findings


def _follow_up(message: str, *earlier: tuple[str, float]) -> str:
    from aeon_kernel.kit import ASKED_HEAD, GIVEN_HEAD, given_line

    lines = [
        given_line(asked, f"it is {value}", {"expression": "?", "value": value}) for asked, value in earlier
    ]
    return GIVEN_HEAD + "\n".join(lines) + ASKED_HEAD + message


@pytest.mark.parametrize(
    ("message", "expression", "approved"),
    [
        ("split that among 3 people", "70 / 3", False),  # the question's number, not the answer
        ("split that among 3 people", "35 / 3", True),
        ("subtract 5 from the result", "35 - 5", True),
        ("subtract 5 from the result", "30 - 5", False),
        ("and minus 5", "35 - 5", True),  # an operation with one number continues from the last result
        ("and minus 5", "70 - 5", False),
        ("double the previous answer", "(70 / 2) * 2", True),  # worked out again, on the way
        # "the total", "the sum" name the earlier result: no operation of their own ("the sum of" is one)
        ("divide the total by 5", "35 / 5", True),
        ("multiply the sum by 2", "35 * 2", True),
        ("multiply the sum by 2", "30 * 2", False),
        ("what is 8 plus 9?", "8 + 9", True),  # a question of its own needs no earlier result
    ],
)
def test_a_follow_up_in_a_conversation_must_build_on_an_earlier_result(
    message: str, expression: str, approved: bool
) -> None:
    request = _follow_up(message, ("what is half of 70?", 35))
    review = review_calls(request, [{"arguments": {"expression": expression}}])
    assert review.approved is approved, review.findings
    if not approved:
        assert "builds on an earlier result (35)" in " ".join(review.findings)


def test_the_earlier_numbers_are_known_values_not_demands() -> None:
    request = _follow_up("add 1 to it", ("what is 4 times 6?", 24))
    assert review_calls(request, [{"arguments": {"expression": "24 + 1"}}]).approved  # 4 and 6 need no use


@pytest.mark.parametrize(
    ("request_text", "expression", "approved"),
    [
        ("halve that", "1 * 2", False),  # nothing says what "that" is
        ("take the result and add 4", "4 + 4", False),
        ("halve 30", "30 / 2", True),
        ("what is it: 6 plus 7?", "6 + 7", True),  # a pointing word, but the request has its numbers
    ],
)
def test_a_request_that_points_at_a_result_nobody_gave_cannot_be_checked(
    request_text: str, expression: str, approved: bool
) -> None:
    review = review_calls(request_text, [{"arguments": {"expression": expression}}])
    assert review.approved is approved, review.findings
    if not approved:
        assert "an earlier result that it does not give" in " ".join(review.findings)


def test_a_follow_up_must_do_something_to_the_earlier_result() -> None:
    request = _follow_up("take a third of it", ("what is 30 times 3?", 90))
    again = review_calls(request, [{"arguments": {"expression": "30 * 3"}}])
    assert not again.approved and "only works out the earlier result (90) again" in " ".join(again.findings)
    assert review_calls(request, [{"arguments": {"expression": "(30 * 3) / 3"}}]).approved


@pytest.mark.parametrize(
    ("request_text", "claimed"),
    [
        ("add 17 and 26", True),
        ("what is seventeen plus twenty-six?", True),
        ("what is twice 19?", True),
        ("A train travels 60 km per hour for 3 hours, then 40 km more. How far did it go?", True),
        ("What is the capital of France?", False),
        ("Write a haiku about 3 cats", False),
        ("Who won the World Cup in 2014 and 2018?", False),
        ("Book me a flight for 2 adults on the 5th of May", False),
    ],
)
def test_no_call_to_a_request_that_is_a_calculation_is_a_finding(request_text: str, claimed: bool) -> None:
    """Asked about a plan that calls no tool: a calculation left to the model is a finding, anything else is not
    the calculator's business."""
    found = review_calls(request_text, [])
    assert not found.approved and found.unrelated is not claimed
    assert ("no step calls the calculator" in " ".join(found.findings)) is claimed


def test_a_division_no_wording_orders_is_approved_only_the_way_round_that_keeps_it_at_least_one() -> None:
    """ "The ratio of 45 to 5" names a division but no wording says which way round: ``45 / 5`` is approved, and
    ``5 / 45`` is not (None: the order was not checked, so the result stays unverified)."""
    request_text = "What is the ratio of 45 to 5?"
    assert review_calls(request_text, [{"arguments": {"expression": "45 / 5"}}]).approved
    assert review_calls(request_text, [{"arguments": {"expression": "5 / 45"}}]) is None
    # 60 is stated, and implied by "hours" too: that is no evidence that 60 is the divisor
    speed = "A 60 km trip takes 1.5 hours. What is the average speed?"
    assert review_calls(speed, [{"arguments": {"expression": "1.5 / 60"}}]) is None
