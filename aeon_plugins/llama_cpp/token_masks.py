"""Grammar-constrained sampling that asks the grammar about the likeliest tokens, not the whole vocabulary.

llama-cpp-python puts llama.cpp's grammar sampler before top-k and greedy in its sampler chain, so at every step
the grammar checks every token of the vocabulary: 262,144 for Gemma 3, which made constrained decoding two to four
times slower than free decoding (issue 14 item 7). :class:`GrammarMask` is a logits processor for the same grammar that
checks the highest-scoring tokens first (the best one, then the best 64, 1,024, 16,384, then all of them) and
stops as soon as no unchecked token could be chosen anyway. Every token it leaves finite is one the grammar
allows, so the sampler after it can only pick those. At temperature 0 it picks exactly the token the grammar
sampler would have picked. When sampling, the tokens that can be drawn are the same, but their probabilities can
differ a little: the chain's top-p step no longer counts allowed tokens that its min-p step would drop anyway.

numpy is imported here, so the adapter imports this module only once llama-cpp-python (which needs numpy) is there.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any, Final, Protocol

import numpy as np
from numpy.typing import NDArray

#: The highest-scoring tokens checked after the best one, before the whole vocabulary.
WINDOWS: Final = (64, 1024, 16384)
#: llama.cpp's ``llama_token_data``, so a numpy array of it can be handed to a sampler without copying.
TOKEN_DATA: Final = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)

Tokens = NDArray[np.intc]
Scores = NDArray[np.float32]


class Grammar(Protocol):
    """A grammar's state as decoding goes on: which tokens may come next, and the token that came."""

    def allowed(self, tokens: Tokens) -> NDArray[np.bool_]: ...

    def accept(self, token: int) -> None: ...


def margin(temperature: float, min_p: float) -> float:
    """How far below the best allowed score a token can still be chosen by llama-cpp-python's sampler chain.

    Greedy decoding (temperature 0) only ever takes the best allowed token. Sampling first keeps the top k, top p
    and then only tokens scoring at least ``best + log(min_p)``: a token below that cannot be drawn. With no
    min_p (or a negative temperature, which samples from everything) every token can be, so there is no margin.
    """
    if temperature == 0:
        return 0.0
    return math.log(min_p) if temperature > 0 and min_p > 0 else -math.inf


def candidates(scores: Scores, grammar: Grammar, margin: float) -> Tokens:
    """The tokens the sampler may choose from: allowed ones among the highest scores, found cheaply.

    A window of the best-scoring tokens is enough once no token outside it can be chosen: every unchecked
    score is at most the window's lowest, so the window suffices when that is below the best allowed score plus
    ``margin`` (strictly, so that ties with unchecked tokens cannot change greedy's choice). The best token alone
    suffices for greedy decoding when it is allowed.
    """
    n = scores.size
    best = np.array([np.argmax(scores)], dtype=np.intc)
    if margin == 0.0 and grammar.allowed(best)[0]:
        return best
    for window in WINDOWS:
        if window >= n:
            break
        top = np.argpartition(scores, n - window)[n - window :].astype(np.intc)
        keep = top[grammar.allowed(top)]
        if keep.size and scores[top].min() < scores[keep].max() + margin:
            return keep
    everything = np.arange(n, dtype=np.intc)
    return everything[grammar.allowed(everything)]


class GrammarMask:
    """A llama-cpp-python logits processor that leaves only grammar-allowed candidates finite.

    It is called once per sampled token with the context's tokens so far; the ones generated since the previous
    call are fed to the grammar (each checked first: llama.cpp aborts the process on a token its grammar
    rejects). It ranks tokens as the sampler chain will see them, repetition penalty included, so the token greedy
    decoding picks is the grammar sampler's. An error inside it cannot reach llama.cpp (a callback's exception is
    dropped there): instead it sets ``failed`` and leaves only ``end_token``, so the text ends at once and the
    caller can tell.
    """

    def __init__(
        self,
        grammar: Grammar,
        *,
        margin: float,
        end_token: int,
        repeat_penalty: float = 1.0,
        penalty_last_n: int = 64,
    ) -> None:
        self.grammar = grammar
        self.margin = margin
        self.end_token = end_token
        self.repeat_penalty = repeat_penalty
        self.penalty_last_n = penalty_last_n
        self.failed = False
        self._start: int | None = None  # where the prompt ends in the context
        self._accepted = 0

    def __call__(self, input_ids: NDArray[Any], scores: Scores) -> Scores:
        out = np.full(scores.shape, -np.inf, dtype=np.float32)
        try:
            if self.failed:
                raise RuntimeError("an earlier step failed")
            generated = self._follow(input_ids)
            logits = np.array(scores, dtype=np.float32)  # contiguous (llama-cpp-python passes a strided view)
            keep = candidates(self._penalised(logits, generated), self.grammar, self.margin)
            if not keep.size:
                raise RuntimeError("the grammar allows no token")
            out[keep] = logits[keep]
        except Exception:
            self.failed = True
            out[:] = -np.inf
            out[self.end_token] = 0.0
        return out

    def _follow(self, input_ids: NDArray[Any]) -> NDArray[Any]:
        if self._start is None:
            self._start = len(input_ids)
        generated = input_ids[self._start :]
        for token in generated[self._accepted :].tolist():
            if not self.grammar.allowed(np.array([token], dtype=np.intc))[0]:
                raise RuntimeError(f"token {token} was sampled but the grammar does not allow it")
            self.grammar.accept(token)
            self._accepted += 1
        return generated

    def _penalised(self, logits: Scores, generated: NDArray[Any]) -> Scores:
        """llama.cpp's repetition penalty on the last ``penalty_last_n`` generated tokens (its penalties sampler)."""
        if self.repeat_penalty == 1.0 or self.penalty_last_n <= 0 or not len(generated):
            return logits
        ranked = logits.copy()
        recent = np.unique(np.asarray(generated[-self.penalty_last_n :], dtype=np.intp))
        values = ranked[recent]
        penalty = np.float32(self.repeat_penalty)
        ranked[recent] = np.where(values <= 0, values * penalty, values / penalty)
        return ranked


class LlamaGrammar:
    """A GBNF grammar's state in llama.cpp (its grammar sampler, used on its own), as a :class:`Grammar`."""

    def __init__(self, vocab: Any, gbnf: str, root: str = "root") -> None:
        import llama_cpp

        self._lib: Any = llama_cpp
        self._sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode(), root.encode())
        if not self._sampler:
            raise ValueError("llama.cpp cannot parse the grammar")

    def allowed(self, tokens: Tokens) -> NDArray[np.bool_]:
        data = np.zeros(tokens.size, dtype=TOKEN_DATA)
        data["id"] = tokens
        lib = self._lib
        array = lib.llama_token_data_array(
            data=data.ctypes.data_as(lib.llama_token_data_p), size=tokens.size, selected=-1, sorted=False
        )
        lib.llama_sampler_apply(self._sampler, ctypes.byref(array))  # sets a rejected token's logit to -inf
        result: NDArray[np.bool_] = np.isfinite(data["logit"])
        return result

    def accept(self, token: int) -> None:
        self._lib.llama_sampler_accept(self._sampler, token)

    def close(self) -> None:
        if self._sampler:
            self._lib.llama_sampler_free(self._sampler)
            self._sampler = None
