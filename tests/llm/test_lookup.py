"""Greedy decoding with looked-up drafts (aeon_plugins/llama_cpp/lookup.py, issue 31): the same tokens as one at a time.

The decoder is driven here by a small stand-in for llama-cpp-python's ``Llama``: its "model" scores the next token
from the tokens before it, and its KV cache refuses a batch that does not follow on from what it holds, as
llama.cpp does. Hypothesis then checks, on prompts and replies that repeat themselves (so drafts are found, and
often wrong), that the drafted path yields exactly the tokens one-at-a-time greedy decoding yields, that the
logits processors see the context one-at-a-time decoding shows them, and that a caller stopping anywhere leaves
the context holding exactly the tokens chosen so far. The real model's side is in test_constrained.py: the
default path, drafted, writes what the grammar sampler writes one token at a time.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeon_plugins.llama_cpp.lookup import NGRAM, Drafts, Lookup, install

VOCAB = 7


def scores_after(context: Sequence[int]) -> np.ndarray:
    """The stand-in model: the next token's scores depend on the last three tokens, so text repeats itself."""
    seed = hash(tuple(context[-3:])) % (2**32)
    return np.random.default_rng(seed).standard_normal(VOCAB).astype(np.float32)


class FakeContext:
    def __init__(self, owner: FakeLlama) -> None:
        self.owner, self.ctx = owner, object()
        self.kv: list[int] = []  # the tokens whose keys and values are held, by position
        self.logits: list[Any] = []

    def decode(self, batch: FakeBatch) -> None:
        if batch.n_past != len(self.kv):
            raise RuntimeError(f"the batch starts at {batch.n_past} but the cache holds {len(self.kv)}")
        self.kv.extend(batch.tokens)
        self.owner.decoded.append(len(batch.tokens))
        self.logits = [
            (ctypes.c_float * VOCAB)(*scores_after(self.kv[: batch.n_past + i + 1]))
            for i in range(len(batch.tokens))
        ]

    def kv_cache_seq_rm(self, seq: int, start: int, end: int) -> bool:
        assert (seq, end) == (-1, -1)
        del self.kv[start:]
        return True


class FakeBatch:
    def set_batch(self, batch: Sequence[int], n_past: int, logits_all: bool) -> None:
        assert logits_all
        self.tokens, self.n_past = list(batch), n_past


class FakeLlama:
    """What the decoder uses of ``llama_cpp.Llama``; its ``generate`` is the one-at-a-time greedy reference."""

    def __init__(self, n_ctx: int = 256) -> None:
        self._n_ctx = n_ctx
        self.input_ids = np.zeros(n_ctx, dtype=np.intc)
        self.n_tokens = 0
        self._ctx = FakeContext(self)
        self._batch = FakeBatch()
        self.decoded: list[int] = []  # the size of each batch decoded

    def n_vocab(self) -> int:
        return VOCAB

    def n_ctx(self) -> int:
        return self._n_ctx

    def generate(self, tokens: Sequence[int], **options: Any) -> Iterator[int]:
        processors = options.get("logits_processor") or []
        self.n_tokens = 0
        self._ctx.kv.clear()
        pending = list(tokens)
        while True:
            self._batch.set_batch(pending, self.n_tokens, True)
            self._ctx.decode(self._batch)
            self.input_ids[self.n_tokens : self.n_tokens + len(pending)] = pending
            self.n_tokens += len(pending)
            scores = np.array(self._ctx.logits[-1][:], dtype=np.float32)
            for processor in processors:
                scores = processor(self.input_ids[: self.n_tokens], scores)
            token = int(np.argmax(scores))
            yield token
            pending = [token]


class Bindings:
    @staticmethod
    def llama_get_logits_ith(ctx: Any, i: int) -> Any:
        (owner,) = [llama for llama in LLAMAS if llama._ctx.ctx is ctx]
        return ctypes.cast(owner._ctx.logits[i], ctypes.POINTER(ctypes.c_float))


LLAMAS: list[FakeLlama] = []


def fake(draft: int, n_ctx: int = 256) -> tuple[FakeLlama, Drafts]:
    llama = FakeLlama(n_ctx)
    LLAMAS[:] = [llama]
    return llama, install(llama, Bindings, draft)


class Seen:
    """A logits processor that records the context it is shown and forbids one token (as a grammar would)."""

    def __init__(self, forbidden: int) -> None:
        self.forbidden, self.contexts = forbidden, []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        self.contexts.append(list(input_ids))
        scores = scores.copy()
        scores[self.forbidden] = -np.inf
        return scores


