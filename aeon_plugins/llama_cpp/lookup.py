"""Greedy decoding that checks several tokens per model pass: drafts looked up in the context (issue 31).

A decoding step on this model costs about as much for eight tokens as for three single ones: one pass over
262,144 output rows serves them all. A plan mostly repeats what its context holds (the worked example's keys and
tool, the request's numbers), so after the last :data:`NGRAM` tokens the tokens that followed the same
:data:`NGRAM` earlier in the context are a good guess ("prompt lookup decoding", Saxena 2023). Each step evaluates
the token just chosen and up to ``draft`` guessed after it in one batch, then chooses the next token at each
position exactly as the one-token path does (the logits processors, the grammar mask among them, then the highest
score) and keeps the guesses only while they match. Only greedy decoding (temperature 0, no repetition penalty,
no llama.cpp grammar sampler) is routed here: sampling falls back to llama-cpp-python's own loop.

The tokens chosen are the greedy ones for the logits computed. But a checked position's logits come from
llama.cpp's grouped kernel, which rounds differently from the one-row kernel that decodes a token alone (up to
about one logit on this model: bench/decode_batches.py), so a near tie can go the other way.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

#: how many tokens a guess is keyed by: three or five found fewer tokens per step on recorded plans (bench/README.md)
NGRAM: Final = 4
#: batch sizes llama.cpp's CPU kernels are quick at: 2, 3, 5 or 7 tokens cost more than 4 or 8 (bench/README.md)
_QUICK_SIZES: Final = (4, 8, 12, 16)


@dataclass
class Drafts:
    """What the draft batches of one call cost: llama.cpp counts a batch of several tokens as prompt evaluation,
    so the adapter moves these figures from the prompt's to the decoding's."""

    evaluated: int = 0  # tokens evaluated in batches of several
    ms: float = 0.0  # the time those batches took
    kept: int = 0  # guessed tokens that were chosen

    def reset(self) -> None:
        self.evaluated, self.ms, self.kept = 0, 0.0, 0


class Lookup:
    """The context's tokens, and where each :data:`NGRAM` of them last ended before the current end."""

    def __init__(self, tokens: Sequence[int]) -> None:
        self.tokens: list[int] = []
        self._ends: dict[tuple[int, ...], int] = {}
        self.extend(tokens)

    def extend(self, tokens: Sequence[int]) -> None:
        for token in tokens:
            if len(self.tokens) >= NGRAM:
                self._ends[tuple(self.tokens[-NGRAM:])] = len(self.tokens) - 1
            self.tokens.append(token)

    def guess(self, count: int) -> list[int]:
        """The ``count`` tokens that followed the context's last :data:`NGRAM` where they last came before."""
        end = self._ends.get(tuple(self.tokens[-NGRAM:]))
        return [] if end is None else self.tokens[end + 1 : end + 1 + count]


def install(llama: Any, bindings: Any, draft: int) -> Drafts:
    """Route ``llama``'s greedy decoding through draft lookups of up to ``draft`` tokens (0: never). Returns the
    counters its calls add to (the caller resets them)."""
    drafts = Drafts()
    if draft <= 0:
        return drafts
    generate = llama.generate

    def drafted_generate(tokens: Sequence[int], *args: Any, **kwargs: Any) -> Iterator[int]:
        if args or not _greedy(kwargs):
            yield from generate(tokens, *args, **kwargs)
            return
        # llama-cpp-python's own loop reuses the KV cache, evaluates the prompt and chooses the first token
        first = generate(tokens, **kwargs)
        try:
            token = next(first)
        except StopIteration:
            return
        finally:
            first.close()
        processors = list(kwargs.get("logits_processor") or ())
        yield from _decode(llama, bindings, token, draft, processors, drafts)

    llama.generate = drafted_generate
    return drafts


def _greedy(options: dict[str, Any]) -> bool:
    return (
        options.get("temp") == 0
        and options.get("repeat_penalty", 1.0) == 1.0
        and not options.get("frequency_penalty")
        and not options.get("presence_penalty")
        and options.get("grammar") is None
        and options.get("stopping_criteria") is None
    )


def _decode(
    llama: Any, bindings: Any, token: int, draft: int, processors: list[Any], drafts: Drafts
) -> Iterator[int]:
    """From ``token`` (chosen, not yet evaluated) on: evaluate it with a guess, choose at every position, keep the
    guess while it matches. ``llama.n_tokens`` always ends at the last token kept, also when the caller stops."""
    import numpy as np  # here, not at import: the plugin is listed where llama-cpp-python and numpy are not installed

    n_vocab = llama.n_vocab()
    lookup = Lookup(llama.input_ids[: llama.n_tokens].tolist())
    kept = llama.n_tokens
    try:
        while True:
            yield token
            lookup.extend([token])
            guess = lookup.guess(draft)
            batch = [token, *guess]
            if guess:  # pad to a size llama.cpp is quick at (kept, as a guess is, only if chosen)
                size = next((size for size in _QUICK_SIZES if size >= len(batch)), len(batch))
                batch += [guess[-1]] * (size - len(batch))
            batch = batch[: llama.n_ctx() - kept]
            if not batch:
                raise RuntimeError("the reply does not fit in the context (n_ctx)")
            started = time.perf_counter()
            llama._batch.set_batch(batch=batch, n_past=kept, logits_all=True)
            llama._ctx.decode(llama._batch)
            if len(batch) > 1:
                drafts.evaluated += len(batch)
                drafts.ms += (time.perf_counter() - started) * 1000
            llama.input_ids[kept : kept + len(batch)] = batch
            for position in range(len(batch)):
                kept += 1
                logits = np.ctypeslib.as_array(
                    bindings.llama_get_logits_ith(llama._ctx.ctx, position), shape=(n_vocab,)
                )
                token = _choose(logits, llama.input_ids[:kept], processors)
                if position + 1 == len(batch) or batch[position + 1] != token:
                    break
                drafts.kept += 1
                yield token
                lookup.extend([token])
            llama._ctx.kv_cache_seq_rm(-1, kept, -1)
    finally:
        llama.n_tokens = kept
        with contextlib.suppress(Exception):
            llama._ctx.kv_cache_seq_rm(-1, kept, -1)


def _choose(logits: Any, context: Any, processors: list[Any]) -> int:
    """The token llama-cpp-python's greedy chain picks: each processor in turn, then the first highest score."""
    import numpy as np

    scores = np.array(logits, dtype=np.float32)
    for processor in processors:
        scores = processor(context, scores)
    return int(np.argmax(scores))
