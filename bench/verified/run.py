"""Verified results on the embedded model (issue 26): the frozen set in ``cases.jsonl``, single- and multi-pass.

    python bench/verified/run.py --label before                 # both modes; writes results-before.json
    python bench/verified/run.py --label after --modes single   # one mode
    python bench/verified/run.py --case m01 --case s05          # some cases, printed only
    python bench/verified/run.py --label drafts-off --draft-tokens 0 --prefix-cache 4   # [llm] options
    python bench/verified/run.py --label samples-2 --samples 2   # [planner] samples: self-consistency
    python bench/verified/run.py --cases dev-cases.jsonl --label dev   # a development set (tuned on: no measure)

``cases.jsonl`` was written and committed before the code it measures changed, and is not tuned on: 36
multi-step requests (two to four operations, number words, many ways of chaining and of referring to an earlier
result), 18 simple ones and 12 that no tool can answer. The rules, per case:

- **right**: for a number, the run's final answer states it as the last number it states and states no number
  that neither the request nor a tool call supports; for a text, the answer contains it; for a request no tool
  can answer, no tool was called.
- **reported as verified**: the run's ``verification["verdict"]`` is ``"verified"``. A head without verification
  records (before issue 26) claims what its status claims, so there ``completed`` counts as verified.
- model calls and wall time per request (the model is loaded before the first timing).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from aeon_kernel import AeonError, Engine  # noqa: E402
from aeon_kernel.config import AeonConfig  # noqa: E402
from aeon_plugins.planning.grounding import facts_in, signed_numbers, unsupported_numbers  # noqa: E402

HERE = Path(__file__).parent


def answer_text(result: dict[str, Any]) -> str:
    answer = result.get("answer")
    if answer is None:
        return ""
    return answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)


def calls_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    return list((result.get("final_state") or {}).get("tool_history") or [])


def contradicts_tools(result: dict[str, Any], request: str) -> bool:
    calls = calls_of(result)
    facts = facts_in([request, *(c["arguments"] for c in calls), *(c.get("result") for c in calls)])
    return bool(unsupported_numbers(answer_text(result), facts))


def right(case: dict[str, Any], result: dict[str, Any]) -> bool:
    expect = case["expect"]
    if expect is None:
        return result["status"] != "error" and not calls_of(result)
    answer = answer_text(result)
    if isinstance(expect, str):
        return expect.casefold() in answer.casefold()
    numbers = signed_numbers(answer)  # "-60" is not 60 (stop 46)
    return (
        bool(numbers)
        and abs(numbers[-1][1] - expect) < 1e-9
        and not contradicts_tools(result, case["request"])
    )


def verdict(result: dict[str, Any]) -> str:
    record = result.get("verification")
    if isinstance(record, dict) and "verdict" in record:
        return str(record["verdict"])
    return "verified" if result["status"] == "completed" else "unverified"


def agreement(result: dict[str, Any]) -> str | None:
    """The ``plans_agree`` check's verdict ([planner] samples), None where none was recorded."""
    checks = (result.get("verification") or {}).get("checks") or []
    return next((c["verdict"] for c in checks if c.get("name") == "plans_agree"), None)


