"""The example flows on the embedded model (issue 30): does each input end where it should?

    python bench/flow_routes/run.py --label before            # every case; writes results-before.json
    python bench/flow_routes/run.py --flow refund-check       # one flow, printed only
    python bench/flow_routes/run.py --case triage-03          # some cases, printed only

``cases.jsonl`` was written and committed before the agent-node changes it measures, and is not tuned on: 30
inputs for each of ``examples/flows/ticket-triage`` (15 billing, 15 technical tickets), ``review-sentiment`` (15
positive, 15 negative reviews) and ``refund-check`` (15 messages asking for money back, 15 that do not), in my
own words, none using the words of the flows' instructions on purpose. The rules, per case:

- **right**: ticket-triage and refund-check end at the expected exit; review-sentiment's verdict has the expected
  ``sentiment``. A run that fails is wrong.
- also kept: the status, the exit, the output, the loop rounds (refund-check) and seconds per run (the model is
  loaded before the first timing).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from aeon_kernel import Engine  # noqa: E402
from aeon_kernel.config import AeonConfig  # noqa: E402

HERE = Path(__file__).parent
EXAMPLES = ROOT / "examples" / "flows"


def right(case: dict[str, Any], outcome: dict[str, Any]) -> bool:
    expect = case["expect"]
    if "exit" in expect:
        return bool(outcome["exit"] == expect["exit"])
    output = outcome["output"]
    return isinstance(output, dict) and output.get("sentiment") == expect["sentiment"]


def run_flow(name: str, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    config = AeonConfig().with_choice("llm", "llama_cpp").with_choice("memory", "in_memory")
    outcomes = []
    with Engine.from_config_dir(EXAMPLES / name, config) as flow:
        flow.engine.llm  # noqa: B018 - the model loads before the first timing
        for case in cases:
            began = time.perf_counter()
            try:
                result = flow.run(case["input"])
                outcome = {
                    "status": result.status,
                    "exit": result.tasks[0].get("exit") if result.tasks else None,
                    "output": result.output,
                    "rounds": max((r.get("iteration") or 1 for r in result.history), default=1),
                    "message": result.message,
                }
            except Exception as exc:  # a run that raises is a wrong answer, and is kept as such
                outcome = {
                    "status": "error",
                    "exit": None,
                    "output": None,
                    "message": f"{type(exc).__name__}: {exc}",
                }
            outcome["seconds"] = round(time.perf_counter() - began, 2)
            outcome["right"] = right(case, outcome)
            outcomes.append({"id": case["id"], "flow": name, "expect": case["expect"], **outcome})
            mark = "ok " if outcome["right"] else "BAD"
            print(
                f"{mark} {case['id']:<11} exit={outcome['exit']} output={json.dumps(outcome['output'])[:90]}"
            )
    return outcomes


def summary(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    by_flow: dict[str, Any] = {}
    for name in sorted({o["flow"] for o in outcomes}):
        mine = [o for o in outcomes if o["flow"] == name]
        by_flow[name] = {
            "cases": len(mine),
            "right": sum(o["right"] for o in mine),
            "failed": sum(o["status"] in ("failure", "error") for o in mine),
            "median_seconds": statistics.median(o["seconds"] for o in mine),
            "more_than_one_round": sum((o.get("rounds") or 1) > 1 for o in mine),
        }
    return by_flow


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", help="write results-LABEL.json")
    parser.add_argument("--flow", action="append", help="only this flow (repeatable)")
    parser.add_argument("--case", action="append", help="only this case id (repeatable)")
    args = parser.parse_args()
    cases = [json.loads(line) for line in (HERE / "cases.jsonl").read_text().splitlines() if line.strip()]
    if args.flow:
        cases = [c for c in cases if c["flow"] in args.flow]
    if args.case:
        cases = [c for c in cases if c["id"] in args.case]
    outcomes: list[dict[str, Any]] = []
    for name in dict.fromkeys(c["flow"] for c in cases):
        outcomes += run_flow(name, [c for c in cases if c["flow"] == name])
    table = summary(outcomes)
    for name, row in table.items():
        print(
            f"{name:<18} right {row['right']}/{row['cases']}  failed {row['failed']}  "
            f"median {row['median_seconds']} s  rounds>1 {row['more_than_one_round']}"
        )
    if args.label:
        path = HERE / f"results-{args.label}.json"
        path.write_text(json.dumps({"summary": table, "cases": outcomes}, indent=1) + "\n")
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
