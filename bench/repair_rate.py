"""SC-003, measured: how many malformed plans the kernel's deterministic repair turns into the plan they meant.

Run by hand (the test suite checks every case one by one in ``tests/repair``):

    python bench/repair_rate.py                  # the rate per family and overall; writes bench/repair_rate.json
    python bench/repair_rate.py --collect out.jsonl   # run the embedded model to gather real malformed plans
    python bench/repair_rate.py --model --out /tmp/r.json   # and the model cases through the model's repair

Every case of ``tests/repair/corpus/*.jsonl`` goes through ``parse_plan(..., deterministic_only=True)``. A case
expects ``repaired`` (the repair must give exactly its ``expected_plan``), ``hostile`` (nothing can be recovered:
a structured AeonError is the only right answer) or ``model`` (information was lost, e.g. a plan cut inside a
step: the deterministic repair must refuse, so the model is asked). Targets: at least 95 % of ``repaired``
cases repaired, every other case refused with an AeonError, and no repair that names a tool the text did not or
changes an argument value.

``--model`` also sends each ``model`` case, once the deterministic repair has refused it, through the whole
repair on the embedded model (the supervisor's model repair, decoding constrained to the plan schema): such a
case counts as repaired when a valid plan comes back that names no tool the text did not and changes no argument
value it states. Information was lost in these cases, so no expected plan exists to compare with: faithful and
valid is what can be checked. The overall rate then counts every case (SC-003 with the model's repairs).

``--collect`` writes the embedded model's raw plans for a set of requests, unconstrained and constrained but cut
by ``max_tokens``, with ``expect`` left empty: a person judges each one before it joins the corpus.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict, deque
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aeon_kernel import AeonError  # noqa: E402
from aeon_plugins.planning import PlanParse  # noqa: E402
from tests.repair.corpus import (  # noqa: E402
    Case,
    added_tools,
    changed_arguments,
    comparable,
    corpus_tools,
    deterministic_outcome,
    load_corpus,
)

OUT = Path(__file__).with_name("repair_rate.json")

REQUESTS = [
    "calculate the sum of 5 and 10",
    "what is 12 times 7?",
    "compute (3 + 4) * 5",
    "divide 100 by 8",
    "what is 15% of 200?",
    "add 2 and 3, then multiply the result by 4",
    "calculate 9 times 9 and then echo the result",
    "subtract 5 from 20, then divide the result by 3",
    "echo the message hello world",
    "repeat back exactly: Aeon is small",
    "say good night",
    "who wrote Hamlet?",
    "tell me something about numbers",
    "what is the weather in Paris today?",
    "translate 'good morning' into French",
]


Run = tuple[str, int, float, bool, int]  # request, max_tokens, temperature, constrained, seed


def model_runs() -> list[Run]:
    # unconstrained: a 270M model mostly echoes the prompt; sampling and a few lengths show what else it writes
    runs = [(r, 96, 0.8, False, i) for i, r in enumerate(REQUESTS[:10])]
    runs += [(REQUESTS[0], 480, 0.0, False, 0), (REQUESTS[5], 480, 0.8, False, 1)]
    # constrained to the plan schema, but cut by max_tokens at lengths from a few tokens to a whole plan
    runs += [(r, (24, 40, 56, 72, 96)[i % 5], 0.0, True, 0) for i, r in enumerate(REQUESTS)]
    runs += [(r, (32, 48, 64, 80, 112)[i % 5], 0.7, True, i) for i, r in enumerate(REQUESTS[5:10])]
    return runs


def collect(out: Path, runs: list[Run] | None = None) -> None:
    """Ask the embedded model for plans with the kernel's own prompt, unconstrained and cut by max_tokens.

    A constrained answer that came out whole is not malformed: it is asked again with one and two tokens fewer,
    so the corpus gets the cuts that only miss the last brackets."""
    from aeon_kernel import ToolRegistry
    from aeon_kernel.kit import loads_strict
    from aeon_plugins.calculator import CalculatorTool
    from aeon_plugins.echo import EchoTool
    from aeon_plugins.llama_cpp import LlamaCppAdapter
    from aeon_plugins.planning.prompts import SYSTEM_PROMPT, plan_prompt, plan_schema

    tools = ToolRegistry([CalculatorTool(), EchoTool()]).export_tools_for_llm()
    llm = LlamaCppAdapter(constrain="grammar")  # llama.cpp's own grammar sampler; no schema: unconstrained
    queue = deque(runs or model_runs())
    written = 0
    with out.open("w", encoding="utf-8") as sink:
        while queue:
            request, max_tokens, temperature, constrained, seed = queue.popleft()
            llm.seed = seed
            schema = plan_schema(tools) if constrained else None
            started = time.perf_counter()
            reply = llm.generate(
                plan_prompt(request, tools), SYSTEM_PROMPT, max_tokens, temperature, json_schema=schema
            )
            text = reply["text"]
            mode = "constrained" if constrained else "unconstrained"
            print(f"{mode} {max_tokens} {time.perf_counter() - started:.1f}s {text[:80]!r}", flush=True)
            try:
                loads_strict(text)
            except ValueError:
                pass
            else:
                used = reply.get("usage", {}).get("completion_tokens", 0)
                queue.extend((request, used - k, temperature, constrained, seed) for k in (1, 2) if used > k)
                continue
            written += 1
            record = {
                "id": f"real-{mode}-{written:02d}",
                "family": f"real {mode}",
                "text": text,
                "expect": None,
                "notes": f"{request!r}; max_tokens={max_tokens}, temperature={temperature}, seed={seed}",
            }
            sink.write(json.dumps(record, ensure_ascii=False) + "\n")
            sink.flush()
    llm.close()


def verdict(case: Case, outcome: PlanParse | AeonError) -> str:
    """``ok``; ``refused`` (a repairable case the repair gave up on); ``wrong`` (a plan that is not the one meant,
    or a plan where none should come out)."""
    if isinstance(outcome, AeonError):
        return "refused" if case.expect == "repaired" else "ok"
    if case.expect != "repaired":
        return "wrong"
    return "ok" if comparable(outcome.plan) == case.expected_plan else "wrong"


def measure(cases: list[Case]) -> dict[str, Any]:
    """Every case through the deterministic repair; per family and overall counts. A non-Aeon exception is
    counted as ``crashed`` (an unstructured failure), never swallowed silently."""
    tools = corpus_tools()
    rows: dict[str, Counter[str]] = defaultdict(Counter)
    problems: list[dict[str, str]] = []
    started = time.perf_counter()
    for case in cases:
        row = rows[case.family]
        row[case.expect] += 1
        try:
            outcome = deterministic_outcome(case, tools)
        except Exception as exc:
            row["crashed"] += 1
            problems.append({"id": case.id, "problem": f"crashed: {type(exc).__name__}: {exc}"})
            continue
        result = verdict(case, outcome)
        row[f"{case.expect} {result}"] += 1
        if result != "ok":
            problems.append(
                {"id": case.id, "problem": f"expected {case.expect}, got {result}: {outcome}"[:300]}
            )
        if isinstance(outcome, PlanParse):
            row["tool-adding repairs"] += bool(added_tools(case.text, outcome.plan))
            row["argument-changing repairs"] += bool(changed_arguments(case.text, outcome.plan))
    seconds = time.perf_counter() - started
    real = [row for family, row in rows.items() if family.startswith("real")]
    hand = [row for family, row in rows.items() if not family.startswith("real")]
    return {
        "cases": len(cases),
        "seconds": round(seconds, 2),
        "overall": _summary(sum(rows.values(), Counter())),
        "hand_written": _summary(sum(hand, Counter())),
        "real_model_outputs": _summary(sum(real, Counter())),
        "families": {family: _summary(row) for family, row in sorted(rows.items())},
        "problems": problems,
    }


def model_repairs(cases: list[Case]) -> dict[str, Any]:
    """The ``model`` cases through the whole repair on the embedded model (see the module docstring)."""
    from aeon_kernel.kit import ModelClient
    from aeon_plugins.llama_cpp import LlamaCppAdapter
    from aeon_plugins.planning import parse_plan
    from aeon_plugins.planning.prompts import plan_schema
    from aeon_plugins.schema_validator import SchemaValidator
    from aeon_plugins.supervisor import DefaultSupervisor

    tools, validator = corpus_tools(), SchemaValidator()
    llm = ModelClient(LlamaCppAdapter())
    supervisor = DefaultSupervisor(llm, validator, tools)
    schema = plan_schema(tools.export_tools_for_llm())
    outcomes: dict[str, str] = {}
    started = time.perf_counter()
    for case in (c for c in cases if c.expect == "model"):
        try:
            plan = parse_plan(case.text, tools, supervisor, validator, schema=schema).plan
        except AeonError as exc:
            outcomes[case.id] = f"no plan: {type(exc).__name__}"
        else:
            unfaithful = added_tools(case.text, plan) or changed_arguments(case.text, plan)
            thinking = all(step.tool is None for step in plan.steps)
            outcomes[case.id] = (
                "unfaithful" if unfaithful else "repaired (thinking steps only)" if thinking else "repaired"
            )
        print(f"{case.id:48} {outcomes[case.id]}", flush=True)
    llm.close()
    repaired = sum(v.startswith("repaired") for v in outcomes.values())
    return {
        "model_cases": len(outcomes),
        "repaired_by_the_model": repaired,
        "thinking_steps_only": sum(v == "repaired (thinking steps only)" for v in outcomes.values()),
        "unfaithful": sum(v == "unfaithful" for v in outcomes.values()),
        "seconds": round(time.perf_counter() - started, 1),
        "outcomes": outcomes,
    }


def targets_met(overall: dict[str, Any]) -> bool:
    return bool(
        (overall["repair_rate"] or 0) >= 0.95
        and overall["hostile_structured"] == overall["hostile"]
        and overall["model_refused"] == overall["model"]
        and overall["tool_adding_repairs"] == overall["argument_changing_repairs"] == overall["crashed"] == 0
    )


def _summary(row: Counter[str]) -> dict[str, Any]:
    def rate(good: int, total: int) -> float | None:
        return round(good / total, 4) if total else None

    refusable = row["hostile"] + row["model"]
    return {
        "cases": row["repaired"] + refusable,
        "repairable": row["repaired"],
        "repaired": row["repaired ok"],
        "repair_rate": rate(row["repaired ok"], row["repaired"]),
        "wrong_repairs": row["repaired wrong"] + row["hostile wrong"] + row["model wrong"],
        "hostile": row["hostile"],
        "hostile_structured": row["hostile ok"],
        "model": row["model"],
        "model_refused": row["model ok"],
        "structured_rate": rate(row["hostile ok"] + row["model ok"], refusable),
        "crashed": row["crashed"],
        "tool_adding_repairs": row["tool-adding repairs"],
        "argument_changing_repairs": row["argument-changing repairs"],
    }


def report(result: dict[str, Any]) -> str:
    header = f"{'family':<24}{'cases':>6}{'repaired':>12}{'rate':>8}{'refused':>12}{'wrong':>7}{'crash':>7}"
    lines = [header, "-" * len(header)]
    totals = [("hand-written", result["hand_written"]), ("real model outputs", result["real_model_outputs"])]
    for family, row in [*result["families"].items(), *totals, ("overall", result["overall"])]:
        refusable = row["hostile"] + row["model"]
        refused = row["hostile_structured"] + row["model_refused"]
        rate = "-" if row["repair_rate"] is None else f"{row['repair_rate']:.0%}"
        if family == "hand-written":
            lines.append("-" * len(header))
        lines.append(
            f"{family:<24}{row['cases']:>6}{row['repaired']:>6}/{row['repairable']:<5}{rate:>8}"
            f"{refused:>6}/{refusable:<5}{row['wrong_repairs']:>7}{row['crashed']:>7}"
        )
    overall = result["overall"]
    lines += [
        "",
        f"Targets (SC-003): repairable cases repaired deterministically {overall['repair_rate']:.1%} (>= 95 %); "
        f"hostile cases ending in a structured error {overall['hostile_structured']}/{overall['hostile']} "
        f"(all); cases needing the model refused {overall['model_refused']}/{overall['model']} (all); "
        f"repairs adding a tool {overall['tool_adding_repairs']} (0); repairs changing an argument "
        f"{overall['argument_changing_repairs']} (0); crashes {overall['crashed']} (0).",
        f"{result['cases']} cases in {result['seconds']} s. Targets "
        + ("met." if targets_met(overall) else "MISSED."),
    ]
    lines += [f"  {p['id']}: {p['problem']}" for p in result["problems"]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--collect", type=Path, metavar="OUT", help="gather the model's raw plans into OUT")
    parser.add_argument("--out", type=Path, default=OUT, help=f"where the JSON goes (default {OUT.name})")
    parser.add_argument("--model", action="store_true", help="the model cases through the model's repair too")
    args = parser.parse_args()
    if args.collect:
        collect(args.collect)
        return
    cases = load_corpus()
    result = measure(cases)
    print(report(result))
    if args.model:
        found = result["with_the_model"] = model_repairs(cases)
        overall = result["overall"]
        fixed = overall["repaired"] + found["repaired_by_the_model"]
        print(
            f"With the model's repairs: {found['repaired_by_the_model']}/{found['model_cases']} model cases "
            f"repaired ({found['thinking_steps_only']} as thinking steps only; {found['unfaithful']} unfaithful); "
            f"every repairable or model case: {fixed}/"
            f"{overall['repairable'] + overall['model']} ({fixed / (overall['repairable'] + overall['model']):.1%})"
        )
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    sys.exit(0 if targets_met(result["overall"]) else 1)


if __name__ == "__main__":
    main()
