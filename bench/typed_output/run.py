"""Typed output on the embedded model (issue 28, part 2): the set in ``cases.jsonl``, scored by its README's rules.

    python bench/typed_output/run.py              # every case; writes bench/typed_output/results.json
    python bench/typed_output/run.py --set cases_b.jsonl   # the second set; writes results_b.json
    python bench/typed_output/run.py --case ID    # one case

Each case runs as ``engine.run(request, output_type=schema)`` on the default configuration (the embedded Gemma 3
270M model, constrained decoding). A case is right when the run completed, its output validates against the
schema and every expected field matches. Repairs are the run's supervisor actions.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from aeon_kernel import AeonError, Engine  # noqa: E402
from aeon_kernel.schemas import schema_errors  # noqa: E402

HERE = Path(__file__).parent


def field(value: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


_MISSING = object()


def same(expected: Any, got: Any) -> bool:
    """The set's rules: strings case-insensitively after stripping, numbers within 1e-6, lists as sets."""
    if isinstance(expected, bool) or isinstance(got, bool):
        return expected is got
    if isinstance(expected, (int, float)) and isinstance(got, (int, float)):
        return math.isclose(expected, got, rel_tol=1e-6)
    if isinstance(expected, str) and isinstance(got, str):
        return expected.strip().casefold() == got.strip().casefold()
    if isinstance(expected, list) and isinstance(got, list):
        return {str(x).strip().casefold() for x in expected} == {str(x).strip().casefold() for x in got}
    return bool(expected == got)


def judge(case: dict[str, Any], result: dict[str, Any]) -> list[str]:
    problems = []
    if result["status"] != "completed":
        problems.append(f"status {result['status']}: {result['message'][:160]}")
    output = result.get("output")
    if output is None:
        return [*problems, "no output"]
    problems += [f"schema: {e}" for e in schema_errors(case["schema"], output)]
    for key, expected in case["expect"].items():
        got = field(output, key)
        if got is _MISSING or not same(expected, got):
            problems.append(f"{key}: expected {expected!r}, got {None if got is _MISSING else got!r}")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", action="append", help="run only this case (repeatable)")
    parser.add_argument(
        "--set", default="cases.jsonl", help="the cases file in this directory (cases_b.jsonl)"
    )
    args = parser.parse_args()
    cases = [json.loads(line) for line in (HERE / args.set).read_text(encoding="utf-8").splitlines() if line]
    if args.case:
        cases = [c for c in cases if c["id"] in args.case]
    rows = []
    with Engine() as engine:
        engine.build_selected()  # the model is loaded before the first timing
        for case in cases:
            started = time.perf_counter()
            try:
                result = engine.run(case["request"], output_type=case["schema"])
            except AeonError as exc:
                result = {"status": "error", "message": f"{type(exc).__name__}: {exc}", "output": None}
            seconds = time.perf_counter() - started
            problems = judge(case, result)
            state = result.get("final_state", {})
            repairs = len(state.get("supervisor_actions", []))
            row = {
                "id": case["id"],
                "right": not problems,
                "status": result["status"],
                "output": result.get("output"),
                "answer": result.get("answer"),
                "repairs": repairs,
                "seconds": round(seconds, 2),
                "problems": problems,
            }
            rows.append(row)
            mark = "OK " if row["right"] else "BAD"
            print(
                f"{mark} {case['id']:24} {result['status']:10} repairs {repairs} {seconds:5.1f}s "
                f"{json.dumps(row['output'])[:70]} {'; '.join(problems)[:120]}",
                flush=True,
            )
    right = sum(r["right"] for r in rows)
    summary = {
        "cases": len(rows),
        "right": right,
        "completed": sum(r["status"] == "completed" for r in rows),
        "completed_but_wrong": sum(r["status"] == "completed" and not r["right"] for r in rows),
        "runs_with_repairs": sum(r["repairs"] > 0 for r in rows),
        "repairs": sum(r["repairs"] for r in rows),
        "seconds_mean": round(sum(r["seconds"] for r in rows) / max(len(rows), 1), 2),
    }
    print(json.dumps(summary, indent=2))
    if not args.case:
        name = Path(args.set).stem.removeprefix("cases")  # cases.jsonl → results.json, cases_b → results_b
        out = f"results{name}.json"
        (HERE / out).write_text(json.dumps({"summary": summary, "cases": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
