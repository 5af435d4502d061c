"""Benchmark: constrained decoding at the speed of free decoding (issue 14 item 7).

Run by hand, not in the test suite (timings are noisy on shared machines):

    python bench/constrained.py                 # 3 repetitions and 4 end-to-end runs per path
    python bench/constrained.py --reps 1 --e2e 0

The embedded model (Gemma 3 270M, llama.cpp) decodes the kernel's own prompts — plan prompts for the echo and
calculator tools, and answer prompts — three ways, alternating: ``free`` (``constrain = false``), ``grammar``
(llama.cpp's grammar sampler over the whole vocabulary) and ``top`` (the default: the grammar asked about the
best-scoring tokens only). Each prompt is decoded twice in a row. The first call starts from an empty context:
its wall time, prompt included, is the time to a valid plan, and its text is compared across repetitions
(determinism) and between ``top`` and ``grammar`` (the same tokens). The second call finds the whole prompt
cached, so its tokens per second are decoding alone. Every output is validated against its schema. End to end:
whole runs (``Engine.run``) per constrained path, a fresh engine each. Writes ``constrained.json`` beside this file.

Why an empty context: with a cached prompt prefix (the kernel's prompts share theirs) the logits differ a little
from a cold evaluation, and that alone can change a greedy choice, on any path.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path
from typing import Any

import llama_cpp

from aeon_kernel import Engine, PlanStep, ToolRegistry
from aeon_kernel.config import AeonConfig
from aeon_kernel.schemas import schema_errors
from aeon_plugins.calculator import CalculatorTool
from aeon_plugins.echo import EchoTool
from aeon_plugins.llama_cpp import LlamaCppAdapter
from aeon_plugins.planning.prompts import (
    ANSWER_SCHEMA,
    SYSTEM_PROMPT,
    plan_prompt,
    plan_schema,
    reasoning_prompt,
)

MODES = {"free": False, "grammar": "grammar", "top": "top"}  # name -> the adapter's constrain option
PLAN_REQUESTS = [
    "calculate the sum of 5 and 10",
    "compute (3 + 4) * 5",
    "echo the message hello world",
    "what is the weather in Paris today?",
]
ANSWERS = [  # (request, state, the step that writes the answer)
    (
        "calculate the sum of 5 and 10",
        'Goal: Add 5 and 10\nResult of step 1: {"expression": "5 + 10", "value": 15}\nCycles left: 10',
        "Report the sum",
    ),
    (
        "echo the message hello world",
        'Goal: Echo hello world\nResult of step 1: {"message": "hello world"}\nCycles left: 10',
        "Tell the user what was echoed",
    ),
]


def prompts() -> list[dict[str, Any]]:
    tools = ToolRegistry([CalculatorTool(), EchoTool()]).export_tools_for_llm()
    schema = plan_schema(tools)
    cases = [
        {"kind": "plan", "name": request, "prompt": plan_prompt(request, tools), "schema": schema}
        for request in PLAN_REQUESTS
    ]
    for request, state, step in ANSWERS:
        step_ = PlanStep(step_id="2", description=step, agent="llm")
        prompt = reasoning_prompt(state, request, step_)
        cases.append({"kind": "answer", "name": request, "prompt": prompt, "schema": ANSWER_SCHEMA})
    return cases


def valid(text: str, schema: dict[str, Any]) -> bool:
    try:
        return schema_errors(schema, json.loads(text)) == []
    except ValueError:
        return False


def decode(adapter: LlamaCppAdapter, case: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    def call() -> tuple[float, dict[str, Any]]:
        started = time.perf_counter()
        out = adapter.generate(case["prompt"], SYSTEM_PROMPT, max_tokens, 0.0, json_schema=case["schema"])
        return time.perf_counter() - started, out

    adapter._llama.reset()  # an empty context: the same state for every path and repetition
    first_s, first = call()
    again_s, again = call()  # the whole prompt is cached now: decoding alone
    tokens = again["usage"]["completion_tokens"]
    return {
        "seconds": first_s,
        "decode_seconds": again_s,
        "tokens": tokens,
        "tokens_per_s": tokens / again_s,
        "valid": [valid(first["text"], case["schema"]), valid(again["text"], case["schema"])],
        "text": first["text"],
    }


def percentile(values: list[float], q: float) -> float | None:
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else None


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    plans = [r for r in rows if r["kind"] == "plan"]
    valid_plans = [r["seconds"] for r in plans if r["valid"][0]]
    return {
        "outputs": 2 * len(rows),
        "valid": sum(sum(r["valid"]) for r in rows),
        "tokens_per_s_median": statistics.median(r["tokens_per_s"] for r in rows),
        "tokens_per_output": statistics.mean(r["tokens"] for r in rows),
        "plans": len(plans),
        "valid_plans": len(valid_plans),
        "plan_s_median": statistics.median(valid_plans) if valid_plans else None,
        "plan_s_p95": percentile(valid_plans, 0.95),
    }


def end_to_end(requests: list[str], modes: list[str], threads: int | None) -> list[dict[str, Any]]:
    """Whole runs, alternating paths; a fresh engine per run (fresh memory), loaded before the clock starts."""
    rows = []
    for i, request in enumerate(requests):
        for mode in modes[i % len(modes) :] + modes[: i % len(modes)]:
            config = AeonConfig().with_choice("llm", "llama_cpp", constrain=MODES[mode], n_threads=threads)
            with Engine(config) as engine:
                orchestrator = engine.orchestrator(ttl=12)
                started = time.perf_counter()
                plan_s = None
                cycles = []
                for entry in orchestrator.iter(request):
                    cycles.append(entry)
                    if plan_s is None and orchestrator.get_state().plan is not None:
                        plan_s = time.perf_counter() - started
                seconds = time.perf_counter() - started
                result = orchestrator.result
                assert result is not None
            row = {
                "mode": mode,
                "request": request,
                "status": result["status"],
                "plan_seconds": plan_s,
                "seconds": seconds,
                "llm_calls": sum(e.usage.get("llm_calls", 0) for e in cycles),
                "repairs": sum(len(e.supervisor_actions) for e in cycles),
                "answer": result["answer"],
            }
            rows.append(row)
            print(
                f"  e2e {mode:7} {request[:34]:34} {row['status']:10} plan {plan_s or math.nan:5.1f}s "
                f"total {seconds:5.1f}s repairs {row['repairs']} {str(row['answer'])[:40]!r}",
                flush=True,
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=3, help="repetitions of every prompt and path")
    parser.add_argument("--max-tokens", type=int, default=AeonConfig().max_tokens, help="constrained paths")
    parser.add_argument("--free-tokens", type=int, default=256, help="max_tokens for free decoding")
    parser.add_argument("--e2e", type=int, default=len(PLAN_REQUESTS), help="end-to-end runs per path")
    parser.add_argument("--threads", type=int, help="llama.cpp threads (default: one per CPU)")
    args = parser.parse_args()
    cases = prompts()
    adapters = {mode: LlamaCppAdapter(constrain=c, n_threads=args.threads) for mode, c in MODES.items()}
    names = list(MODES)
    rows: list[dict[str, Any]] = []
    for rep in range(args.reps):
        for i, case in enumerate(cases):
            shift = (rep + i) % len(names)
            for mode in names[shift:] + names[:shift]:  # a different path goes first each time
                limit = args.free_tokens if mode == "free" else args.max_tokens
                row = {"rep": rep, "mode": mode, "kind": case["kind"], "name": case["name"]}
                row |= decode(adapters[mode], case, limit)
                rows.append(row)
                print(
                    f"rep {rep} {mode:7} {case['kind']:6} {case['name'][:34]:34} {row['tokens']:4} tokens "
                    f"{row['tokens_per_s']:6.1f} tok/s first call {row['seconds']:5.2f}s "
                    f"valid {sum(row['valid'])}/2",
                    flush=True,
                )
    for adapter in adapters.values():
        adapter.close()
    summary = {mode: summarise([r for r in rows if r["mode"] == mode]) for mode in names}
    free = summary["free"]["tokens_per_s_median"]
    texts = {(r["rep"], r["kind"], r["name"], r["mode"]): r["text"] for r in rows}
    pairs = [(k, texts[(*k[:3], "grammar")]) for k in texts if k[3] == "top"]
    outputs: dict[tuple[str, str, str], set[str]] = {}
    for (_, *key), text in texts.items():
        outputs.setdefault((key[0], key[1], key[2]), set()).add(text)
    speed = {(r["rep"], r["kind"], r["name"], r["mode"]): r["tokens_per_s"] for r in rows}
    report = {
        "ratio_top_to_free": summary["top"]["tokens_per_s_median"] / free,
        "ratio_grammar_to_free": summary["grammar"]["tokens_per_s_median"] / free,
        # The same prompt, measured back to back: steadier on a busy machine than the ratio of the medians.
        "ratio_top_to_free_paired_median": statistics.median(
            speed[k] / speed[(*k[:3], "free")] for k in speed if k[3] == "top"
        ),
        "top_identical_to_grammar": f"{sum(texts[k] == text for k, text in pairs)}/{len(pairs)}",
        "deterministic": {m: all(len(v) == 1 for k, v in outputs.items() if k[2] == m) for m in names},
        "summary": summary,
    }
    print(json.dumps(report, indent=2))
    e2e = end_to_end(PLAN_REQUESTS[: args.e2e], ["grammar", "top"], args.threads) if args.e2e else []
    e2e_summary = {
        mode: {
            "runs": len(mine),
            "completed": sum(r["status"] == "completed" for r in mine),
            "repairs": sum(r["repairs"] for r in mine),
            "plan_s_median": statistics.median(
                [r["plan_seconds"] for r in mine if r["plan_seconds"]] or [math.nan]
            ),
            "e2e_s_median": statistics.median(r["seconds"] for r in mine),
        }
        for mode in ("grammar", "top")
        if (mine := [r for r in e2e if r["mode"] == mode])
    }
    if e2e_summary:
        print(json.dumps(e2e_summary, indent=2))
    out = Path(__file__).with_name("constrained.json")
    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "llama_cpp_python": llama_cpp.__version__,
        "settings": vars(args),
    }
    out.write_text(
        json.dumps({**meta, **report, "e2e": e2e_summary, "rows": rows, "e2e_rows": e2e}, indent=2)
    )


if __name__ == "__main__":
    main()