def run_case(engine: Engine, case: dict[str, Any], ttl: int) -> dict[str, Any]:
    started = time.perf_counter()
    calls = 0
    try:
        orchestrator = engine.orchestrator(ttl=ttl)
        for entry in orchestrator.iter(case["request"]):
            calls += entry.usage.get("llm_calls", 0)
        result = orchestrator.result
        assert result is not None
    except AeonError as exc:
        result = {"status": "error", "message": f"{type(exc).__name__}: {exc}", "answer": None}
    seconds = time.perf_counter() - started
    return {
        "id": case["id"],
        "kind": case["kind"],
        "right": right(case, result),
        "status": result["status"],
        "verdict": verdict(result),
        "plans_agree": agreement(result),
        "answer": result.get("answer"),
        "tools": [[c["tool_name"], c["arguments"], c.get("result")] for c in calls_of(result)],
        "llm_calls": calls,
        "seconds": round(seconds, 2),
    }


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def share(part: int, whole: int) -> str:
        return f"{part}/{whole}" + (f" ({100 * part / whole:.0f} %)" if whole else "")

    by_kind = {}
    for kind in ("multi-step", "simple", "no tool"):
        some = [r for r in rows if r["kind"] == kind]
        by_kind[kind] = share(sum(r["right"] for r in some), len(some))
    rights = [r for r in rows if r["right"]]
    return {
        "right": share(len(rights), len(rows)),
        "right_by_kind": by_kind,
        "wrong_reported_verified": sum(1 for r in rows if not r["right"] and r["verdict"] == "verified"),
        "right_verified": share(sum(r["verdict"] == "verified" for r in rights), len(rights)),
        "verdicts": {v: sum(r["verdict"] == v for r in rows) for v in sorted({r["verdict"] for r in rows})},
        # the self-consistency check ([planner] samples), by whether the answer was right
        "plans_agree": dict(
            Counter(
                f"{'right' if r['right'] else 'wrong'} {r['plans_agree']}"
                for r in rows
                if r.get("plans_agree")
            )
        ),
        "model_calls_mean": round(statistics.mean(r["llm_calls"] for r in rows), 2) if rows else 0,
        "seconds_mean": round(statistics.mean(r["seconds"] for r in rows), 2) if rows else 0,
        "seconds_median": round(statistics.median(r["seconds"] for r in rows), 2) if rows else 0,
    }


def run_mode(
    mode: str, cases: list[dict[str, Any]], ttl: int, llm: dict[str, Any], samples: int = 0
) -> list[dict[str, Any]]:
    config = AeonConfig(ttl=ttl).with_choice("llm", "llama_cpp", **llm)
    if samples:  # [planner] samples, on the planner the mode uses
        config = config.with_choice(
            "planner", "recursive" if mode == "multipass" else "model", samples=samples
        )
    if mode == "multipass":
        config = config.multipass()
    rows = []
    with Engine(config) as engine:
        engine.build_selected()  # the model is loaded before the first timing
        for case in cases:
            row = run_case(engine, case, ttl)
            rows.append(row)
            print(
                f"{mode:9} {row['id']:4} {'OK ' if row['right'] else 'BAD'} {row['status']:11} "
                f"{row['verdict']:12} calls {row['llm_calls']:2} {row['seconds']:5.1f}s "
                f"{json.dumps(row['answer'], ensure_ascii=False)[:90]}",
                flush=True,
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", action="append", help="run only this case (repeatable); nothing is written")
    parser.add_argument(
        "--cases", default="cases.jsonl", help="the set, in this folder (default: the frozen cases.jsonl)"
    )
    parser.add_argument("--modes", default="single,multipass")
    parser.add_argument("--ttl", type=int, default=12)
    parser.add_argument("--label", default="after", help="writes results-LABEL.json")
    parser.add_argument("--draft-tokens", type=int, help="[llm] draft_tokens (default: the adapter's)")
    parser.add_argument("--prefix-cache", type=int, help="[llm] prefix_cache (default: the adapter's)")
    parser.add_argument(
        "--samples", type=int, default=0, help="[planner] samples (self-consistency; default 0)"
    )
    args = parser.parse_args()
    llm = {
        key: value
        for key, value in (("draft_tokens", args.draft_tokens), ("prefix_cache", args.prefix_cache))
        if value is not None
    }
    cases = [
        json.loads(line) for line in (HERE / args.cases).read_text(encoding="utf-8").splitlines() if line
    ]
    if args.case:
        cases = [c for c in cases if c["id"] in args.case]
    results = {mode: run_mode(mode, cases, args.ttl, llm, args.samples) for mode in args.modes.split(",")}
    summary = {mode: summarise(rows) for mode, rows in results.items()}
    print(json.dumps(summary, indent=2))
    if not args.case:
        out = HERE / f"results-{args.label}.json"
        out.write_text(json.dumps({"summary": summary, "cases": results}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
