"""The calculator's review asked about right and wrong calls, with no model (issue 26, stop 44).

    python bench/verified/review_probes.py            # counts
    python bench/verified/review_probes.py --show     # and each wrong call approved, each right one not

``review-probes.jsonl``: requests in my own wordings (not the frozen set's), each with calls that do what it asks
(``right``) and calls of the kinds Gemma 3 270M writes that do not (``wrong``: operands reversed, the earlier
result left behind, an operation on the wrong operand). The review was changed against them, so they are tuned
on: they show what the review reads, not how often it is right on requests nobody has seen.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from aeon_plugins.calculator import CalculatorTool
from aeon_plugins.calculator.review import review_calls

HERE = Path(__file__).parent


def reviewed(request: str, expressions: list[str]) -> bool | None:
    """True approved, False a finding, None no review (not checked: the result stays unverified)."""
    calculator = CalculatorTool()
    calls = [{"arguments": {"expression": e}, "result": calculator.invoke(expression=e)} for e in expressions]
    found = review_calls(request, calls)
    return None if found is None else found.approved


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--show", action="store_true", help="print each call the review gets wrong")
    args = parser.parse_args()
    counts = {"right": {True: 0, False: 0, None: 0}, "wrong": {True: 0, False: 0, None: 0}}
    for line in (HERE / "review-probes.jsonl").read_text().splitlines():
        case = json.loads(line)
        for kind in ("right", "wrong"):
            for expressions in case[kind]:
                verdict = reviewed(case["request"], expressions)
                counts[kind][verdict] += 1
                if args.show and (verdict is True) == (kind == "wrong"):
                    print(
                        f"{kind} call {'approved' if verdict else 'not approved'}: {case['request']} {expressions}"
                    )
    for kind, by in counts.items():
        total = sum(by.values())
        print(
            f"{kind} calls: {total}; approved {by[True]}, found {by[False]}, not reviewed (None) {by[None]}"
        )


if __name__ == "__main__":
    main()
