"""Benchmark: the embedded default model (Gemma 3 270M through llama.cpp) on a fixed set of requests.

Run by hand, not in the test suite (timings are noisy on shared machines):

    python bench/local_model.py                    # constrained and unconstrained decoding, side by side
    python bench/local_model.py --only constrained --record tests/cassettes   # also record cassettes

Prints, per mode: time to a valid plan (median, max), end-to-end time, model calls and tokens per request,
first-attempt schema validity (plan and all cycles), supervisor repairs, and task success (the right final
answer). Writes the same as JSON next to this file (``local_model.json``). Spec SC-001: a valid plan in < 10 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from aeon_kernel import Engine
from aeon_kernel.config import AeonConfig


@dataclass(frozen=True)
class Case:
    name: str
    request: str
    expect: str | None  # text that must appear in the answer or a tool result; None: any structured ending
    kind: str


CASES = [
    Case("sum", "calculate the sum of 5 and 10", "15", "arithmetic"),
    Case("product", "what is 12 times 7?", "84", "arithmetic"),
    Case("brackets", "compute (3 + 4) * 5", "35", "arithmetic"),
    Case("divide", "divide 100 by 8", "12.5", "arithmetic"),
    Case("power", "what is 2 to the power of 10?", "1024", "arithmetic"),
    Case("subtract", "subtract 58 from 100", "42", "arithmetic"),
    Case("echo", "echo the message hello world", "hello world", "echo"),
    Case("repeat", "repeat back exactly: Aeon is small", "Aeon is small", "echo"),
    Case("two_steps", "add 2 and 3, then multiply the result by 4", "20", "multi-step"),
    Case("calc_then_echo", "calculate 9 times 9 and then echo the result", "81", "multi-step"),
    Case("ambiguous", "tell me something about numbers", None, "ambiguous"),
    Case("missing_tool", "what is the weather in Paris today?", None, "missing tool"),
]


def _texts(result: dict[str, Any]) -> str:
    """Everything a run produced that could carry the answer: the answer and every tool result."""
    calls = result["final_state"]["tool_history"]
    return json.dumps([result["answer"], [c.get("result") for c in calls]], ensure_ascii=False)


def run_case(engine: Engine, case: Case) -> dict[str, Any]:
    orchestrator = engine.orchestrator(ttl=12)
    started = time.perf_counter()
    plan_seconds = None
    cycles = []
    for entry in orchestrator.iter(case.request):
        cycles.append(entry)
        if entry.phase == "plan" and orchestrator.get_state().plan is not None:
            plan_seconds = time.perf_counter() - started
    total = time.perf_counter() - started
    result = orchestrator.result
    assert result is not None
    llm_cycles = [e for e in cycles if e.usage.get("llm_calls", 0) > 0]
    tokens = sum(e.usage.get("total_tokens", 0) for e in cycles)
    success = (
        result["status"] in {"completed", "failed"} if case.expect is None else case.expect in _texts(result)
    )
    if case.kind == "missing tool":  # success: a structured ending that called no tool it should not have
        names = {c["tool_name"] for c in result["final_state"]["tool_history"]}
        success = success and names <= set(engine.tools.list_all())
    return {
        "case": case.name,
        "kind": case.kind,
        "status": result["status"],
        "answer": result["answer"],
        "success": success,
        "plan_seconds": plan_seconds,
        "seconds": total,
        "llm_calls": sum(e.usage.get("llm_calls", 0) for e in cycles),
        "tokens": tokens,
        "plan_first_attempt_valid": bool(cycles)
        and cycles[0].phase == "plan"
        and plan_seconds is not None
        and not cycles[0].supervisor_actions,
        "cycles_first_attempt_valid": sum(1 for e in llm_cycles if not e.supervisor_actions),
        "llm_cycles": len(llm_cycles),
        "repairs": sum(len(e.supervisor_actions) for e in cycles),
        "tools": [
            [c["tool_name"], c["arguments"], c["result"]] for c in result["final_state"]["tool_history"]
        ],
    }


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    plans = [r["plan_seconds"] for r in rows if r["plan_seconds"] is not None]
    return {
        "requests": len(rows),
        "valid_plans": len(plans),
        "plan_s_median": statistics.median(plans) if plans else None,
        "plan_s_max": max(plans) if plans else None,
        "e2e_s_median": statistics.median(r["seconds"] for r in rows),
        "llm_calls_per_request": statistics.mean(r["llm_calls"] for r in rows),
        "tokens_per_request": statistics.mean(r["tokens"] for r in rows),
        "plan_first_attempt_validity": sum(r["plan_first_attempt_valid"] for r in rows) / len(rows),
        "cycle_first_attempt_validity": sum(r["cycles_first_attempt_valid"] for r in rows)
        / max(1, sum(r["llm_cycles"] for r in rows)),
        "supervisor_repairs": sum(r["repairs"] for r in rows),
        "task_success": sum(r["success"] for r in rows) / len(rows),
    }


def run_mode(constrained: bool, record: Path | None, cases: list[Case]) -> dict[str, Any]:
    """One fresh Engine per request (fresh memory); model loading happens before the timings start."""
    config = AeonConfig().with_choice("llm", "llama_cpp", constrain=constrained)
    rows = []
    for case in cases:
        cassette = None
        if record is not None:
            record.mkdir(parents=True, exist_ok=True)
            cassette = record / f"{case.name}.jsonl"
            cassette.unlink(missing_ok=True)
        with Engine(config, record=cassette) as engine:
            row = run_case(engine, case)
        rows.append(row)
        print(
            f"  {case.name:15} {row['status']:12} plan {row['plan_seconds'] or float('nan'):5.1f}s "
            f"total {row['seconds']:5.1f}s calls {row['llm_calls']} repairs {row['repairs']} "
            f"{'OK ' if row['success'] else 'BAD'} {str(row['answer'])[:60]!r}",
            flush=True,
        )
    if record is not None:  # what the replay tests expect each cassette to reproduce
        expected = {
            r["case"]: {"status": r["status"], "answer": r["answer"], "tools": r["tools"]} for r in rows
        }
        (record / "expected.json").write_text(json.dumps(expected, indent=2, ensure_ascii=False) + "\n")
    return {"constrained": constrained, "summary": summarise(rows), "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", choices=["constrained", "unconstrained"])
    parser.add_argument("--record", type=Path, help="record one cassette per request into this directory")
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    args = parser.parse_args()
    cases = [c for c in CASES if not args.cases or c.name in args.cases.split(",")]
    modes = {"constrained": [True], "unconstrained": [False]}.get(args.only or "", [True, False])
    results = []
    for constrained in modes:
        print(f"== {'constrained' if constrained else 'unconstrained'} decoding", flush=True)
        results.append(run_mode(constrained, args.record if constrained else None, cases))
    print("\n" + json.dumps([{"constrained": r["constrained"], **r["summary"]} for r in results], indent=2))
    out = Path(__file__).with_name("local_model.json")
    out.write_text(
        json.dumps(
            {"date": time.strftime("%Y-%m-%d"), "cases": [asdict(c) for c in cases], "results": results},
            indent=2,
            default=str,
        )
    )


if __name__ == "__main__":
    main()
