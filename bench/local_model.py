"""Benchmark: the embedded default model (Gemma 3 270M through llama.cpp) on a fixed set of requests.

Run by hand, not in the test suite (timings are noisy on shared machines):

    python bench/local_model.py                    # constrained and unconstrained decoding, side by side
    python bench/local_model.py --only constrained --record tests/cassettes   # also record cassettes

Prints, per mode: time to a valid plan (median, max), end-to-end time, model calls and tokens per request,
first-attempt schema validity (plan and all cycles), supervisor repairs, plans the plan check asked for again
(and how many of those second plans ran), and task success (the right final answer). Writes the same as JSON
next to this file (``local_model.json``). Spec SC-001: a valid plan in < 10 s.
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
from aeon_plugins.planning.grounding import facts_in, numbers_in, unsupported_numbers


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
    Case("words_plus", "what is seven plus eight?", "15", "arithmetic in words"),
    Case("words_times", "multiply nine by six", "54", "arithmetic in words"),
    Case("words_minus", "what is one hundred minus thirty-three?", "67", "arithmetic in words"),
    Case("symbols_divide", "12 / 4 = ?", "3", "arithmetic in symbols"),
    Case("symbols_nested", "(10 - 4) * 3", "18", "arithmetic in symbols"),
    Case("decimals", "add 1.5 and 2.25", "3.75", "arithmetic in symbols"),
    Case("percent", "what is 15% of 200?", "30", "percentage"),
    Case("percent_words", "what is 20 percent of 80?", "16", "percentage"),
    Case("percent_quarter", "what is 25% of 60?", "15", "percentage"),
    Case("square", "what is the square of 12?", "144", "power"),
    Case("cube", "what is 3 cubed?", "27", "power"),
    Case("two_steps", "add 2 and 3, then multiply the result by 4", "20", "multi-step"),
    Case("calc_then_echo", "calculate 9 times 9 and then echo the result", "81", "multi-step"),
    Case("chain_divide", "subtract 5 from 20, then divide the result by 3", "5", "multi-step"),
    Case("chain_three", "add 10 and 20, then multiply by 2, then subtract 15", "45", "multi-step"),
    Case("echo", "echo the message hello world", "hello world", "echo"),
    Case("repeat", "repeat back exactly: Aeon is small", "Aeon is small", "echo"),
    Case("say", "say good night", "good night", "echo"),
    Case("echo_word", "echo the word banana", "banana", "echo"),
    Case("ambiguous", "tell me something about numbers", None, "ambiguous"),
    Case("missing_tool", "what is the weather in Paris today?", None, "missing tool"),
    Case("missing_email", "send an email to bob@example.com saying hi", None, "missing tool"),
    Case("missing_translate", "translate 'good morning' into French", None, "missing tool"),
    Case("divide_by_zero", "divide 5 by 0", None, "tool error"),
    Case("zero_denominator", "what is 10 divided by (5 - 5)?", None, "tool error"),
]


def _answer_text(result: dict[str, Any]) -> str:
    answer = result["answer"]
    return answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)


def contradicts_tools(result: dict[str, Any], request: str) -> bool:
    """The final answer states a number that neither the request nor any tool call supports."""
    calls = result["final_state"]["tool_history"]
    if not any(c.get("result") is not None for c in calls):
        return False
    facts = facts_in([request, *(c["arguments"] for c in calls), *(c.get("result") for c in calls)])
    return bool(unsupported_numbers(_answer_text(result), facts))


def succeeded(case: Case, result: dict[str, Any], tools: list[str]) -> bool:
    """The right answer in the run's final answer (not just somewhere in a tool result), grounded in its tools.

    No expected text: a structured ending that called no tool it should not have; for a tool error, the tool
    was called and failed (the run did not answer it by itself)."""
    calls = result["final_state"]["tool_history"]
    if contradicts_tools(result, case.request) or result["status"] not in {"completed", "failed"}:
        return False
    if not {c["tool_name"] for c in calls} <= set(tools):
        return False
    if case.kind == "tool error":
        return any(c.get("error") for c in calls)
    return case.expect is None or states(_answer_text(result), case.expect)


def states(answer: str, expect: str) -> bool:
    """``answer`` states ``expect``: as the last number it states, its result (so neither "1600" nor an operand
    passes for 16), or as text."""
    try:
        wanted = float(expect)
    except ValueError:
        return expect.lower() in answer.lower()
    numbers = numbers_in(answer)
    return bool(numbers) and abs(numbers[-1][1] - wanted) < 1e-9


def plan_check(action: Any) -> bool:
    """The action is the model planner's plan check asking for the plan again (not a repair of invalid output)."""
    return action.action_type == "plan_repair" and bool(action.original_output.get("errors"))


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
    checks = [a for e in cycles for a in e.supervisor_actions if plan_check(a)]
    repairs = [[a for a in e.supervisor_actions if not plan_check(a)] for e in cycles]
    success = succeeded(case, result, engine.tools.list_all())
    return {
        "case": case.name,
        "kind": case.kind,
        "status": result["status"],
        "answer": result["answer"],
        "success": success,
        "contradicts_tools": contradicts_tools(result, case.request),
        "plan_seconds": plan_seconds,
        "seconds": total,
        "llm_calls": sum(e.usage.get("llm_calls", 0) for e in cycles),
        "tokens": tokens,
        "plan_first_attempt_valid": bool(cycles)
        and cycles[0].phase == "plan"
        and plan_seconds is not None
        and not repairs[0],
        "cycles_first_attempt_valid": sum(
            1 for e, r in zip(cycles, repairs, strict=True) if e.usage.get("llm_calls", 0) > 0 and not r
        ),
        "llm_cycles": len(llm_cycles),
        "repairs": sum(len(r) for r in repairs),
        "plan_check": None
        if not checks
        else ("replaced" if checks[0].repaired_output is not None else "kept"),
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
        "plan_s_p95": statistics.quantiles(plans, n=20)[-1] if len(plans) > 1 else None,
        "plan_s_max": max(plans) if plans else None,
        "e2e_s_median": statistics.median(r["seconds"] for r in rows),
        "llm_calls_per_request": statistics.mean(r["llm_calls"] for r in rows),
        "tokens_per_request": statistics.mean(r["tokens"] for r in rows),
        "plan_first_attempt_validity": sum(r["plan_first_attempt_valid"] for r in rows) / len(rows),
        "cycle_first_attempt_validity": sum(r["cycles_first_attempt_valid"] for r in rows)
        / max(1, sum(r["llm_cycles"] for r in rows)),
        "supervisor_repairs": sum(r["repairs"] for r in rows),
        "plans_asked_again": sum(r["plan_check"] is not None for r in rows),
        "second_plans_run": sum(r["plan_check"] == "replaced" for r in rows),
        "task_success": sum(r["success"] for r in rows) / len(rows),
        "answers_contradicting_a_tool": sum(r["contradicts_tools"] for r in rows),
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
            f"{'check ' + row['plan_check'] + ' ' if row['plan_check'] else ''}"
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