def take(tokens: Iterator[int], count: int) -> list[int]:
    out = [token for _, token in zip(range(count), tokens, strict=False)]
    tokens.close()  # type: ignore[attr-defined]
    return out


GREEDY = {"temp": 0.0, "repeat_penalty": 1.0}
prompts = st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=24).map(lambda p: p * 3)


@settings(max_examples=150, deadline=None)
@given(
    prompt=prompts, count=st.integers(1, 60), draft=st.integers(1, 15), forbidden=st.integers(0, VOCAB - 1)
)
def test_drafted_decoding_yields_the_one_at_a_time_tokens_and_stops_where_the_caller_does(
    prompt: list[int], count: int, draft: int, forbidden: int
) -> None:
    reference, _ = fake(0)
    seen_one = Seen(forbidden)
    expected = take(reference.generate(prompt, logits_processor=[seen_one], **GREEDY), count)

    llama, drafts = fake(draft)
    seen = Seen(forbidden)
    assert take(llama.generate(prompt, logits_processor=[seen], **GREEDY), count) == expected
    assert seen.contexts == seen_one.contexts  # the processors were shown the same contexts, in order
    # the context holds the prompt and every token chosen but the last, in the model's cache too
    held = [*prompt, *expected[:-1]]
    assert llama.input_ids[: llama.n_tokens].tolist() == held == llama._ctx.kv
    assert drafts.kept <= count - 1


def test_drafts_cut_the_model_passes_on_a_reply_that_repeats_its_prompt() -> None:
    prompt = [1, 2, 3, 4, 5, 6, 0, 2, 4, 6] * 4
    reference, _ = fake(0)
    expected = take(reference.generate(prompt, **GREEDY), 40)
    llama, drafts = fake(7)
    assert take(llama.generate(prompt, **GREEDY), 40) == expected
    passes = len(llama.decoded) - 1  # after the prompt's
    assert drafts.kept > 0 and passes < 39
    assert all(size in (1, 4, 8) for size in llama.decoded[1:])  # the sizes llama.cpp is quick at


def test_a_reply_is_never_decoded_past_the_context() -> None:
    prompt = [1, 2, 3, 4] * 6
    reference, _ = fake(0, n_ctx=32)
    expected = take(reference.generate(prompt, **GREEDY), 8)
    llama, _ = fake(15, n_ctx=32)
    assert take(llama.generate(prompt, **GREEDY), 8) == expected
    assert max(len(llama._ctx.kv), llama.n_tokens) <= 32


@pytest.mark.parametrize(
    "options",
    [
        {"temp": 0.7},
        {"temp": 0.0, "repeat_penalty": 1.1},
        {"temp": 0.0, "grammar": object()},
        {"temp": 0.0, "stopping_criteria": [lambda ids, scores: False]},
    ],
)
def test_sampling_penalties_and_llama_cpps_grammar_sampler_decode_one_token_at_a_time(
    options: dict[str, Any],
) -> None:
    llama = FakeLlama()
    LLAMAS[:] = [llama]
    calls: list[dict[str, Any]] = []
    one_at_a_time = llama.generate

    def spy(tokens: Sequence[int], **kwargs: Any) -> Iterator[int]:
        calls.append(kwargs)
        return one_at_a_time(tokens, logits_processor=kwargs.get("logits_processor"))

    llama.generate = spy  # type: ignore[method-assign]
    drafts = install(llama, Bindings, 7)
    take(llama.generate([1, 2, 3, 4] * 5, **options), 12)
    assert len(calls) == 1 and all(size == 1 for size in llama.decoded[1:])
    assert drafts.kept == 0


def test_a_guess_is_what_followed_the_last_tokens_where_they_came_before() -> None:
    lookup = Lookup([9, 1, 2, 3, 4, 5, 6, 8, 1, 2, 3, 4, 7, 7, 1, 2, 3])
    assert lookup.guess(3) == []  # (7, 1, 2, 3) did not come before
    lookup.extend([4])
    assert NGRAM == 4 and lookup.guess(3) == [7, 7, 1]  # the latest earlier (1, 2, 3, 4), not the first
    lookup.extend([0, 0, 0, 0])
    assert lookup.guess(5) == []  # the tail itself is not a match for itself
    lookup.extend([0])
    assert lookup.guess(5) == [0]  # (0, 0, 0, 0) came before, followed by one more token so far
