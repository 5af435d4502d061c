"""Benchmark: single-pass against multi-pass reasoning (spec 003) on the embedded model, on one task set.

Run by hand (it takes a while: every task runs twice on Gemma 3 270M through llama.cpp):

    python bench/reasoning.py                    # every task, both modes
    python bench/reasoning.py --tasks sum,two_steps --modes multipass
    python bench/reasoning.py --set sequenced    # the second set: sequenced requests only

Per task and mode: success (the expected text in the answer or a tool result; for the ambiguous and missing-tool
tasks, a structured ending that calls no tool that does not exist and gives an answer), the run's status, passes,
TTL allocated and used (cycles), model calls, and wall time. Then the issue's two questions: does multi-pass solve
strictly more tasks, and what does it cost on the simple ones (at most one extra model call is the target)?
Writes ``bench/reasoning.json`` (``bench/reasoning-sequenced.json`` for the second set).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from aeon_kernel import Engine
from aeon_kernel.config import AeonConfig


@dataclass(frozen=True)
class Task:
    name: str
    request: str
    expect: str | None  # text the answer or a tool result must contain; None: judged by kind
    kind: str  # simple, multi-step, ambiguous, missing tool


TASKS = [
    Task("sum", "calculate the sum of 5 and 10", "15", "simple"),
    Task("product", "what is 12 times 7?", "84", "simple"),
    Task("brackets", "compute (3 + 4) * 5", "35", "simple"),
    Task("divide", "divide 100 by 8", "12.5", "simple"),
    Task("power", "what is 2 to the power of 10?", "1024", "simple"),
    Task("subtract", "subtract 58 from 100", "42", "simple"),
    Task("square", "what is 15 squared?", "225", "simple"),
    Task("echo", "echo the message hello world", "hello world", "simple"),
    Task("two_steps", "add 2 and 3, then multiply the result by 4", "20", "multi-step"),
    Task("calc_then_echo", "calculate 9 times 9 and then echo the result", "81", "multi-step"),
    Task("average", "what is the average of 3, 9 and 12?", "8", "multi-step"),
    Task("percent", "what is 20 percent of 150, plus 7?", "37", "multi-step"),
    Task("rectangle", "a rectangle is 6 by 9; what is its area, and its perimeter?", "54", "multi-step"),
    Task("minutes", "how many minutes are in 3 hours and 15 minutes?", "195", "multi-step"),
    Task("numbers", "tell me something about numbers", None, "ambiguous"),
    Task("help", "help me with my math", None, "ambiguous"),
    Task("big", "is 1000 a big number?", None, "ambiguous"),
    Task("plan_trip", "plan a 3-day trip to Lisbon under 600 euros", None, "ambiguous"),
    Task("weather", "what is the weather in Paris today?", None, "missing tool"),
    Task("email", "send an email to my boss saying I am late", None, "missing tool"),
    Task("stock", "what is the current price of Apple stock?", None, "missing tool"),
    Task(
        "translate", "translate 'good morning' into Japanese with a translation service", None, "missing tool"
    ),
]

#: A second set, written after decomposition was (so not a neutral sample): requests that sequence two or three
#: operations the ways people write them, each answered by one number. ``--set sequenced`` runs it.
SEQUENCED = [
    Task("mul_sub", "multiply 6 by 7, then subtract 2", "40", "multi-step"),
    Task("add_div", "add 15 and 27; divide the result by 6", "7", "multi-step"),
    Task("square_minus", "what is 9 squared, minus 1?", "80", "multi-step"),
    Task("three_ops", "start with 50, then add 25, then divide by 3", "25", "multi-step"),
    Task("sub_mul", "subtract 8 from 30, then multiply the result by 2", "44", "multi-step"),
    Task("times_plus", "what is 12 times 12, plus 6?", "150", "multi-step"),
    Task("div_add_mul", "divide 90 by 9, then add 5, then multiply by 4", "60", "multi-step"),
    Task("power_sub", "compute 2 to the power of 5, then subtract 7", "25", "multi-step"),
    Task("after_that", "add 11 and 4, after that multiply by 3", "45", "multi-step"),
    Task("div_times", "what is 100 divided by 4, times 3?", "75", "multi-step"),
    Task("and_then", "take 18, add 6, and then divide by 4", "6", "multi-step"),
    Task("plus_times", "what is 7 plus 8, multiplied by 2?", "30", "multi-step"),
]
SETS = {"main": TASKS, "sequenced": SEQUENCED}


def _texts(result: dict[str, Any]) -> str:
    """The answer and what the tools found: a tool result (also one that is the answer, as when a run fails)
    without the arguments it repeats (the calculator's ``expression``), else an "expected 6" would be met by a
    call of ``18 + 6``; a result that is all arguments (``echo``'s) is kept whole: repeating them is its work."""
    calls = result["final_state"]["tool_history"]
    found = [_found_by(c) for c in calls]
    answer = next(
        (f for c, f in zip(calls, found, strict=True) if c.get("result") == result["answer"]),
        result["answer"],
    )
    return json.dumps([answer, found], ensure_ascii=False)


def _found_by(call: dict[str, Any]) -> Any:
    found, given = call.get("result"), call.get("arguments") or {}
    if not isinstance(found, dict):
        return found
    new = {key: value for key, value in found.items() if given.get(key) != value}
    return new or found


def _found(expected: str, text: str) -> bool:
    """``expected`` in ``text`` as a whole: a number not inside a longer one, nor with a minus sign before it."""
    return re.search(rf"(?<![\w.-]){re.escape(expected)}(?![\w]|\.\d)", text) is not None


def _success(engine: Engine, task: Task, result: dict[str, Any]) -> bool:
    if task.expect is not None:
        return _found(task.expect, _texts(result))
    names = {c["tool_name"] for c in result["final_state"]["tool_history"]}
    structured = result["status"] in {"completed", "failed", "ttl_expired"} and result["answer"] is not None
    return structured and names <= set(engine.tools.list_all())


def run_task(engine: Engine, task: Task, ttl: int) -> dict[str, Any]:
    orchestrator = engine.orchestrator(ttl=ttl)
    started = time.perf_counter()
    calls = 0
    for entry in orchestrator.iter(task.request):
        calls += entry.usage.get("llm_calls", 0)
    seconds = time.perf_counter() - started
    result = orchestrator.result
    assert result is not None
    history = result.get("execution_history") or {}
    return {
        "task": task.name,
        "kind": task.kind,
        "status": result["status"],
        "success": _success(engine, task, result),
        "answer": result["answer"],
        "found": [_found_by(c) for c in result["final_state"]["tool_history"]],
        "passes": history.get("total_passes"),
        "refinements": history.get("total_refinements"),
        "depth": (history.get("profile") or {}).get("reasoning_depth"),
        "ttl_allocated": (history.get("configuration") or {}).get("allocated_ttl") or ttl,
        "ttl_used": result["final_state"]["cycle"],
        "llm_calls": calls,
        "seconds": round(seconds, 2),
        "message": result["message"],
    }


def run_mode(mode: str, tasks: list[Task], ttl: int) -> list[dict[str, Any]]:
    config = AeonConfig(ttl=ttl)
    if mode == "multipass":
        config = config.multipass()
    rows = []
    with Engine(config) as engine:
        engine.orchestrator(ttl)  # load the model before the first timing
        for task in tasks:
            row = run_task(engine, task, ttl)
            rows.append(row)
            print(
                f"  {mode:9} {task.name:15} {row['status']:11} {'OK ' if row['success'] else 'BAD'} "
                f"depth {row['depth'] or '-'} passes {row['passes'] or '-'} ttl {row['ttl_used']}/"
                f"{row['ttl_allocated']} calls {row['llm_calls']:2} {row['seconds']:6.1f}s "
                f"{str(row['answer'])[:50]!r}",
                flush=True,
            )
    return rows


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "tasks": len(rows),
        "solved": sum(r["success"] for r in rows),
        "by_kind": {
            kind: f"{sum(r['success'] for r in rows if r['kind'] == kind)}/{sum(r['kind'] == kind for r in rows)}"
            for kind in sorted({r["kind"] for r in rows})
        },
        "model_calls_mean": round(statistics.mean(r["llm_calls"] for r in rows), 2),
        "seconds_median": statistics.median(r["seconds"] for r in rows),
        "passes_mean": round(statistics.mean(r["passes"] or 1 for r in rows), 2),
        "ttl_used_mean": round(statistics.mean(r["ttl_used"] for r in rows), 2),
        "ttl_allocated_mean": round(statistics.mean(r["ttl_allocated"] for r in rows), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--set", choices=sorted(SETS), default="main", help="the task set (default: main)")
    parser.add_argument("--tasks", help="comma-separated task names (default: all)")
    parser.add_argument("--modes", default="single,multipass")
    parser.add_argument("--ttl", type=int, default=30)
    args = parser.parse_args()
    tasks = [t for t in SETS[args.set] if not args.tasks or t.name in args.tasks.split(",")]
    results = {mode: run_mode(mode, tasks, args.ttl) for mode in args.modes.split(",")}
    summary = {mode: summarise(rows) for mode, rows in results.items()}
    if {"single", "multipass"} <= set(results):
        single = {r["task"]: r for r in results["single"]}
        simple = [r for r in results["multipass"] if r["kind"] == "simple"]
        extra = [r["llm_calls"] - single[r["task"]]["llm_calls"] for r in simple]
        summary["comparison"] = {
            "solved_only_by_multipass": [
                r["task"] for r in results["multipass"] if r["success"] and not single[r["task"]]["success"]
            ],
            "solved_only_by_single": [
                r["task"] for r in results["multipass"] if not r["success"] and single[r["task"]]["success"]
            ],
            "extra_calls_on_simple_tasks_mean": round(statistics.mean(extra), 2) if extra else None,
            "extra_calls_on_simple_tasks_max": max(extra) if extra else None,
        }
    print("\n" + json.dumps(summary, indent=2))
    out = Path(__file__).with_name("reasoning.json" if args.set == "main" else f"reasoning-{args.set}.json")
    out.write_text(
        json.dumps(
            {
                "date": time.strftime("%Y-%m-%d %H:%M"),
                "tasks": [asdict(t) for t in tasks],
                "summary": summary,
                "results": results,
            },
            indent=2,
            default=str,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
